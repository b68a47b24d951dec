"""Metacontroller's dynamic apply of children: the update check and the create body.

A hook returns partial children. To update one, Metacontroller merges the desired object into
the observed one (``workers.apply.merge``), using the previously applied desired object, kept as Go
JSON in the ``metacontroller.k8s.io/last-applied-configuration`` annotation, to know which
fields it owns. This module reproduces ``ApplyUpdate`` and the create path of Metacontroller
v4.17 as pure functions over JSON-decoded values.

- ``apply_update(observed, desired) -> (merged, changed)``: parse last-applied from the
  observed annotation (``LastAppliedError`` if malformed; absent, empty or ``null`` means none),
  remove the annotation from desired if the hook echoed it (an annotations map left empty is
  removed too, so desired is what the hook would have returned without the echo), merge, force
  the ObjectMeta
  system fields and ``status`` back to their observed values (or remove them where observed
  has none), record ``gojson.dumps(desired)`` in the annotation, and report a change exactly
  when Go's ``reflect.DeepEqual`` would: 3 is not 3.0 (a hook emitting 3.0 updates its child
  on every sync, as in Go), false is not 0, -0.0 equals 0.0.
- ``changes_only_labels(observed, desired, keys)``: whether that update changes nothing but
  the labels ``keys``, on the object or in the annotation's record of them (a label someone
  removed or changed is still recorded with its old value).
- ``put_body(obj)``: what a PUT of ``obj`` sends: ``obj`` without ``metadata.managedFields``
  (see its docstring).
- ``create_body(desired, controller)``: the annotation records ``gojson.dumps(desired)`` with
  an echoed annotation removed the same way, taken before the controller ownerReference is
  appended; the reference is not appended twice.

Invariants:

- Inputs are never mutated; results share unchanged subtrees with them (copy on write). An
  unchanged child is returned as the observed object itself. Treat results as read-only.
- The shortcut (``shortcut=True``, the default): when the observed annotation already equals
  the Go JSON of desired, last-applied is desired's JSON round trip and is not parsed
  (``merge_recorded``). ``shortcut=False`` always parses; both give equal results.
- Annotations are read as ``Unstructured.GetAnnotations`` reads them: an annotations map with
  a non-string value counts as none, and writing the annotation then replaces that map.

The pure core of the other strategy, server-side apply, lives beside it: ``ssa`` (apply body,
comparisons, update planner), ``cache`` (the last applied body per child) and ``upgrade``
(managed fields moved from dynamic apply's Update managers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proto.api import gojson
from proto.api.names import LAST_APPLIED_ANNOTATION
from workers.apply.errors import ApplyError, InvalidObjectError, LastAppliedError
from workers.apply.merge import deep_equal, merge, merge_recorded

__all__ = [
    "LAST_APPLIED_ANNOTATION",
    "SYSTEM_FIELDS",
    "ApplyError",
    "ControllerRef",
    "InvalidObjectError",
    "LastAppliedError",
    "apply_update",
    "changes_only_labels",
    "create_body",
    "deep_equal",
    "last_applied",
    "merge",
    "put_body",
    "revert_system_fields",
]


SYSTEM_FIELDS = (
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
)


class _Missing:
    __slots__ = ()


_MISSING: Any = _Missing()
_JUST_STR = frozenset((str,))


def _annotations(obj: Mapping[str, Any]) -> dict[str, str] | None:
    """``Unstructured.GetAnnotations``: None unless metadata.annotations is an object whose
    values are all strings."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return None
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict):
        return None
    return annotations if _JUST_STR.issuperset(map(type, annotations.values())) else None


def _with_annotation(obj: dict[str, Any], value: str) -> dict[str, Any]:
    """``SetLastApplied``: obj with the annotation set, copying only what changes. Like
    ``SetAnnotations``, annotations that are not all strings are replaced, and a non-object
    metadata is left alone."""
    metadata = obj.get("metadata", _MISSING)
    if metadata is _MISSING:
        metadata = {}
    elif not isinstance(metadata, dict):
        return obj
    annotations = _annotations(obj)
    if annotations is not None and annotations.get(LAST_APPLIED_ANNOTATION) == value:
        return obj
    new_annotations = dict(annotations) if annotations is not None else {}
    new_annotations[LAST_APPLIED_ANNOTATION] = value
    return {**obj, "metadata": {**metadata, "annotations": new_annotations}}


