"""Metacontroller's dynamic apply: a convention-based 3-way merge of children.

A hook returns partial children. To update one, Metacontroller merges the desired object into
the observed one, using the previously applied desired object (kept as Go JSON in the
``metacontroller.k8s.io/last-applied-configuration`` annotation) to know which fields it owns.
This module reproduces ``pkg/dynamic/apply`` and ``ApplyUpdate`` of Metacontroller v4.17,
quirks included, as pure functions over JSON-decoded values.

Merge rules (``merge``):

- Dispatch is on the observed value. Observed object: keys recorded in last-applied and absent
  (not merely null) from desired are deleted, with their whole observed subtree; every desired
  key is merged recursively; other keys are kept. A desired value that is not an object counts
  as ``{}`` (Go quirk: ``"a": "flat"`` or ``"a": null`` over an object only deletes applied
  sub-keys). Observed list: a list-map if every item of the observed, last-applied and desired
  lists is an object and all share one of ``containerPort, port, mountPath, name, uid, ip,
  path`` (first in that order wins), else atomic and replaced by desired (``null`` when desired
  is not a list). Observed scalar, null or absent: desired wins, copied verbatim.
- List-maps merge like objects keyed by Go's ``%v`` of the key value (80 and "80" collide; the
  last duplicate wins the lookup). The result keeps observed order, one entry per observed item
  whose key survived (duplicates repeat the merged item), then new desired items in desired
  order.
- No last-applied (``None``) deletes nothing.

``apply_update`` is Metacontroller's update check: parse last-applied from the observed
annotation (``LastAppliedError`` if malformed), blank the annotation in desired if the hook
echoed it (Go sets it to ``""``; it does not remove it), merge, force the ObjectMeta system
fields and ``status`` back to their observed values (or remove them if observed has none),
write the annotation as ``gojson.dumps(desired)``, and report a change exactly when Go's
``reflect.DeepEqual`` would: types count (3 is not 3.0, false is not 0), -0.0 equals 0.0.

Invariants:

- Inputs are never mutated. Results share unchanged subtrees with the inputs (copy on write,
  no deep copies): an unchanged subtree of the result *is* the observed subtree, and an
  unchanged ``apply_update`` returns the observed object itself. Treat results as read-only.
- The shortcut (``shortcut=True``): when the observed annotation already equals the Go JSON of
  desired, the last-applied value differs from desired at most in the Go types of numbers, so
  desired is used as last-applied and the annotation is not parsed. Only ``%v`` keys of
  list-maps could tell the two apart; a list-map key that is not a string, bool, null or int64
  abandons the shortcut. ``shortcut=False`` always takes the full path; both give equal results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain, repeat
from operator import is_, itemgetter
from typing import Any

import orjson

from proto.api import gojson

__all__ = [
    "LAST_APPLIED_ANNOTATION",
    "SYSTEM_FIELDS",
    "ApplyError",
    "ControllerRef",
    "InvalidObjectError",
    "LastAppliedError",
    "apply_update",
    "create_body",
    "deep_equal",
    "last_applied",
    "merge",
    "revert_system_fields",
]

LAST_APPLIED_ANNOTATION = "metacontroller.k8s.io/last-applied-configuration"

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

_MERGE_KEYS = ("containerPort", "port", "mountPath", "name", "uid", "ip", "path")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


class ApplyError(ValueError):
    """The child cannot be applied as it stands; report it on the parent and retry later.

    ApplyError
    ├── LastAppliedError     the last-applied annotation is not a JSON object
    └── InvalidObjectError   an object or its metadata is not a JSON object
    """


class LastAppliedError(ApplyError):
    """The observed child's last-applied annotation cannot be parsed."""


class InvalidObjectError(ApplyError):
    """An object, or its ``metadata``, does not have the shape of a Kubernetes object."""


class _Missing:
    __slots__ = ()


_MISSING: Any = _Missing()


class _Desired:
    """Stands for last-applied in the shortcut: "the JSON round trip of desired"."""

    __slots__ = ()


_ROUND_TRIP = _Desired()


class _UnstableKey(Exception):
    """A list-map key whose ``%v`` text could change through a JSON round trip."""


# --- comparison ----------------------------------------------------------------------------


def deep_equal(a: object, b: object) -> bool:
    """Go's ``reflect.DeepEqual`` on apimachinery-decoded values: types matter (int is not
    float, bool is not int), floats compare with ``==``, null differs from absent."""
    return _equal(a, b, False)


