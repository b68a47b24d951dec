"""Metacontroller's convention-based 3-way merge (``pkg/dynamic/apply``), exactly.

``merge(observed, last_applied, desired)`` applies the change from last-applied to desired onto
observed, without knowing any schema:

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

Invariants:

- Inputs are never mutated and never deep-copied. The result shares unchanged subtrees with
  the inputs (copy on write): an unchanged subtree of the result *is* the observed subtree, so
  an unchanged merge returns observed itself. Treat results as read-only.
- Objects and lists are plain ``dict`` and ``list``, as JSON decoding produces; the hot path
  tests types exactly, so subclasses would be taken for scalars.
- ``merge_recorded(observed, desired)`` merges with last-applied being the JSON round trip of
  desired (the annotation records exactly ``gojson.dumps(desired)``) without parsing it: that
  value differs from desired at most in the Go types of numbers, which only the ``%v`` keys of
  list-maps could tell apart; a list-map key (observed or desired) that is not a string, bool,
  null or int64 makes it return None, and the caller parses the annotation instead.
- ``deep_equal`` is Go's ``reflect.DeepEqual`` on decoded values: 3 is not 3.0, false is not 0,
  null is not absent, -0.0 equals 0.0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import repeat
from operator import is_, itemgetter
from typing import Any

import orjson

from proto.api import gojson
from workers.apply.errors import InvalidObjectError

__all__ = ["deep_equal", "merge", "merge_recorded"]

_MERGE_KEYS = ("containerPort", "port", "mountPath", "name", "uid", "ip", "path")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


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


def merge_recorded(
    observed: Mapping[str, Any], desired: Mapping[str, Any]
) -> dict[str, Any] | None:
    """``merge(observed, loads(gojson.dumps(desired)), desired)`` without the round trip, or
    None if a list-map key of desired might read differently after it (see the invariants)."""
    if not isinstance(observed, dict):
        raise InvalidObjectError(f"observed object is a {type(observed).__name__}, not an object")
    try:
        return _merge_object(observed, _ROUND_TRIP, desired if isinstance(desired, dict) else None)
    except _UnstableKey:
        return None


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
    can rearrange items (by collapsing duplicate keys), so nested lists are excluded. An
    object whose values are all strings or null is identical as soon as it is equal;
    otherwise orjson's bytes tell 1, 1.0 and true apart.
    """
    if type(have) is dict and _STRING_KINDS.issuperset(map(type, have.values())):
        return True
    try:
        text = orjson.dumps(have, option=orjson.OPT_SORT_KEYS)  # key order does not count
        return text == orjson.dumps(want, option=orjson.OPT_SORT_KEYS) and text.find(b"[", 1) < 0
    except orjson.JSONEncodeError:
        return False


def _merge_list(
    observed: list[Any], last: list[Any] | _Desired | None, desired: list[Any] | None
) -> list[Any] | None:
    prior = last if type(last) is list else None
    # Equal lists have items of the same kinds and keys: desired adds nothing to the key
    # detection then, and the list is kept if its items are identical, hold no lists and
    # repeat no key (the merged item of a key replaces each of its occurrences).
    equal = desired is not None and len(observed) == len(desired) and observed == desired
    if equal and observed and type(observed[0]) is not dict:  # atomic: an item is no object
        return observed if _identical_items(observed, desired) else desired  # type: ignore[arg-type]
    more = desired if desired and not equal else None
    found = _list_map_key([*observed, *(prior or ()), *(more or ())] if prior or more else observed)
    if found is None:
        if equal:
            return observed if _identical_items(observed, desired) else desired  # type: ignore[arg-type]
        return desired
    value_of, values = found
    # The key texts of the observed, last-applied and desired items, in that order.
    kinds = {*map(type, values)}
    texts = _key_texts(values, kinds)
    count = len(observed)
    observed_keys = texts[:count]
    unique = len(set(observed_keys)) == count
    if equal:
        if unique and _flat_identical(observed, desired):
            return observed
        more = list(map(value_of, desired))  # type: ignore[arg-type]
        values, kinds = values + more, kinds | {*map(type, more)}
        texts = texts + _key_texts(more, kinds)
    desired_keys = texts[count + (len(prior) if prior else 0) :]
    desired = desired or []
    if last is _ROUND_TRIP:
        if not _round_trip_stable(values, kinds):
            raise _UnstableKey(value_of)
        if unique and observed_keys[: len(desired_keys)] == desired_keys:
            # The steady state: desired items lead observed, in the same order, and nothing
            # can be deleted. Each observed item is merged with the desired item in its place.
            return _merge_aligned(observed, desired)
    observed_map = dict(zip(observed_keys, observed, strict=True))  # the last duplicate wins
    desired_map = dict(zip(desired_keys, desired, strict=True))
    last_map: dict[str, Any] | _Desired | None
    if last is _ROUND_TRIP:
        last_map = last
    elif prior:
        last_map = dict(zip(texts[count : count + len(prior)], prior, strict=True))
    else:
        last_map = None
    merged = _merge_object(observed_map, last_map, desired_map)
    if merged is observed_map and len(observed_map) == count:
        return observed  # nothing changed, added or removed, and no duplicates to collapse
    # Rebuild: surviving observed items in observed order (merging never changes an item's
    # key text), then desired items not seen yet, in desired order.
    out = [merged[k] for k in observed_keys if k in merged]
    added = set(observed_keys)
    for k in desired_keys:
        if k not in added:
            added.add(k)
            out.append(merged[k])
    if len(out) == count and all(map(is_, out, observed)):
        return observed
    return out