def strip_last_applied(desired: dict[str, Any]) -> dict[str, Any]:
    """desired without the last-applied annotation a hook echoed back (Metacontroller removes
    it before merging and recording); an annotations map left empty is removed as well.
    Annotations that are not all strings are left alone (``GetAnnotations`` sees none)."""
    annotations = _annotations(desired)
    if annotations is None or LAST_APPLIED_ANNOTATION not in annotations:
        return desired
    metadata = desired["metadata"]
    rest = {k: v for k, v in annotations.items() if k != LAST_APPLIED_ANNOTATION}
    if rest:
        return {**desired, "metadata": {**metadata, "annotations": rest}}
    return {**desired, "metadata": {k: v for k, v in metadata.items() if k != "annotations"}}


def last_applied(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """``GetLastApplied``: the parsed annotation, None when absent, empty or JSON null.

    Raises ``LastAppliedError`` when it is not JSON or not a JSON object.
    """
    annotations = _annotations(obj)
    text = annotations.get(LAST_APPLIED_ANNOTATION, "") if annotations is not None else ""
    return _parse_last_applied(text)


def _parse_last_applied(text: str) -> dict[str, Any] | None:
    if text == "":
        return None
    try:
        value = gojson.loads(text)
    except ValueError as exc:
        raise LastAppliedError(
            f"can't unmarshal {LAST_APPLIED_ANNOTATION!r} annotation: {exc}"
        ) from None
    if value is None or isinstance(value, dict):
        return value
    raise LastAppliedError(
        f"can't unmarshal {LAST_APPLIED_ANNOTATION!r} annotation: "
        f"a JSON {type(value).__name__} is not an object"
    )


def revert_system_fields(merged: dict[str, Any], observed: dict[str, Any]) -> dict[str, Any]:
    """merged with the metadata system fields and ``status`` forced to their observed values,
    or removed where observed has none (``revertObjectMetaSystemFields`` and ``revertField``).
    Raises ``InvalidObjectError`` if observed metadata is not an object."""
    original = observed.get("metadata")
    if original is not None and not isinstance(original, dict):
        raise InvalidObjectError(f"observed metadata is a {type(original).__name__}, not an object")
    current = merged.get("metadata", _MISSING)
    if current is not original and (original is not None or isinstance(current, dict)):
        # Go creates metadata when a field must be restored; otherwise removal only
        # reaches into an object.
        meta = current if isinstance(current, dict) else {}
        patched: dict[str, Any] | None = None
        for name in SYSTEM_FIELDS:
            want = original.get(name, _MISSING) if original is not None else _MISSING
            have = meta.get(name, _MISSING)
            if want is have:
                continue
            if patched is None:
                patched = dict(meta)
            if want is _MISSING:
                del patched[name]
            else:
                patched[name] = want
        if patched is not None:
            if current is not _MISSING and not isinstance(current, dict):
                raise InvalidObjectError(
                    f"merged metadata is a {type(current).__name__}, not an object"
                )
            merged = {**merged, "metadata": patched}
    status = observed.get("status", _MISSING)
    if merged.get("status", _MISSING) is not status:
        if status is _MISSING:
            merged = {k: v for k, v in merged.items() if k != "status"}
        else:
            merged = {**merged, "status": status}
    return merged


# --- the update check and the create body --------------------------------------------------


def apply_update(
    observed: Mapping[str, Any], desired: Mapping[str, Any], *, shortcut: bool = True
) -> tuple[dict[str, Any], bool]:
    """Metacontroller's ``ApplyUpdate`` plus its no-op check: ``(merged, changed)``.

    ``merged`` is what an in-place update would write; it is ``observed`` itself when
    nothing changed. Raises ``LastAppliedError`` for a malformed annotation and
    ``InvalidObjectError`` for objects without object metadata.
    """
    if not isinstance(observed, dict) or not isinstance(desired, dict):
        raise InvalidObjectError("observed and desired children must be JSON objects")
    desired = strip_last_applied(desired)
    annotation = gojson.dumps(desired).decode()
    annotations = _annotations(observed)
    recorded = annotations.get(LAST_APPLIED_ANNOTATION, "") if annotations is not None else ""
    merged = merge_recorded(observed, desired) if shortcut and recorded == annotation else None
    if merged is None:
        merged = merge(observed, _parse_last_applied(recorded), desired)
    merged = revert_system_fields(merged, observed)
    merged = _with_annotation(merged, annotation)
    if merged is observed:
        return merged, False
    return merged, not deep_equal(merged, observed)


def changes_only_labels(
    observed: Mapping[str, Any], desired: Mapping[str, Any], keys: frozenset[str]
) -> bool:
    """Whether applying ``desired`` to ``observed`` changes nothing but the labels ``keys``
    (True when it changes nothing at all).

    ``desired`` is probed with those labels as ``observed`` has them: the merged object must
    equal ``observed`` apart from the last-applied annotation, and the desired object the
    annotation would record must equal the recorded one apart from those labels. The
    annotation still records a label someone removed or changed since; the record alone
    then differs in it, which does not count. Raises what ``apply_update`` raises.
    """
    metadata = desired.get("metadata")
    have = observed.get("metadata")
    have = have.get("labels", _MISSING) if isinstance(have, dict) else _MISSING
    if not isinstance(metadata, dict) or not isinstance(have, dict | _Missing | None):
        return False
    labels = metadata.get("labels")
    labels = {k: v for k, v in labels.items() if k not in keys} if isinstance(labels, dict) else {}
    if isinstance(have, dict):
        labels.update((k, have[k]) for k in keys if k in have)
    probe_metadata = {**metadata, "labels": labels}
    if not labels and not isinstance(have, dict):
        del probe_metadata["labels"]  # observed has no labels: none to remove the keys from
    merged, different = apply_update(observed, {**desired, "metadata": probe_metadata})
    if not different:
        return True
    return deep_equal(_without_last_applied(merged), _without_last_applied(observed)) and (
        deep_equal(
            _without_labels(last_applied(merged), keys),
            _without_labels(last_applied(observed), keys),
        )
    )


def _without_last_applied(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj`` without the last-applied annotation (and an annotations map it leaves empty)."""
    annotations = _annotations(obj)
    if annotations is None or LAST_APPLIED_ANNOTATION not in annotations:
        return obj
    return strip_last_applied(dict(obj))


def _without_labels(recorded: dict[str, Any] | None, keys: frozenset[str]) -> dict[str, Any] | None:
    """A recorded desired object without the labels ``keys``, and without a labels map left
    empty (an empty map and none merge alike)."""
    metadata = recorded.get("metadata") if recorded is not None else None
    if recorded is None or not isinstance(metadata, dict):
        return recorded
    labels = metadata.get("labels")
    if not isinstance(labels, dict):
        return recorded
    rest = {k: v for k, v in labels.items() if k not in keys}
    if rest:
        return {**recorded, "metadata": {**metadata, "labels": rest}}
    return {**recorded, "metadata": {k: v for k, v in metadata.items() if k != "labels"}}


def put_body(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without ``metadata.managedFields``: the body to PUT for it (shallow; ``obj``
    itself when it has none).

    An update that carries no managed fields keeps the live object's (the API server's field
    manager, ``decodeLiveOrNew``; a subresource ignores the request's anyway). Every PUT a
    worker makes has its observed resourceVersion as precondition, so the live entries are the
    observed ones, which dynamic apply would otherwise send back unchanged: leaving them out
    changes nothing on the server and spares both sides their encoding (on kube-apiserver
    v1.36.2, a ConfigMap PUT with one entry: 10% of the client's CPU, 2% of the server's)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or "managedFields" not in metadata:
        return obj
    return {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}


@dataclass(frozen=True, slots=True)
class ControllerRef:
    """The parent, as the controller ownerReference Metacontroller puts on children."""

    api_version: str
    kind: str
    name: str
    uid: str

    @classmethod
    def of(cls, parent: Mapping[str, Any]) -> ControllerRef:
        metadata = parent.get("metadata")
        if not isinstance(metadata, dict):
            raise InvalidObjectError("parent metadata is not an object")
        return cls(
            api_version=str(parent.get("apiVersion", "")),
            kind=str(parent.get("kind", "")),
            name=str(metadata.get("name", "")),
            uid=str(metadata.get("uid", "")),
        )

    def as_owner_reference(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def create_body(desired: Mapping[str, Any], controller: ControllerRef) -> dict[str, Any]:
    """The object to POST for a new child: the annotation records ``gojson.dumps(desired)``
    taken before the controller ownerReference is appended (unless desired already has an
    ownerReference with the parent's UID). ``desired`` is used as the hook's final child,
    after namespace defaulting and any controller-uid label or decorator annotation."""
    if not isinstance(desired, dict):
        raise InvalidObjectError("a desired child must be a JSON object")
    desired = strip_last_applied(desired)
    body = _with_annotation(desired, gojson.dumps(desired).decode())
    metadata = body.get("metadata")
    if not isinstance(metadata, dict):
        raise InvalidObjectError("desired child metadata is not an object")
    refs = metadata.get("ownerReferences")
    if not isinstance(refs, list) or not all(isinstance(ref, dict) for ref in refs):
        refs = []  # GetOwnerReferences reads anything else as none
    if any(ref.get("uid") == controller.uid for ref in refs):
        return body
    owned = [*refs, controller.as_owner_reference()]
    return {**body, "metadata": {**metadata, "ownerReferences": owned}}