def _equal(a: Any, b: Any, strict: bool) -> bool:
    """``deep_equal``; with ``strict``, also tells -0.0 from 0.0 (the values are then
    interchangeable in every respect, including their JSON text)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        if isinstance(a, dict) and isinstance(b, dict):
            kind = dict
        elif isinstance(a, list) and isinstance(b, list):
            kind = list
        else:
            return False
    if kind is dict:
        if len(a) != len(b):
            return False
        for key, value in a.items():
            other = b.get(key, _MISSING)
            if other is _MISSING or not _equal(value, other, strict):
                return False
        return True
    if kind is list:
        return len(a) == len(b) and all(_equal(x, y, strict) for x, y in zip(a, b, strict=True))
    if kind is float and strict and a == 0.0:
        return b == 0.0 and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


# --- merge ---------------------------------------------------------------------------------


def merge(
    observed: Mapping[str, Any],
    last_applied: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
) -> dict[str, Any]:
    """Metacontroller's ``apply.Merge``: apply the change from ``last_applied`` to
    ``desired`` onto ``observed``. The result shares unchanged subtrees with the inputs."""
    if not isinstance(observed, dict):
        raise InvalidObjectError(f"observed object is a {type(observed).__name__}, not an object")
    return _merge_object(
        observed,
        last_applied if isinstance(last_applied, dict) else None,
        desired if isinstance(desired, dict) else None,
    )


def _merge_object(
    observed: dict[str, Any],
    last: dict[str, Any] | _Desired | None,
    desired: dict[str, Any] | None,
) -> dict[str, Any]:
    # Hot path: exact type checks (JSON decoding yields plain dict, list, str, int, float,
    # bool, None) and no helper calls for scalars.
    out: dict[str, Any] | None = None
    if type(last) is dict:
        for key in last:
            if (desired is None or key not in desired) and key in observed:
                if out is None:
                    out = dict(observed)
                del out[key]
    if desired:
        get = observed.get
        for key, want in desired.items():
            have = get(key, _MISSING)
            kind = type(have)
            if kind is dict:
                if type(want) is not dict:
                    want = None
                elif len(have) == len(want) and have == want and _flat_identical(have, want):
                    continue
                if last is _ROUND_TRIP:
                    prior: Any = last
                else:
                    prior = last.get(key) if type(last) is dict else None
                    if type(prior) is not dict:
                        prior = None
                new: Any = _merge_object(have, prior, want)
                if new is have:
                    continue
            elif kind is list:
                if last is _ROUND_TRIP:
                    prior = last
                else:
                    prior = last.get(key) if type(last) is dict else None
                    if type(prior) is not list:
                        prior = None
                new = _merge_list(have, prior, want if type(want) is list else None)
                if new is have:
                    continue
            else:
                # Scalar, null or absent: desired wins. Keep the observed object when it is
                # the same value, so unchanged subtrees stay identical to observed.
                if kind is type(want) and have == want and (kind is not float or _same(have, want)):
                    continue
                new = want
            if out is None:
                out = dict(observed)
            out[key] = new
    return observed if out is None else out


def _same(a: float, b: float) -> bool:
    """Equal floats that are also the same zero (-0.0 is written "-0", 0.0 "0")."""
    return a != 0.0 or math.copysign(1.0, a) == math.copysign(1.0, b)


def _flat_identical(have: Any, want: Any) -> bool:
    """Given ``have == want`` (objects, or lists of objects): True if they are identical,
    types included, and hold no list below the top level.

    Then merging want into have changes nothing, whatever last-applied says: no key can be
    deleted (the key sets are equal at every level), every scalar is kept, and only list-maps
    can rearrange items (by collapsing duplicate keys), so nested lists are excluded. Values
    that are all strings or null are identical as soon as they are equal; otherwise orjson's
    bytes tell 1, 1.0 and true apart.
    """
    values = have.values() if type(have) is dict else chain.from_iterable(map(dict.values, have))
    if _STRING_KINDS.issuperset(map(type, values)):
        return True
    try:
        text = orjson.dumps(have)
        return text == orjson.dumps(want) and text.find(b"[", 1) < 0
    except orjson.JSONEncodeError:
        return False


def _merge_list(
    observed: list[Any], last: list[Any] | _Desired | None, desired: list[Any] | None
) -> list[Any] | None:
    last_items = last if type(last) is list else None
    if desired is not None and len(observed) == len(desired) and observed == desired:
        # Equal lists have items of the same kinds and keys: desired adds nothing to
        # the list-map key detection.
        key = _list_map_key(observed, last_items, None)
        if key is None:
            return observed if _identical_items(observed, desired) else desired
        value_of = itemgetter(key)
        values = list(map(value_of, observed))
        observed_keys = _key_texts(values, {*map(type, values)})
        # Identical items holding no lists: only duplicate keys could change the list (the
        # merged item of a key replaces each of its occurrences).
        if len(set(observed_keys)) == len(observed) and _flat_identical(observed, desired):
            return observed
    else:
        key = _list_map_key(observed, last_items, desired)
        if key is None:
            return desired
        value_of = itemgetter(key)
        values = list(map(value_of, observed))
        observed_keys = _key_texts(values, {*map(type, values)})
    return _merge_list_map(value_of, observed, observed_keys, last, desired)


def _identical_items(observed: list[Any], desired: list[Any]) -> bool:
    """Equal lists (``==``) that also agree on every type and on the sign of zeros."""
    kinds = list(map(type, observed))
    if kinds != list(map(type, desired)):
        return False
    return _EXACT_KINDS.issuperset(kinds) or all(map(_equal, observed, desired, repeat(True)))


def _list_map_key(
    observed: list[Any], last: list[Any] | None, desired: list[Any] | None
) -> str | None:
    """The first conventional key that every item of the lists has, or None if an item is
    not an object or no key is shared (all lists empty included). Go intersects the key sets
    of all items and then takes the first conventional key left: the same key."""
    items = [*observed, *(last or ()), *(desired or ())] if last or desired else observed
    if not items or {*map(type, items)} != _JUST_DICT:
        return None
    first = items[0]
    for key in _MERGE_KEYS:
        if key in first and all(map(dict.__contains__, items, repeat(key))):
            return key
    return None


def _key_text(value: Any) -> str:
    """Metacontroller's ``stringMergeKey``: strings as they are, anything else as ``%v``."""
    return value if type(value) is str else gojson.sprint(value)


