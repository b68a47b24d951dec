"""Decoding hook response bodies the way Metacontroller does (``sigs.k8s.io/json``).

Metacontroller decodes every hook response with ``UnmarshalStrict`` into a typed Go struct,
then either fails (``strict`` mode) or only logs (``loose`` mode) the strict-decoding problems.
``decode(body, shape)`` reproduces what that decoder sees:

- Field names are case-sensitive: ``Status`` is not ``status``, it is an unknown field.
- Integers stay integers (``int`` when they fit in int64, ``float`` beyond, as Go falls back to
  float64); ``NaN``/``Infinity`` are not JSON and numbers beyond float64 are rejected.
- **Issues** (what strict mode rejects) are unknown fields of the typed parts, and duplicate
  keys in every object the typed decoder walks. A ``Shape`` says which parts are typed:
  ``Struct`` (known fields), ``Items`` (arrays), ``FREE`` (``map[string]interface{}``: only
  duplicates count) and ``OPAQUE`` (objects Go hands to ``unstructured.Unstructured``, whose
  own decoder is lenient: nothing counts, as for the desired children).
- Issue texts follow Go's: ``unknown field "relatedResources[0].nmaes"``,
  ``duplicate field "status.ready"``. A duplicate key keeps its last value.
- Bodies that are not JSON, or not a JSON object, raise ``HookResponseError``; type errors in
  known fields are for the caller's typed reader (``proto.api.fields``) to raise.

Two decoders, one result. The exact one is the standard library's, with a Python callback per
object to find repeated keys (11 us for a 650-byte answer of three ConfigMaps, 114 us for
7.7 KB). orjson with the checks below takes half of that (5.4 us, 58 us) and gives the same
value except in what it cannot tell apart, so its answer is used only when it provably equals
the exact one, else the exact decoder runs:

- the body decodes and is an object, and re-encodes with every integer within 53 bits (a
  larger one may be Go's float64; orjson keeps unsigned 64-bit integers as ``int``);
- no key was repeated: orjson keeps the last value silently, so the body must hold as many
  ``:`` as its re-encoding. Outside strings each member has one; inside, a string keeps its
  colons when re-encoded, and a member dropped for a repeated key takes its own away. Only an
  escaped colon (``\\u003a``) is not one in the body, so such bodies take the exact path.

Everything orjson refuses (broken UTF-8, lone surrogates, ``NaN``, numbers out of range, a
byte-order mark) goes to the exact decoder, which reports it as before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from proto.api.errors import HookResponseError
from proto.api.fields import join, json_type

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _Free:
    """A ``map[string]interface{}`` (or ``interface{}``) subtree."""

    __slots__ = ()


class _Opaque:
    """A subtree decoded by its own lenient decoder."""

    __slots__ = ()


FREE = _Free()
OPAQUE = _Opaque()


@dataclass(frozen=True, slots=True)
class Struct:
    """A Go struct: its JSON field names and their shapes."""

    fields: Mapping[str, Shape]


@dataclass(frozen=True, slots=True)
class Items:
    """A Go slice of ``of``."""

    of: Shape


Shape = Struct | Items | _Free | _Opaque


@dataclass(frozen=True, slots=True)
class Decoded:
    value: dict[str, Any]
    issues: tuple[str, ...]
    """Unknown and duplicate fields: errors in strict mode, warnings in loose mode."""


def _go_int(text: str) -> int | float:
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else _go_float(text)


def _go_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text} is out of range")
    return value


def _reject_constant(text: str) -> Any:
    raise ValueError(f"{text} is not valid JSON")


def _walk(
    value: Any,
    shape: Shape,
    path: str,
    duplicates: Mapping[int, list[str]],
    issues: list[str],
) -> None:
    if shape is OPAQUE or (shape is FREE and not duplicates):
        return
    if isinstance(value, dict):
        for key in duplicates.get(id(value), ()):
            issues.append(f'duplicate field "{join(path, key)}"')
        fields = shape.fields if isinstance(shape, Struct) else None
        for key, item in value.items():
            if fields is None:
                _walk(item, FREE, join(path, key), duplicates, issues)
            elif key in fields:
                _walk(item, fields[key], join(path, key), duplicates, issues)
            else:
                issues.append(f'unknown field "{join(path, key)}"')
    elif isinstance(value, list):
        of = shape.of if isinstance(shape, Items) else FREE
        for i, item in enumerate(value):
            _walk(item, of, join(path, i), duplicates, issues)


def decode(body: bytes, shape: Struct) -> Decoded:
    """Decode a response body that must be a JSON object of ``shape``."""
    value = _decode_fast(body)
    if value is None:
        return _decode_exact(body, shape)
    issues: list[str] = []
    _walk(value, shape, "", {}, issues)
    return Decoded(value=value, issues=tuple(issues))


_BACKSLASH = b"\\"
_ESCAPED_COLON = b"\\u003"  # \u003a or \u003A, and their neighbours (conservatively)
_COLON = b":"


def _decode_fast(body: bytes) -> dict[str, Any] | None:
    """orjson's decode of ``body`` when it equals the exact decoder's (module docstring)."""
    if _BACKSLASH in body and _ESCAPED_COLON in body:
        return None
    try:
        value = orjson.loads(body)
        if type(value) is not dict:
            return None
        again = orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return None
    if again.count(_COLON) != body.count(_COLON):
        return None
    return value


def _decode_exact(body: bytes, shape: Struct) -> Decoded:
    # Every object with a repeated key is recorded, and kept alive by the record, so that its
    # id() stays unique until the walk has mapped it back to a path.
    repeated: list[tuple[dict[str, Any], list[str]]] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            keys: list[str] = []
            for key, _ in pairs:
                if key in seen and key not in keys:
                    keys.append(key)
                seen.add(key)
            repeated.append((obj, keys))
        return obj

    try:
        value = json.loads(
            body.decode("utf-8", "replace"),
            object_pairs_hook=pairs_hook,
            parse_int=_go_int,
            parse_float=_go_float,
            parse_constant=_reject_constant,
        )
    except (ValueError, RecursionError) as err:
        raise HookResponseError(f"response is not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise HookResponseError(f"response must be a JSON object, not {json_type(value)}")
    issues: list[str] = []
    _walk(value, shape, "", {id(obj): keys for obj, keys in repeated}, issues)
    return Decoded(value=value, issues=tuple(issues))


class LooseWarnings:
    """Which loose-mode issues of one controller's hook answers are new, to log.

    A hook that always sends the same unknown field would otherwise be logged on every call:
    ``fresh(issues)`` returns those not returned before, at most ``limit`` distinct ones over
    the object's life (a hook that invents a new field name per answer cannot flood the log).
    """

    __slots__ = ("_limit", "_seen")

    def __init__(self, limit: int = 100) -> None:
        self._limit = limit
        self._seen: set[str] = set()

    def fresh(self, issues: Iterable[str]) -> list[str]:
        new = []
        for issue in issues:
            if issue not in self._seen and len(self._seen) < self._limit:
                self._seen.add(issue)
                new.append(issue)
        return new
