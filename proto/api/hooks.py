"""The CompositeController hook contract: request bodies, response parsing, desired children.

Requests (dicts, encoded by the caller):

- sync and finalize: ``{controller, parent, children, related, finalizing}`` with
  ``finalizing`` false for sync and true for finalize; ``children`` and ``related`` are object
  maps (``proto.api.objectmap``).
- customize: ``{controller, parent}``.

Responses:

- ``decode_sync_response(body, mode=...)`` -> ``SyncResponse``. ``status`` is ``None`` when the
  hook returned ``null`` or nothing: a CompositeController replaces it with ``{}`` before
  injecting ``observedGeneration`` (a DecoratorController leaves the status unchanged).
  ``resyncAfterSeconds`` <= 0 or absent means no resync (``None``). ``finalized`` matters for
  finalize. Each of ``children`` must be an object with ``apiVersion``, ``kind`` and
  ``metadata.name``; ``children: [null]`` is an error here, not a crash later. ``events``
  and ``conditions`` (metashard's) are read by ``proto.api.reports``: a malformed entry of
  theirs is left out and described in ``reports.problems``, it does not refuse the answer.
- ``decode_customize_response(body, ...)`` -> ``CustomizeResponse`` of related rules.
- In ``strict`` mode unknown and duplicate fields are errors; in ``loose`` mode they come back
  as ``warnings`` for the caller to log (``proto.api.decoding`` says which fields count).

Then ``desired_children(...)`` checks the children against the parent, after normalizing them
as Metacontroller does (namespace defaulted to the parent's for namespaced types; under
``generateSelector`` the ``controller-uid=<parent uid>`` label added when absent). Errors:
undeclared type, another namespace than a namespaced parent's, duplicates, labels that do not
match the parent selector.

Every failure raises ``HookResponseError`` with a message meant for the parent's ``SyncError``
event; the reconcile that gets it writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from proto.api import names
from proto.api.controllers import HookVersion, ResponseMode
from proto.api.decoding import FREE, OPAQUE, Items, Shape, Struct, decode
from proto.api.errors import HookResponseError
from proto.api.fields import Fields, join, json_type
from proto.api.objectmap import ObjectMap, TypeKey
from proto.api.related import RelatedRule, check_rule_for_parent, parse_related_rule
from proto.api.reports import CONDITIONS_SHAPE, EVENTS_SHAPE, NO_REPORTS, Reports, read_reports
from proto.api.selectors import Selector
from proto.api.ttl import TTL_FIELD, TTL_SHAPE, read_ttl

# --- requests ---------------------------------------------------------------------------------


def sync_request(
    *,
    controller: Mapping[str, Any],
    parent: Mapping[str, Any],
    children: ObjectMap,
    related: ObjectMap,
    finalizing: bool,
) -> dict[str, Any]:
    """The body of a sync (``finalizing=False``) or finalize (``True``) request."""
    return {
        "controller": controller,
        "parent": parent,
        "children": children,
        "related": related,
        "finalizing": finalizing,
    }


def customize_request(
    *, controller: Mapping[str, Any], parent: Mapping[str, Any]
) -> dict[str, Any]:
    """The body of a customize request."""
    return {"controller": controller, "parent": parent}


# --- responses --------------------------------------------------------------------------------

ANSWER_SHAPES: Mapping[str, Shape] = {
    "status": FREE,
    "resyncAfterSeconds": FREE,
    "finalized": FREE,
    "events": EVENTS_SHAPE,
    "conditions": CONDITIONS_SHAPE,
    TTL_FIELD: TTL_SHAPE,
}
"""The fields of every sync or finalize answer (``HookAnswer``), of either kind."""

_SYNC_SHAPE = Struct({**ANSWER_SHAPES, "children": Items(OPAQUE)})
_SELECTOR_SHAPE = Struct(
    {
        "matchLabels": FREE,
        "matchExpressions": Items(Struct({"key": FREE, "operator": FREE, "values": FREE})),
    }
)
_CUSTOMIZE_SHAPE = Struct(
    {
        "relatedResources": Items(
            Struct(
                {
                    "apiVersion": FREE,
                    "resource": FREE,
                    "labelSelector": _SELECTOR_SHAPE,
                    "namespaceSelector": _SELECTOR_SHAPE,
                    "namespace": FREE,
                    "names": FREE,
                }
            )
        )
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HookAnswer:
    """What every sync or finalize answer carries (``SyncResponse``, and a DecoratorController's
    ``proto.api.decorator.DecoratorResponse``)."""

    status: dict[str, Any] | None
    resync_after_seconds: float | None
    finalized: bool
    warnings: tuple[str, ...] = ()
    """Loose-mode decoding problems (unknown or duplicate fields), to log."""
    reports: Reports = NO_REPORTS
    """The answer's ``events`` and ``conditions`` (``proto.api.reports``); a malformed
    ``ttlSeconds`` is among its problems."""
    ttl_seconds: float | None = None
    """How long the answer may be reused for the same request (``proto.api.ttl``)."""

    @classmethod
    def read(cls, top: Fields, warnings: tuple[str, ...], **fields: Any) -> Self:
        """The answer of the decoded ``top`` (``decode_fields``), with the ``fields`` of
        ``cls`` its own: ``resyncAfterSeconds`` <= 0 reads as ``None``."""
        status = top.get_raw_object("status")
        resync = top.get_number("resyncAfterSeconds")
        ttl, ttl_problem = read_ttl(top)
        return cls(
            status=None if status is None else dict(status),
            resync_after_seconds=resync if resync is not None and resync > 0 else None,
            finalized=bool(top.get_bool("finalized")),
            warnings=warnings,
            reports=read_reports(top).with_problem(ttl_problem),
            ttl_seconds=ttl,
            **fields,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncResponse(HookAnswer):
    """A sync or finalize hook's answer."""

    children: tuple[dict[str, Any], ...]
    """In the order the hook returned them (rollouts follow this order)."""


