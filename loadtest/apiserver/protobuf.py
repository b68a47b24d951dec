"""Kubernetes protobuf request bodies decoded to the JSON objects the rest of the server takes.

kubectl (client-go's typed clients) sends ``application/vnd.kubernetes.protobuf`` for
built-in types. The wire form is the magic ``k8s\\x00`` followed by a ``runtime.Unknown``
message (1: ``typeMeta`` {1: apiVersion, 2: kind}, 2: ``raw``, 3: ``contentEncoding``,
4: ``contentType``) whose ``raw`` is the typed message (``protobuf_schema`` has the field
tables).

Contract of ``decode(raw)``:

- returns ``(object, warnings)``: ``object`` is what Go's ``encoding/json`` would write for the
  same Go struct (``apiVersion`` and ``kind`` first), so the JSON decoding, validation and
  storage paths handle it unchanged; zero scalars of ``omitempty`` fields are dropped, pointer
  and non-``omitempty`` ones kept, non-pointer structs kept even when empty;
- ``time`` becomes RFC 3339 in UTC (seconds; ``microtime`` with microseconds), ``quantity``
  its string, ``intstr`` an int or a string, ``raw`` the embedded JSON, bytes base64;
- field numbers absent from the table are skipped and named in ``warnings`` (a newer
  client's field is never silently taken for something else);
- raises ``Unsupported`` for a kind without a table and ``ProtobufError`` for bytes that are
  not a well-formed envelope or message. Pure: no I/O, no state.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass
from functools import cache
from typing import Any

import orjson

from loadtest.apiserver.protobuf_schema import KIND_ROOTS, MESSAGES, ROOTS

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
SCALARS = frozenset({"s", "i", "l", "b", "y"})
SPECIALS = frozenset({"time", "microtime", "quantity", "intstr", "raw", "fieldsv1"})


class ProtobufError(ValueError):
    """The bytes are not a well-formed Kubernetes protobuf object."""


class Unsupported(ProtobufError):
    """A well-formed envelope of a kind the embedded cluster has no table for."""

    def __init__(self, api_version: str, kind: str) -> None:
        super().__init__(f"{api_version}, Kind={kind}")
        self.api_version = api_version
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message table (see ``protobuf_schema`` for the notation)."""

    number: int
    name: str | None
    """JSON name; None for a struct inlined into its parent."""
    kind: str
    """Scalar code, special name or message name (the value type for maps and lists)."""
    repeated: bool = False
    map_key: str | None = None
    presence: str = ""
    """``?`` pointer, ``!`` no omitempty, empty for omitempty."""


def parse_field(spec: str) -> Field:
    """``"3 command [s]"`` -> ``Field(3, "command", "s", repeated=True)``."""
    number, name, typ = spec.split()
    presence = typ[-1] if typ[-1] in "?!" else ""
    typ = typ.rstrip("?!")
    repeated, map_key = False, None
    if typ.startswith("["):
        repeated, typ = True, typ[1:-1]
    elif typ.startswith("{"):
        map_key, typ = typ[1:-1].split(":")
    if typ not in SCALARS and typ not in SPECIALS and typ not in MESSAGES:
        raise KeyError(f"unknown type {typ!r} in {spec!r}")
    return Field(int(number), None if name == "^" else name, typ, repeated, map_key, presence)


@cache
def table(message: str) -> dict[int, Field]:
    """The fields of ``message`` by number."""
    fields = (parse_field(part) for part in MESSAGES[message].split(";") if part.strip())
    return {f.number: f for f in fields}


# --- the wire format ------------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("unexpected end of data in a varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint overflow")


def fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """``(number, wire type, value)`` of each field of a message, in order."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("illegal field number 0")
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ProtobufError(f"field {number}: length {length} runs past the end")
            value, pos = buf[pos : pos + length], pos + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > len(buf):
                raise ProtobufError(f"field {number}: unexpected end of data")
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise ProtobufError(f"field {number}: unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _ints(wire: int, value: int | bytes) -> list[int]:
    """The integers of a varint field, packed or not."""
    if wire == 0:
        assert isinstance(value, int)
        return [_signed(value)]
    if wire != 2 or not isinstance(value, bytes):
        raise ProtobufError(f"wire type {wire} where an integer was expected")
    out, pos = [], 0
    while pos < len(value):
        item, pos = _varint(value, pos)
        out.append(_signed(item))
    return out


def _bytes(wire: int, value: int | bytes, what: str) -> bytes:
    if wire != 2 or not isinstance(value, bytes):
        raise ProtobufError(f"{what}: wire type {wire} where bytes were expected")
    return value


# --- values ---------------------------------------------------------------------------------


def _time(buf: bytes, *, micro: bool) -> str | None:
    if not buf:
        return None  # the zero time: Go writes null
    seconds = nanos = 0
    for number, wire, value in fields(buf):
        if number == 1:
            seconds = _ints(wire, value)[-1]
        elif number == 2:
            nanos = _ints(wire, value)[-1]
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    if micro:
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(buf: bytes, what: str) -> str:
    try:
        return buf.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtobufError(f"{what}: invalid UTF-8 in a string") from None


def _special(kind: str, buf: bytes) -> Any:
    parts = {number: (wire, value) for number, wire, value in fields(buf)}
    if kind in ("time", "microtime"):
        return _time(buf, micro=kind == "microtime")
    if kind == "quantity":
        return _text(_bytes(*parts[1], "quantity"), "quantity") if 1 in parts else "0"
    if kind == "intstr":
        is_string = 1 in parts and _ints(*parts[1])[-1] == 1
        if is_string:
            return _text(_bytes(*parts[3], "strVal"), "strVal") if 3 in parts else ""
        return _ints(*parts[2])[-1] if 2 in parts else 0
    # raw (RawExtension) and fieldsv1 hold JSON bytes in field 1
    raw = _bytes(*parts[1], kind) if 1 in parts else b""
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ProtobufError(f"{kind}: the embedded bytes are not JSON") from None


def _scalar(kind: str, wire: int, value: int | bytes, what: str) -> Any:
    if kind == "s":
        return _text(_bytes(wire, value, what), what)
    if kind == "y":
        return base64.b64encode(_bytes(wire, value, what)).decode()
    number = _ints(wire, value)[-1]
    return bool(number) if kind == "b" else number


def _value(kind: str, wire: int, value: int | bytes, what: str, warnings: list[str]) -> Any:
    if kind in SCALARS:
        return _scalar(kind, wire, value, what)
    buf = _bytes(wire, value, what)
    if kind in SPECIALS:
        return _special(kind, buf)
    return message(kind, buf, warnings)


_ZERO: dict[str, Any] = {"s": "", "i": 0, "l": 0, "b": False, "y": ""}


def _map_entry(f: Field, buf: bytes, warnings: list[str], where: str) -> tuple[str, Any]:
    key: Any = _ZERO[f.map_key or "s"]
    val: Any = _ZERO.get(f.kind, "0" if f.kind == "quantity" else {})
    for number, wire, value in fields(buf):
        if number == 1:
            key = _scalar(f.map_key or "s", wire, value, f"{where} key")
        elif number == 2:
            val = _value(f.kind, wire, value, where, warnings)
    return str(key), val


def message(name: str, buf: bytes, warnings: list[str]) -> dict[str, Any]:
    """The JSON object of message ``name`` encoded in ``buf``."""
    spec = table(name)
    out: dict[str, Any] = {}
    for number, wire, value in fields(buf):
        f = spec.get(number)
        if f is None:
            warnings.append(f"unknown field number {number} in {name} (not decoded)")
            continue
        where = f"{name}.{f.name or '^'}"
        if f.name is None:  # an inlined struct
            out.update(message(f.kind, _bytes(wire, value, where), warnings))
            continue
        if f.map_key is not None:
            key, val = _map_entry(f, _bytes(wire, value, where), warnings, where)
            out.setdefault(f.name, {})[key] = val
        elif f.repeated:
            if f.kind in ("i", "l"):
                out.setdefault(f.name, []).extend(_ints(wire, value))
            else:
                out.setdefault(f.name, []).append(_value(f.kind, wire, value, where, warnings))
        else:
            decoded = _value(f.kind, wire, value, where, warnings)
            if decoded is None or (
                not f.presence and f.kind in SCALARS and decoded == _ZERO[f.kind]
            ):
                out.pop(f.name, None)
                continue
            out[f.name] = decoded
    return out


def envelope(raw: bytes) -> tuple[str, str, bytes]:
    """``(apiVersion, kind, message bytes)`` of a ``k8s\\x00``-prefixed ``runtime.Unknown``."""
    if not raw.startswith(MAGIC):
        raise ProtobufError("the body does not start with the Kubernetes protobuf prefix k8s\\x00")
    api_version = kind = ""
    payload = b""
    for number, wire, value in fields(raw[len(MAGIC) :]):
        if number == 1:
            for sub, sub_wire, sub_value in fields(_bytes(wire, value, "typeMeta")):
                if sub in (1, 2):
                    text = _text(_bytes(sub_wire, sub_value, "typeMeta"), "typeMeta")
                    api_version, kind = (text, kind) if sub == 1 else (api_version, text)
        elif number == 2:
            payload = _bytes(wire, value, "raw")
        elif number == 3 and _bytes(wire, value, "contentEncoding"):
            raise ProtobufError("content encodings are not supported")
    return api_version, kind, payload


def decode(raw: bytes) -> tuple[dict[str, Any], list[str]]:
    """The object in a Kubernetes protobuf body, and warnings about fields skipped."""
    api_version, kind, payload = envelope(raw)
    root = ROOTS.get((api_version, kind)) or KIND_ROOTS.get(kind)
    if root is None:
        raise Unsupported(api_version, kind)
    warnings: list[str] = []
    body = message(root, payload, warnings)
    return {"apiVersion": api_version, "kind": kind, **body}, warnings