def _merge_aligned(observed: list[Any], desired: list[Any]) -> list[Any]:
    out: list[Any] | None = None
    for index, (have, want) in enumerate(zip(observed, desired, strict=False)):  # desired leads
        if len(have) == len(want) and have == want and _flat_identical(have, want):
            continue
        new = _merge_object(have, _ROUND_TRIP, want)
        if new is not have:
            if out is None:
                out = list(observed)
            out[index] = new
    return observed if out is None else out


def _identical_items(observed: list[Any], desired: list[Any]) -> bool:
    """Equal lists (``==``) that also agree on every type and on the sign of zeros."""
    if _STRING_KINDS.issuperset(map(type, observed)):
        return True
    kinds = list(map(type, observed))
    if kinds != list(map(type, desired)):
        return False
    return _EXACT_KINDS.issuperset(kinds) or all(map(_equal, observed, desired, repeat(True)))


def _list_map_key(items: list[Any]) -> tuple[itemgetter[str], list[Any]] | None:
    """The first conventional key every item has, with the items' values for it; None if an
    item is not an object or no key is shared (no items included). Go intersects the key
    sets of all items, then takes the first conventional key left: the same key."""
    if not items or {*map(type, items)} != _JUST_DICT:
        return None
    first = items[0]
    for key in _MERGE_KEYS:
        if key in first:
            value_of = itemgetter(key)
            try:
                return value_of, list(map(value_of, items))
            except KeyError:
                continue  # some item lacks it
    return None


def _key_text(value: Any) -> str:
    """Metacontroller's ``stringMergeKey``: strings as they are, anything else as ``%v``."""
    return value if type(value) is str else gojson.sprint(value)


def _key_texts(values: list[Any], kinds: set[type]) -> list[str]:
    """``_key_text`` of each value; kinds holds the types of values (and maybe more)."""
    if kinds == _JUST_STR:
        return values
    if kinds == _JUST_INT:
        return list(map(str, values))
    return list(map(_key_text, values))


def _round_trip_stable(values: list[Any], kinds: set[type]) -> bool:
    """True if ``%v`` of each value (of types kinds) is also ``%v`` of its JSON round trip:
    strings, booleans, null and integers within int64."""
    if _STABLE_KINDS.issuperset(kinds):
        return True
    if kinds == _JUST_INT:
        numbers = values
    elif _STABLE_OR_INT.issuperset(kinds):
        numbers = [value for value in values if type(value) is int]
    else:
        return False
    return bool(min(numbers) >= _INT64_MIN and max(numbers) <= _INT64_MAX)


_JUST_DICT = {dict}
_JUST_STR = {str}
_JUST_INT = {int}
_STABLE_KINDS = frozenset((str, bool, type(None)))
_STABLE_OR_INT = _STABLE_KINDS | {int}
_EXACT_KINDS = frozenset((str, int, bool, type(None)))  # == on these is Go's equality
_STRING_KINDS = frozenset((str, type(None)))  # equal to nothing of another type
