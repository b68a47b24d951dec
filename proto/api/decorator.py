"""DecoratorController objects and their hook contract, parsed once into frozen views.

``parse_decorator_controller(obj)`` validates a DecoratorController object (a decoded dict)
and returns a ``DecoratorController`` or raises ``InvalidControllerError`` naming the field.
As in Metacontroller (``pkg/controller/decorator``):

- ``resources[]`` (any number, built-in or custom, namespaced or cluster-scoped) name the
  objects to decorate. Each has a ``labelSelector`` and an ``annotationSelector``
  (``matchAnnotations`` + ``matchExpressions``, read as a label selector over the
  annotations, so its values must be valid label values, else the controller does not start);
  both must match, an absent one matches everything (``DecoratedResource.matches``). Several
  rules may name one resource: an object is decorated when any rule of its resource selects
  it. A rule's ``resource`` is text (plural or short name) until discovery resolves it, so
  which rules apply to an object is decided where the resolved resources are known.
- ``attachments[]`` with ``updateStrategy.method`` OnDelete (default), Recreate or InPlace.
  ``RollingRecreate`` and ``RollingInPlace`` pass validation (the CRD enum accepts them) and
  act like Recreate and InPlace, as in Metacontroller, which has no rolling logic for
  decorators; ``proto.api.unsupported`` warns about them.
- ``hooks.sync`` (required here, as for CompositeControllers: without it every sync would
  fail), ``hooks.finalize``, ``hooks.customize``; ``resyncPeriodSeconds``. Each hook's
  connection settings (TLS, credentials, ETag) and ``spec.endpointConfigs`` are validated as
  for CompositeControllers (``proto.api.endpoints``); ``connection_settings()`` says which
  settings each hook uses.

The hook contract (``decode_decorator_response``): the request is ``{controller, object,
attachments, related, finalizing}``; the answer's ``labels`` and ``annotations`` map keys to a
string or ``null`` (``null`` removes the key, keys not named are left alone), ``status``
replaces ``.status`` unless ``null`` or absent, ``attachments`` lists the desired attachments
(checked like a CompositeController's children), ``resyncAfterSeconds``, ``finalized``,
``events`` and ``conditions`` as for CompositeControllers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proto.api import names
from proto.api.controllers import (
    ChildResource,
    CompositeHooks,
    HookName,
    LambdaController,
    ResponseMode,
    api_version_of,
    check_type,
    parse_child_resources,
    parse_hooks,
    parse_resync_period,
)
from proto.api.decoding import FREE, OPAQUE, Items, Struct
from proto.api.endpoints import parse_endpoint_configs
from proto.api.errors import HookResponseError, InvalidControllerError
from proto.api.fields import Fields, join, json_type
from proto.api.hooks import ANSWER_SHAPES, HookAnswer, check_child, decode_fields
from proto.api.selectors import Selector, SelectorError, from_label_selector

DecoratorHooks = CompositeHooks
"""The same three hooks (``sync`` required, ``finalize``, ``customize``)."""


@dataclass(frozen=True, slots=True)
class DecoratedResource:
    """One ``resources[]`` rule; ``resource`` as written (plural or short name)."""

    api_version: str
    resource: str
    label_selector: Selector = Selector.everything()  # noqa: RUF009 (frozen, immutable)
    annotation_selector: Selector = Selector.everything()  # noqa: RUF009
    ignore_status_changes: bool = False

    def matches(
        self, labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None
    ) -> bool:
        """Whether both selectors match (an absent selector matches everything)."""
        return self.label_selector.matches(labels) and self.annotation_selector.matches(annotations)


@dataclass(frozen=True, slots=True, kw_only=True)
class DecoratorController(LambdaController):
    resources: tuple[DecoratedResource, ...]
    attachments: tuple[ChildResource, ...]

    @property
    def finalizer(self) -> str:
        return names.decorator_finalizer(self.name)


def _annotation_selector(fields: Fields, key: str) -> Selector:
    raw = fields.get_raw_object(key)
    if raw is None:
        return Selector.everything()
    try:
        return from_label_selector(
            {
                "matchLabels": raw.get("matchAnnotations"),
                "matchExpressions": raw.get("matchExpressions"),
            }
        )
    except SelectorError as err:
        raise fields.fail(key, str(err)) from None


def _parse_resources(spec: Fields) -> tuple[DecoratedResource, ...]:
    rules = spec.get_objects("resources")
    if not rules:
        raise spec.fail("resources", "required (at least one resource to decorate)")
    return tuple(
        DecoratedResource(
            api_version=api_version_of(item, "apiVersion"),
            resource=item.require_str("resource"),
            label_selector=item.get_selector("labelSelector") or Selector.everything(),
            annotation_selector=_annotation_selector(item, "annotationSelector"),
            ignore_status_changes=bool(item.get_bool("ignoreStatusChanges")),
        )
        for item in rules
    )


def parse_decorator_controller(obj: Mapping[str, Any]) -> DecoratorController:
    """Validate a DecoratorController object. Raises ``InvalidControllerError``."""
    top = Fields.of(obj, "", InvalidControllerError)
    check_type(top, names.DECORATOR_CONTROLLER)
    metadata = top.require_object("metadata")
    spec = top.require_object("spec")
    return DecoratorController(
        name=metadata.require_str("name"),
        uid=metadata.get_str("uid") or "",
        resources=_parse_resources(spec),
        attachments=parse_child_resources(spec, "attachments", "attachment"),
        hooks=parse_hooks(spec, names.DECORATOR_CONTROLLER),
        resync_period=parse_resync_period(spec),
        endpoint_configs=parse_endpoint_configs(spec),
        raw=obj,
    )


# --- the hook contract ------------------------------------------------------------------------


def sync_request(
    *,
    controller: Mapping[str, Any],
    object: Mapping[str, Any],
    attachments: Mapping[str, Any],
    related: Mapping[str, Any],
    finalizing: bool,
) -> dict[str, Any]:
    """The body of a decorator's sync (``finalizing=False``) or finalize (``True``) request."""
    return {
        "controller": controller,
        "object": object,
        "attachments": attachments,
        "related": related,
        "finalizing": finalizing,
    }


