"""A small Kubernetes protobuf encoder for tests: the inverse of ``loadtest.apiserver.protobuf``.

Encodes a JSON-shaped object with the same field tables (scalars, quantities,
int-or-strings, messages, lists, maps) and wraps it in the ``k8s\\x00`` envelope.
"""

from __future__ import annotations

import base64
from typing import Any

from loadtest.apiserver import protobuf


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def length_delimited(number: int, payload: bytes) -> bytes:
    return key(number, 2) + varint(len(payload)) + payload


def scalar(number: int, kind: str, value: Any) -> bytes:
    if kind == "s":
        return length_delimited(number, value.encode())
    if kind == "y":
        return length_delimited(number, base64.b64decode(value))
    return key(number, 0) + varint(int(value))


def _field(f: protobuf.Field, value: Any) -> bytes:
    if f.kind in protobuf.SCALARS:
        return scalar(f.number, f.kind, value)
    if f.kind == "quantity":
        return length_delimited(f.number, scalar(1, "s", value))
    if f.kind == "intstr":
        inner = (
            scalar(1, "i", 0) + scalar(2, "i", value)
            if isinstance(value, int)
            else (scalar(1, "i", 1) + scalar(3, "s", value))
        )
        return length_delimited(f.number, inner)
    return length_delimited(f.number, encode(f.kind, value))


def encode(name: str, obj: dict[str, Any]) -> bytes:
    fields = {f.name: f for f in protobuf.table(name).values()}
    out = b""
    for key, value in obj.items():
        f = fields[key]
        if f.map_key is not None:
            for k, v in value.items():
                entry = scalar(1, f.map_key, k) + _field(protobuf.Field(2, "value", f.kind), v)
                out += length_delimited(f.number, entry)
        elif f.repeated:
            out += b"".join(_field(f, item) for item in value)
        else:
            out += _field(f, value)
    return out


def envelope(api_version: str, kind: str, payload: bytes) -> bytes:
    type_meta = scalar(1, "s", api_version) + scalar(2, "s", kind)
    return protobuf.MAGIC + length_delimited(1, type_meta) + length_delimited(2, payload)
