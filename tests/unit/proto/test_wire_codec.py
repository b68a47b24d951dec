from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.wire import (
    FRAME_ERROR_REASONS,
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    Assign,
    Bye,
    ControllerDef,
    ControllerKind,
    Fetch,
    FrameError,
    Heartbeat,
    Hello,
    Keys,
    Message,
    NackReason,
    ParentKey,
    Priority,
    ResourceInfo,
    Snapshot,
    Welcome,
    decode,
    encode,
)
from tests.unit.proto.wire_strategies import MESSAGES, messages, msgpack_values

KEY = ParentKey("CompositeController", "cc", "catsets.ctl.enisoc.com", "default", "web")


def _frame(**fields: Any) -> bytes:
    return msgpack.packb(fields, use_bin_type=True)  # type: ignore[no-any-return]


def _fields(msg: Message) -> dict[str, Any]:
    """The map of ``msg``'s frame, as a plain dict."""
    out: dict[str, Any] = msgpack.unpackb(encode(msg), raw=False)
    return out


def _reason(frame: bytes, **kw: Any) -> str:
    with pytest.raises(FrameError) as info:
        decode(frame, **kw)
    return info.value.reason


# --- round trips ---------------------------------------------------------------------------


def test_every_message_type_has_a_strategy() -> None:
    assert set(MESSAGES) == set(MESSAGE_TYPES)
    assert len({cls.TYPE for cls in MESSAGE_TYPES}) == len(MESSAGE_TYPES)


@given(messages)
def test_every_message_round_trips(msg: Message) -> None:
    back = decode(encode(msg))
    assert type(back) is type(msg)
    assert back == msg


@given(MESSAGES[Keys])
def test_decoded_fields_have_their_declared_types(msg: Keys) -> None:
    back = decode(encode(msg))
    assert isinstance(back, Keys)
    assert type(back.priority) is Priority
    assert type(back.keys) is tuple
    assert all(type(k) is ParentKey for k in back.keys)


def test_nested_records_come_back_as_records() -> None:
    resource = ResourceInfo("apps/v1", "deployments", "Deployment", True, ("status", "scale"))
    ctl = ControllerDef(ControllerKind.DECORATOR, "dc", "uid-1", "42", b'{"kind":"x"}', (resource,))
    back = decode(encode(Welcome(1, "coord-0", "inc", (ctl,), 1024, (3, 4), 0.5, 5)))
    assert isinstance(back, Welcome)
    assert back.controllers == (ctl,)
    assert type(back.controllers[0].kind) is ControllerKind
    assert back.heartbeat_timeout == 5.0 and type(back.heartbeat_timeout) is float
    assert back.controllers[0].resources[0].group_resource == "deployments.apps"


def test_frames_are_pinned() -> None:
    # The wire format is shared by processes of different versions: it must not drift.
    assert encode(Fetch(epoch=7, request_id=42, key=KEY, barrier={"pods": "12"})) == (
        b"\x86\xa1v\x02\xa1t\xa5FETCH\xa5epoch\x07\xaarequest_id*\xa3key\x95"
        b"\xb3CompositeController\xa2cc\xb6catsets.ctl.enisoc.com\xa7default\xa3web"
        b"\xa7barrier\x81\xa4pods\xa212"
    )
    assert encode(Heartbeat(epoch=3, in_flight=2, queue_depth=10)) == (
        b"\x85\xa1v\x02\xa1t\xa9HEARTBEAT\xa5epoch\x03\xa9in_flight\x02\xabqueue_depth\n"
    )


def test_object_payloads_travel_as_raw_bin() -> None:
    parent = b'{"metadata":{"name":"web"},"spec":{"replicas":3}}'
    child = b'{"kind":"Pod"}'
    snap = Snapshot(1, 2, KEY, parent, {"Pod.v1": (child,)}, (), {})
    frame = encode(snap)
    assert parent in frame and child in frame
    raw = msgpack.unpackb(frame, raw=True)
    assert raw[b"parent"] == parent  # bin, not str: bytes even with raw=True
    assert raw[b"key"] == [f.encode() for f in KEY]


def test_unknown_fields_are_ignored() -> None:
    fields = _fields(Bye("shutdown")) | {"added_later": [1, 2]}
    assert decode(_frame(**fields)) == Bye("shutdown")