_RESPONSE_SHAPE = Struct(
    {**ANSWER_SHAPES, "labels": FREE, "annotations": FREE, "attachments": Items(OPAQUE)}
)

MetadataChanges = dict[str, str | None]
"""Key -> new value; ``None`` removes the key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DecoratorResponse(HookAnswer):
    """A decorator's sync or finalize answer; its ``status`` ``None`` leaves the status as it
    is."""

    labels: MetadataChanges
    annotations: MetadataChanges
    attachments: tuple[dict[str, Any], ...]


def _changes(top: Fields, key: str) -> MetadataChanges:
    raw = top.get_raw_object(key)
    if raw is None:
        return {}
    for name, value in raw.items():
        if value is not None and not isinstance(value, str):
            raise HookResponseError(
                f"{join(key, name)}: must be a string or null, not {json_type(value)}"
            )
    return dict(raw)


def decode_decorator_response(body: bytes, *, mode: ResponseMode) -> DecoratorResponse:
    """Parse a decorator's sync or finalize answer. Raises ``HookResponseError``."""
    top, warnings = decode_fields(body, _RESPONSE_SHAPE, mode)
    attachments = tuple(
        check_child(item, join("attachments", i))
        for i, item in enumerate(top.get_list("attachments"))
    )
    return DecoratorResponse.read(
        top,
        warnings,
        labels=_changes(top, "labels"),
        annotations=_changes(top, "annotations"),
        attachments=attachments,
    )


__all__ = [
    "DecoratedResource",
    "DecoratorController",
    "DecoratorResponse",
    "HookName",
    "decode_decorator_response",
    "parse_decorator_controller",
    "sync_request",
]