@dataclass(frozen=True, slots=True)
class CustomizeResponse:
    related_rules: tuple[RelatedRule, ...]
    warnings: tuple[str, ...] = ()


def decode_fields(body: bytes, shape: Struct, mode: ResponseMode) -> tuple[Fields, tuple[str, ...]]:
    """Decode ``body`` to ``shape``; strict mode fails on the problems loose mode returns."""
    decoded = decode(body, shape)
    if decoded.issues and mode is ResponseMode.STRICT:
        raise HookResponseError(
            "strict decoding of the response failed: " + "; ".join(decoded.issues)
        )
    return Fields(decoded.value, "", HookResponseError), decoded.issues


def check_child(child: Any, path: str) -> dict[str, Any]:
    """A desired child (or attachment): an object with apiVersion, kind and metadata.name."""
    if not isinstance(child, dict):
        raise HookResponseError(f"{path}: a child must be an object, not {json_type(child)}")
    fields = Fields(child, path, HookResponseError)
    fields.require_str("apiVersion")
    fields.require_str("kind")
    metadata = fields.require_object("metadata")
    metadata.require_str("name")
    metadata.get_str("namespace")
    return child


def decode_sync_response(body: bytes, *, mode: ResponseMode) -> SyncResponse:
    """Parse a sync or finalize response body. Raises ``HookResponseError``."""
    top, warnings = decode_fields(body, _SYNC_SHAPE, mode)
    children = tuple(
        check_child(child, join("children", i)) for i, child in enumerate(top.get_list("children"))
    )
    return SyncResponse.read(top, warnings, children=children)


def decode_customize_response(
    body: bytes, *, mode: ResponseMode, version: HookVersion, parent_namespace: str
) -> CustomizeResponse:
    """Parse a customize response body for one parent. Raises ``HookResponseError``."""
    top, warnings = decode_fields(body, _CUSTOMIZE_SHAPE, mode)
    rules = []
    for item in top.get_objects("relatedResources"):
        rule = parse_related_rule(item)
        check_rule_for_parent(
            rule, version=version, parent_namespace=parent_namespace, path=item.path
        )
        rules.append(rule)
    return CustomizeResponse(related_rules=tuple(rules), warnings=warnings)