def test_fields_added_with_a_default_may_be_missing_from_an_older_peers_frame() -> None:
    # ASSIGN and WELCOME as a coordinator that predates the assignment generation sent them.
    assign = _fields(Assign(3, (1, 2), (KEY,), generation=9))
    del assign["generation"]
    assert decode(_frame(**assign)) == Assign(3, (1, 2), (KEY,), generation=0)
    welcome = _fields(Welcome(1, "c", "i", (), 1024, (5,), 1.0, 5.0, generation=4, defers=True))
    del welcome["generation"], welcome["defers"]
    assert decode(_frame(**welcome)) == Welcome(1, "c", "i", (), 1024, (5,), 1.0, 5.0)
    # HELLO of a worker that predates per-controller limits, SNAPSHOT of such a coordinator.
    hello = _fields(Hello("w-0", "3f1c", 8, 1234, limits=True))
    del hello["limits"]
    assert decode(_frame(**hello)) == Hello("w-0", "3f1c", 8, 1234, limits=False)
    snapshot = _fields(Snapshot(3, 4, KEY, None, {}, (), {}, permit=True))
    del snapshot["permit"]
    assert decode(_frame(**snapshot)) == Snapshot(3, 4, KEY, None, {}, (), {}, permit=False)
    # A field without a default is still required.
    del assign["keys"]
    assert _reason(_frame(**assign)) == "malformed"


# --- rejected frames -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\xc1",  # a byte msgpack never uses
        b"\x85\xa1v",  # truncated
        b"\x91" * 100_000 + b"\xc0",  # nested deeper than the unpacker's stack
        b"\xdd\xff\xff\xff\xff",  # an array claiming 4 billion items
        b"\xa2\xff\xfe",  # a str that is not UTF-8
        b"\xd6\xff\x00\x00\x00\x00",  # a timestamp
        b"\xc7\x03\xff\x00\x00\x00",  # an invalid timestamp
        encode(Bye("x")) + b"\x00",  # trailing data
        msgpack.packb([1, PROTOCOL_VERSION, "BYE"]),  # not a map
        msgpack.packb({1: 2}),  # non-string key
        _frame(t="BYE", reason="x"),  # no version
        _frame(v="1", t="BYE", reason="x"),  # version not an int
        _frame(v=True, t="BYE", reason="x"),  # bool is not an int
        _frame(v=PROTOCOL_VERSION, reason="x"),  # no type
        _frame(v=PROTOCOL_VERSION, t=b"BYE", reason="x"),  # type not a str
        _frame(v=PROTOCOL_VERSION, t="BYE"),  # missing field
        _frame(v=PROTOCOL_VERSION, t="BYE", reason=b"x"),  # bin where str is due
        _frame(v=PROTOCOL_VERSION, t="HEARTBEAT", epoch=-1, in_flight=0, queue_depth=0),
        _frame(v=PROTOCOL_VERSION, t="HEARTBEAT", epoch=True, in_flight=0, queue_depth=0),
        _frame(v=PROTOCOL_VERSION, t="HEARTBEAT", epoch=1.0, in_flight=0, queue_depth=0),
        _frame(v=PROTOCOL_VERSION, t="FETCH", epoch=1, request_id=1, key=list(KEY)[:4]),
        _frame(v=PROTOCOL_VERSION, t="FETCH", epoch=1, request_id=1, key="a/b"),
        _frame(v=PROTOCOL_VERSION, t="KEYS", epoch=1, priority=7, keys=[]),
        _frame(v=PROTOCOL_VERSION, t="KEYS", epoch=1, priority=0, keys=[list(KEY), "x"]),
        _frame(v=PROTOCOL_VERSION, t="KEYS", epoch=1, priority=0, keys=[[*KEY[:4], 5]]),
        _frame(v=PROTOCOL_VERSION, t="NACK", epoch=1, request_id=1, reason="nope", detail=""),
        msgpack.packb(  # an ext value where an int is due
            {"v": PROTOCOL_VERSION, "t": "REVOKE", "epoch": msgpack.ExtType(5, b"x"), "slots": []}
        ),
    ],
)
def test_malformed_frames(frame: bytes) -> None:
    assert _reason(frame) == "malformed"


def test_malformed_nested_record_names_the_path() -> None:
    fields = _fields(Welcome(1, "c", "i", (), 1024, (), 1.0, 5.0))
    fields["controllers"] = [{"kind": "CompositeController", "name": "cc"}]
    with pytest.raises(FrameError, match=r"WELCOME\.controllers\[0\]: field 'uid' is missing"):
        decode(_frame(**fields))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, "1"])