def _key_texts(values: list[Any], kinds: set[type]) -> list[str]:
    """``_key_text`` of each of values, whose types are kinds."""
    if kinds == _JUST_STR:
        return values
    if kinds == _JUST_INT:
        return list(map(str, values))
    return list(map(_key_text, values))


def _round_trip_stable(values: list[Any], kinds: set[type]) -> bool:
    """True if ``%v`` of each value equals ``%v`` of ``loads(dumps(value))``: strings,
    booleans, null and integers within int64."""
    if _STABLE_KINDS.issuperset(kinds):
        return True
    if not _STABLE_KINDS.union(_JUST_INT).issuperset(kinds):
        return False
    numbers = [value for value in values if type(value) is int]
    return min(numbers) >= _INT64_MIN and max(numbers) <= _INT64_MAX


_JUST_DICT = {dict}
_JUST_STR = {str}
_JUST_INT = {int}
_STABLE_KINDS = frozenset((str, bool, type(None)))
_EXACT_KINDS = frozenset((str, int, bool, type(None)))  # == on these is Go's equality
_STRING_KINDS = frozenset((str, type(None)))  # equal to nothing of another type


def _merge_list_map(
    value_of: itemgetter[str],
    observed: list[Any],
    observed_keys: list[str],
    last: list[Any] | _Desired | None,
    desired: list[Any] | None,
) -> list[Any]:
    observed_map = dict(zip(observed_keys, observed, strict=True))  # the last duplicate wins
    if desired:
        values = list(map(value_of, desired))
        kinds = {*map(type, values)}
        if last is _ROUND_TRIP and not _round_trip_stable(values, kinds):
            raise _UnstableKey(value_of)
        desired_keys = _key_texts(values, kinds)
        desired_map = dict(zip(desired_keys, desired, strict=True))
    else:
        desired_keys, desired_map = [], {}
    last_map: dict[str, Any] | _Desired | None
    if last is _ROUND_TRIP:
        last_map = last
    elif type(last) is list and last:
        values = list(map(value_of, last))
        last_map = dict(zip(_key_texts(values, {*map(type, values)}), last, strict=True))
    else:
        last_map = None
    merged = _merge_object(observed_map, last_map, desired_map)
    if merged is observed_map and len(observed_map) == len(observed):
        return observed  # nothing changed, added or removed, and no duplicates to collapse
    # Rebuild: surviving observed items in observed order (merging never changes an item's
    # key text), then desired items not seen yet, in desired order.
    out = [merged[k] for k in observed_keys if k in merged]
    added = set(observed_keys)
    for k in desired_keys:
        if k not in added:
            added.add(k)
            out.append(merged[k])
    if len(out) == len(observed) and all(map(is_, out, observed)):
        return observed
    return out


# --- annotations and system fields ---------------------------------------------------------


def _annotations(obj: Mapping[str, Any]) -> dict[str, str] | None:
    """``Unstructured.GetAnnotations``: None unless metadata.annotations is an object whose
    values are all strings."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return None
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict):
        return None
    for value in annotations.values():
        if type(value) is not str:
            return None
    return annotations


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


def _blank_annotation(desired: dict[str, Any]) -> dict[str, Any]:
    """``nullifyLastAppliedAnnotation``: a desired object echoing the annotation gets it
    set to the empty string (Go blanks it, so it stays in the recorded JSON)."""
    annotations = _annotations(desired)
    if annotations is None or annotations.get(LAST_APPLIED_ANNOTATION, "") == "":
        return desired
    return _with_annotation(desired, "")


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
    desired = _blank_annotation(desired)
    annotation = gojson.dumps(desired).decode()
    annotations = _annotations(observed)
    recorded = annotations.get(LAST_APPLIED_ANNOTATION, "") if annotations is not None else ""
    merged: dict[str, Any] | None = None
    if shortcut and recorded == annotation:
        try:
            merged = _merge_object(observed, _ROUND_TRIP, desired)
        except _UnstableKey:
            merged = None
    if merged is None:
        merged = merge(observed, _parse_last_applied(recorded), desired)
    merged = revert_system_fields(merged, observed)
    merged = _with_annotation(merged, annotation)
    if merged is observed:
        return merged, False
    return merged, not deep_equal(merged, observed)


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
