"""The msgpack codec of the wire messages: ``encode(msg) -> bytes``, ``decode(frame) -> msg``.

Contract:
- A frame is a msgpack map ``{"v": PROTOCOL_VERSION, "t": <type tag>, <field>: <value>...}``
  written with ``use_bin_type=True``: ``str`` travels as msgpack str, ``bytes`` as bin (object
  payloads are never decoded or re-encoded here). Nested records (``ControllerDef``,
  ``ResourceInfo``) are maps by field name; a ``ParentKey`` is an array of five str.
- ``decode`` returns a valid message or raises ``FrameError``, for any byte string at all,
  with ``reason``:
  - ``oversized``: longer than ``max_size`` (checked before anything is parsed);
  - ``malformed``: not msgpack, trailing bytes, not a map, ``v`` or ``t`` missing or not an
    int/str, a field missing, of the wrong type or out of range;
  - ``version``: ``v`` is an integer other than ``PROTOCOL_VERSION``;
  - ``unknown_type``: ``t`` names no message of this version.
  Fields the decoder does not know are ignored; every declared field is required, except one
  declared with a default (added to a message after its protocol version: a peer that
  predates it does not send it), which takes its default when missing.
- Validation is by exact type (``bool`` is not an ``int``, a str is not an array), counts and
  ids are non-negative, durations non-negative and finite, enums must name a member. A
  WELCOME must also be one a worker can act on: at least one slot in all, each assigned slot
  below that count, a positive heartbeat interval no longer than the heartbeat timeout.
- ``encode`` raises ``FrameError("oversized")`` for a frame longer than ``max_size``, which
  the peer would drop: the caller learns at once (a coordinator answers such a FETCH with
  ``NackReason.TOO_LARGE``).
- The codec of every message is derived once, at import, from its dataclass field types, so a
  new field cannot be forgotten by the codec; an unsupported field type fails the import.
  Each message type gets a compiled straight-line packer and unpacker (the hot path); the
  generic per-field loop is the reference, and explains every rejection.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import typing
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any, Final, TypeGuard, TypeVar

import msgpack

from proto.wire.errors import FrameError
from proto.wire.keys import ParentKey
from proto.wire.messages import (
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    ControllerDef,
    ControllerKind,
    Message,
    NackReason,
    Priority,
    ResourceInfo,
    Welcome,
)

DEFAULT_MAX_FRAME_SIZE: Final = 64 * 1024 * 1024

T = TypeVar("T")
_Decoder = Callable[[Any], Any]
_Encoder = Callable[[Any], Any] | None  # None: the value packs as it is
_Fields = tuple[tuple[str, _Encoder, _Decoder, bool], ...]  # name, codec, may be missing


class _Invalid(ValueError):
    """A field value of the wrong type or range; the text says what was expected."""


# --- scalar decoders -----------------------------------------------------------------------


def _uint(v: Any) -> int:
    if type(v) is int and v >= 0:
        return v
    raise _Invalid("a non-negative integer")


def _exactly(kind: type[T], expected: str) -> Callable[[Any], T]:
    """The decoder of a value of exactly type ``kind`` (no subclass: ``True`` is no int);
    ``expected`` names it in the error."""

    def decode(v: Any) -> T:
        if type(v) is kind:
            return v
        raise _Invalid(expected)

    return decode


_str = _exactly(str, "a string")
_bytes = _exactly(bytes, "bin bytes")
_bool = _exactly(bool, "a boolean")


def _seconds(v: Any) -> float:
    if (type(v) is float or type(v) is int) and 0 <= v < math.inf:
        return float(v)
    raise _Invalid("a non-negative finite number of seconds")


def _optional_bytes(v: Any) -> bytes | None:
    if v is None or type(v) is bytes:
        return v
    raise _Invalid("bin bytes or nil")


def _enum(cls: type[Enum]) -> _Decoder:
    base = int if issubclass(cls, int) else str
    members = {m.value: m for m in cls}

    def decode(v: Any) -> Enum:
        if type(v) is base and v in members:
            return members[v]
        raise _Invalid(f"one of {sorted(members)}")

    return decode


# --- sequence and mapping decoders ---------------------------------------------------------
# msgpack arrays decode as tuples (use_list=False): a valid tuple is returned as it is. Item
# types are checked with set(map(type, ...)), a loop that runs in C.

_TUPLE: Final = frozenset({tuple})
_INT: Final = frozenset({int})
_STR: Final = frozenset({str})
_BYTES: Final = frozenset({bytes})
_FIVE: Final = frozenset({5})
_new_key: Callable[[tuple[str, ...]], ParentKey] = functools.partial(tuple.__new__, ParentKey)
_chain = itertools.chain.from_iterable


def _only(v: Any, types: frozenset[type]) -> TypeGuard[tuple[Any, ...]]:
    """Whether ``v`` is a tuple whose items are all of exactly these types."""
    return type(v) is tuple and (not v or set(map(type, v)) <= types)


def _uints(v: Any) -> tuple[int, ...]:
    if _only(v, _INT) and (not v or min(v) >= 0):
        return v
    raise _Invalid("an array of non-negative integers")


def _strs(v: Any) -> tuple[str, ...]:
    if _only(v, _STR):
        return v
    raise _Invalid("an array of strings")


def _blobs(v: Any) -> tuple[bytes, ...]:
    if _only(v, _BYTES):
        return v
    raise _Invalid("an array of bin bytes")


def _key(v: Any) -> ParentKey:
    if (
        type(v) is tuple
        and len(v) == 5
        and type(v[0]) is str
        and type(v[1]) is str
        and type(v[2]) is str
        and type(v[3]) is str
        and type(v[4]) is str
    ):
        return _new_key(v)
    raise _Invalid("an array of 5 strings")


def _keys(v: Any) -> tuple[ParentKey, ...]:
    # Batches of keys are the hot path: every check is a loop in C.
    if _only(v, _TUPLE) and (not v or set(map(len, v)) <= _FIVE):
        try:
            "".join(_chain(v))  # TypeError unless every field is a str
        except TypeError:
            pass
        else:
            return tuple(map(_new_key, v))
    raise _Invalid("an array of keys (arrays of 5 strings)")


def _groups(v: Any) -> dict[str, tuple[bytes, ...]]:
    if type(v) is dict and (
        not v or (set(map(type, v)) <= _STR and all(_only(objs, _BYTES) for objs in v.values()))
    ):
        return v
    raise _Invalid("a map of string to arrays of bin bytes")


def _revision_groups(v: Any) -> dict[str, dict[str, tuple[bytes, ...]]]:
    if type(v) is dict and (not v or set(map(type, v)) <= _STR):
        try:
            for groups in v.values():
                _groups(groups)
        except _Invalid:
            pass
        else:
            return v
    raise _Invalid("a map of string to maps of string to arrays of bin bytes")


def _mappings(v: Mapping[str, Mapping[str, Any]]) -> Any:
    return {k: _mapping(groups) for k, groups in v.items()}


def _str_map(v: Any) -> dict[str, str]:
    if type(v) is dict and (not v or (set(map(type, v)) | set(map(type, v.values()))) <= _STR):
        return v
    raise _Invalid("a map of string to string")


# --- records: messages and the structures nested in them -----------------------------------


def _record_fields(cls: type) -> _Fields:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        encoder, decoder = _FIELD_CODECS[hints[f.name]]
        optional = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        out.append((f.name, encoder, decoder, optional))
    return tuple(out)


def _pack_fields(obj: Any, fields: _Fields, into: dict[str, Any]) -> dict[str, Any]:
    for name, encoder, _, _ in fields:
        value = getattr(obj, name)
        into[name] = value if encoder is None else encoder(value)
    return into


def _unpack_fields(cls: Callable[..., Any], fields: _Fields, m: dict[Any, Any], where: str) -> Any:
    kwargs = {}
    for name, _, decoder, optional in fields:
        try:
            value = m[name]
        except KeyError:
            if optional:
                continue  # a peer that predates the field: its default
            raise FrameError("malformed", f"{where}: field {name!r} is missing") from None
        try:
            kwargs[name] = decoder(value)
        except FrameError as e:
            raise FrameError(e.reason, f"{where}.{name}{e.message}") from None
        except _Invalid as e:
            raise FrameError("malformed", f"{where}.{name}: expected {e}") from None
    return cls(**kwargs)


def _nested(cls: type, fields: Callable[[], _Fields]) -> tuple[_Encoder, _Decoder]:
    """Codec of an array of records ``cls`` (``fields`` is looked up once all are defined)."""

    def encode(values: Iterable[Any]) -> list[dict[str, Any]]:
        spec = fields()
        return [_pack_fields(v, spec, {}) for v in values]

    def decode(v: Any) -> tuple[Any, ...]:
        if type(v) is not tuple or not all(type(x) is dict for x in v):
            raise _Invalid(f"an array of {cls.__name__} maps")
        spec = fields()
        return tuple(_unpack_fields(cls, spec, x, f"[{i}]") for i, x in enumerate(v))

    return encode, decode


def _mapping(v: Mapping[str, Any]) -> Any:
    return v if type(v) is dict else dict(v)


_FIELD_CODECS: dict[Any, tuple[_Encoder, _Decoder]] = {
    int: (None, _uint),
    str: (None, _str),
    bytes: (None, _bytes),
    bool: (None, _bool),
    float: (None, _seconds),
    bytes | None: (None, _optional_bytes),
    tuple[int, ...]: (None, _uints),
    tuple[str, ...]: (None, _strs),
    tuple[bytes, ...]: (None, _blobs),
    ParentKey: (None, _key),
    tuple[ParentKey, ...]: (None, _keys),
    Mapping[str, tuple[bytes, ...]]: (_mapping, _groups),
    Mapping[str, str]: (_mapping, _str_map),
    Mapping[str, Mapping[str, tuple[bytes, ...]]]: (_mappings, _revision_groups),
    Priority: (None, _enum(Priority)),
    NackReason: (None, _enum(NackReason)),
    ControllerKind: (None, _enum(ControllerKind)),
    tuple[ResourceInfo, ...]: _nested(ResourceInfo, lambda: _RESOURCE_FIELDS),
    tuple[ControllerDef, ...]: _nested(ControllerDef, lambda: _CONTROLLER_FIELDS),
}
_RESOURCE_FIELDS: Final[_Fields] = _record_fields(ResourceInfo)
_CONTROLLER_FIELDS: Final[_Fields] = _record_fields(ControllerDef)


# --- compiled codecs -----------------------------------------------------------------------
# The loops above are the reference and give precise errors. The hot path runs straight-line
# functions compiled once per message type from the same field table (as ``dataclasses``
# compiles ``__init__``): no per-field loop or keyword dict, scalar checks inline. A value the
# fast decoder rejects is decoded again by the reference loop, which raises the precise error.

_Packer = Callable[[Any], dict[str, Any]]
_Unpacker = Callable[[dict[Any, Any]], Any]

# Checks of scalar decoders, inlined: {first} binds the value, {v} reads it again.
_INLINE_CHECKS: Final[dict[_Decoder, str]] = {
    _uint: "type({first}) is int and {v} >= 0",
    _str: "type({first}) is str",
    _bytes: "type({first}) is bytes",
    _optional_bytes: "{first} is None or type({v}) is bytes",
}


def _reject() -> Any:
    raise _Invalid("rejected by the fast path")


def _compile(cls: type, tag: str, fields: _Fields) -> tuple[_Packer, _Unpacker]:
    env: dict[str, Any] = {
        "_cls": cls,
        "_reject": _reject,
        "_FrameError": FrameError,
        "_slow": lambda m: _unpack_fields(cls, fields, m, tag),
    }
    items = [f"'v': {PROTOCOL_VERSION!r}", f"'t': {tag!r}"]
    args = []
    # A missing field is a KeyError: the reference loop gives an optional one its default.
    for i, (name, encoder, decoder, _) in enumerate(fields):
        env[f"_e{i}"], env[f"_d{i}"] = encoder, decoder
        items.append(f"{name!r}: " + (f"msg.{name}" if encoder is None else f"_e{i}(msg.{name})"))
        check = _INLINE_CHECKS.get(decoder)
        if check is None:
            args.append(f"_d{i}(m[{name!r}])")
        else:
            test = check.format(first=f"(_v{i} := m[{name!r}])", v=f"_v{i}")
            args.append(f"(_v{i} if {test} else _reject())")
    source = (
        f"def pack(msg):\n    return {{{', '.join(items)}}}\n"
        f"def unpack(m):\n    try:\n        return _cls({', '.join(args)})\n"
        f"    except (KeyError, ValueError, _FrameError):\n        return _slow(m)\n"
    )
    exec(compile(source, f"<wire codec {tag}>", "exec"), env)
    return env["pack"], env["unpack"]


def _message_codecs() -> tuple[dict[type, tuple[str, _Packer]], dict[str, _Unpacker]]:
    by_class, by_tag = {}, {}
    for cls in MESSAGE_TYPES:
        pack, unpack = _compile(cls, cls.TYPE, _record_fields(cls))
        by_class[cls] = (cls.TYPE, pack)
        by_tag[cls.TYPE] = unpack
    return by_class, by_tag


_BY_CLASS, _BY_TAG = _message_codecs()


# --- frames --------------------------------------------------------------------------------


def encode(msg: Message, *, max_size: int = DEFAULT_MAX_FRAME_SIZE) -> bytes:
    """The frame of ``msg``; ``FrameError("oversized")`` if it would exceed ``max_size``."""
    tag, pack = _BY_CLASS[type(msg)]
    frame: bytes = msgpack.packb(pack(msg), use_bin_type=True)
    if len(frame) > max_size:
        raise FrameError("oversized", f"{tag} frame of {len(frame)} bytes > limit {max_size}")
    return frame


def decode(frame: bytes, *, max_size: int = DEFAULT_MAX_FRAME_SIZE) -> Message:
    """The message in ``frame``; ``FrameError`` (and nothing else) if there is none."""
    if len(frame) > max_size:
        raise FrameError("oversized", f"frame of {len(frame)} bytes > limit {max_size}")
    try:
        m = msgpack.unpackb(frame, raw=False, use_list=False, strict_map_key=True)
    except Exception as e:  # msgpack raises a handful of types for bad input; all mean this
        raise FrameError("malformed", f"not a msgpack value ({type(e).__name__}: {e})") from None
    if type(m) is not dict:
        raise FrameError("malformed", f"expected a map, got {type(m).__name__}")
    version = m.get("v")
    if type(version) is not int:
        raise FrameError("malformed", "no integer protocol version 'v'")
    if version != PROTOCOL_VERSION:
        raise FrameError("version", f"protocol version {version}, expected {PROTOCOL_VERSION}")
    tag = m.get("t")
    if type(tag) is not str:
        raise FrameError("malformed", "no string message type 't'")
    try:
        unpack = _BY_TAG[tag]
    except KeyError:
        raise FrameError("unknown_type", f"unknown message type {tag[:64]!r}") from None
    msg: Message = unpack(m)
    if type(msg) is Welcome:
        _check_welcome(msg)
    return msg


def _check_welcome(msg: Welcome) -> None:
    if msg.slot_count < 1:
        raise FrameError("malformed", "WELCOME.slot_count: expected at least 1")
    if any(slot >= msg.slot_count for slot in msg.slots):
        raise FrameError("malformed", "WELCOME.slots: expected slots below slot_count")
    if not 0 < msg.heartbeat_interval <= msg.heartbeat_timeout:
        raise FrameError(
            "malformed",
            "WELCOME.heartbeat_interval: expected more than 0 and at most heartbeat_timeout",
        )