def test_durations_must_be_finite_non_negative_numbers(bad: object) -> None:
    fields = _fields(Welcome(1, "c", "i", (), 1024, (), 1.0, 5.0)) | {"heartbeat_interval": bad}
    assert _reason(_frame(**fields)) == "malformed"


@pytest.mark.parametrize(
    "change",
    [
        {"slot_count": 0},  # every slot_of would divide by zero
        {"slots": [3, 1024]},  # a slot the count does not have
        {"heartbeat_interval": 0.0},  # heartbeats without pause
        {"heartbeat_interval": 6.0},  # longer than the timeout
    ],
)
def test_a_welcome_no_worker_can_act_on_is_malformed(change: dict[str, Any]) -> None:
    fields = _fields(Welcome(1, "c", "i", (), 1024, (3,), 1.0, 5.0)) | change
    assert _reason(_frame(**fields)) == "malformed"


def test_oversized_frames_are_rejected_before_parsing() -> None:
    frame = encode(Bye("x" * 100))
    assert decode(frame, max_size=len(frame)) == Bye("x" * 100)
    assert _reason(frame, max_size=len(frame) - 1) == "oversized"
    assert _reason(b"\xc1" * 10, max_size=9) == "oversized"


def test_encoding_an_oversized_message_fails_at_the_sender() -> None:
    snap = Snapshot(1, 1, KEY, b"x" * 1000, {}, (), {})
    with pytest.raises(FrameError) as info:
        encode(snap, max_size=999)
    assert info.value.reason == "oversized"


def test_unknown_type() -> None:
    assert _reason(_frame(v=PROTOCOL_VERSION, t="GOSSIP", epoch=1)) == "unknown_type"


@pytest.mark.parametrize("version", [0, PROTOCOL_VERSION + 1, 2**40])
def test_other_versions_are_rejected_whatever_the_type(version: int) -> None:
    assert _reason(_frame(**(_fields(Bye("x")) | {"v": version}))) == "version"
    assert _reason(_frame(v=version, t="GOSSIP")) == "version"


def test_frame_error_reasons_are_the_documented_set() -> None:
    assert FRAME_ERROR_REASONS == ("malformed", "oversized", "unknown_type", "version")
    err = FrameError("version", "protocol version 2, expected 1")
    assert str(err) == "version: protocol version 2, expected 1"


# --- fuzz: nothing but a message or a FrameError, ever --------------------------------------


def _decode_or_reason(frame: bytes) -> Message | str:
    try:
        return decode(frame)
    except FrameError as e:
        assert e.reason in FRAME_ERROR_REASONS
        return e.reason


@given(st.binary(max_size=512))
def test_arbitrary_bytes_decode_or_raise_frame_error(frame: bytes) -> None:
    _decode_or_reason(frame)


@given(msgpack_values)
def test_arbitrary_msgpack_values_decode_or_raise_frame_error(value: object) -> None:
    _decode_or_reason(msgpack.packb(value, use_bin_type=True))


@given(messages, st.data())
def test_a_field_replaced_by_anything_is_a_message_or_malformed(
    msg: Message, data: st.DataObject
) -> None:
    fields = _fields(msg)
    names = [f.name for f in dataclasses.fields(msg)]
    if not names:
        return
    name = data.draw(st.sampled_from(names))
    fields[name] = data.draw(msgpack_values)
    result = _decode_or_reason(_frame(**fields))
    assert result == "malformed" or type(result) is type(msg)


@given(messages, st.data())
def test_corrupted_frames_decode_or_raise_frame_error(msg: Message, data: st.DataObject) -> None:
    frame = bytearray(encode(msg))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    _decode_or_reason(bytes(frame[:cut]))


def test_enum_values_on_the_wire() -> None:
    assert [p.value for p in Priority] == [0, 1]
    assert _fields(Keys(1, Priority.LOW, ()))["priority"] == 1
    assert {r.value for r in NackReason} == {
        "not_owner",
        "stale_epoch",
        "unknown_key",
        "unknown_controller",
        "too_large",
        "not_ready",
        "throttled",
    }


def test_hello_fields_on_the_wire() -> None:
    assert _fields(Hello("w-0", "3f1c", 8, 1234)) == {
        "v": PROTOCOL_VERSION,
        "t": "HELLO",
        "worker_id": "w-0",
        "incarnation": "3f1c",
        "concurrency": 8,
        "pid": 1234,
        "limits": False,
    }