# --- desired children -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChildType:
    """A declared child type as discovery resolved it."""

    api_version: str
    kind: str
    namespaced: bool

    @property
    def key(self) -> TypeKey:
        return TypeKey(self.api_version, self.kind)


@dataclass(frozen=True, slots=True)
class DesiredChild:
    type: TypeKey
    namespace: str
    """``""`` for cluster-scoped types."""
    name: str
    object: dict[str, Any]


def _labels(metadata: dict[str, Any], what: str) -> dict[str, Any]:
    labels = metadata.get("labels")
    if labels is None:
        return {}
    if not isinstance(labels, dict):
        raise HookResponseError(
            f"invalid labels on desired child {what}: must be an object, not {json_type(labels)}"
        )
    for key, value in labels.items():
        if not isinstance(value, str):
            raise HookResponseError(
                f"invalid labels on desired child {what}: label {key!r} must be a string, "
                f"not {json_type(value)}"
            )
    return labels


def desired_children(
    children: Sequence[dict[str, Any]],
    *,
    parent_namespace: str,
    parent_uid: str,
    child_types: Iterable[ChildType],
    selector: Selector,
    generate_selector: bool,
    declared_in: str = "childResources",
) -> tuple[DesiredChild, ...]:
    """Normalize and check the desired children of one parent, in the hook's order.

    ``children`` come from ``decode_sync_response`` and are normalized in place: the namespace
    of a namespaced child defaults to ``parent_namespace``, and with ``generate_selector`` the
    ``controller-uid`` label is set to ``parent_uid`` unless present. ``selector`` is the
    parent's (the generated ``controller-uid`` one under ``generate_selector``).
    ``declared_in`` names the field that declares the types (a DecoratorController's
    ``attachments``) in messages. Raises ``HookResponseError``.
    """
    declared = {t.key: t for t in child_types}
    seen: set[tuple[TypeKey, str, str]] = set()
    result: list[DesiredChild] = []
    for child in children:
        metadata = child["metadata"]
        key = TypeKey(child["apiVersion"], child["kind"])
        name = metadata["name"]
        child_type = declared.get(key)
        if child_type is None:
            listed = ", ".join(sorted(t.group_key for t in declared)) or "none"
            raise HookResponseError(
                f"desired child {key.kind} {name} has type {key.group_key}, which is not one of "
                f"the controller's {declared_in} ({listed})"
            )
        namespace = ""
        if child_type.namespaced:
            namespace = metadata.get("namespace") or parent_namespace
            if not namespace:
                raise HookResponseError(
                    f"desired child {key.kind} {name} needs metadata.namespace: its type is "
                    "namespaced and the parent is cluster-scoped"
                )
            if parent_namespace and namespace != parent_namespace:
                raise HookResponseError(
                    f"desired child {key.kind} {namespace}/{name} is not in the parent's "
                    f"namespace {parent_namespace}: children of a namespaced parent must be in "
                    "its namespace"
                )
            metadata["namespace"] = namespace
        what = f"{key.kind} {namespace}/{name}"
        labels = _labels(metadata, what)
        if generate_selector and names.CONTROLLER_UID_LABEL not in labels:
            labels[names.CONTROLLER_UID_LABEL] = parent_uid
            metadata["labels"] = labels
        if not selector.matches(labels):
            raise HookResponseError(f"labels on desired child {what} don't match parent selector")
        identity = (key, namespace, name)
        if identity in seen:
            raise HookResponseError(f"duplicate desired child {what} ({key.group_key})")
        seen.add(identity)
        result.append(DesiredChild(type=key, namespace=namespace, name=name, object=child))
    return tuple(result)
