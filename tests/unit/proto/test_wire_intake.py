from __future__ import annotations

from typing import Any

import msgpack
from prometheus_client import CollectorRegistry, Counter

from proto.wire import (
    DROPPED_FRAMES_HELP,
    DROPPED_FRAMES_METRIC,
    FRAME_ERROR_REASONS,
    PROTOCOL_VERSION,
    Bye,
    Heartbeat,
    Intake,
    encode,
)

GOOD = encode(Heartbeat(epoch=1))
WRONG_VERSION = msgpack.packb({"v": 99, "t": "BYE", "reason": "x"})
UNKNOWN_TYPE = msgpack.packb({"v": PROTOCOL_VERSION, "t": "GOSSIP"})


class Log:
    def __init__(self) -> None:
        self.records: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, /, **kw: Any) -> None:
        self.records.append((event, kw))

    def pairs(self) -> list[tuple[str, str]]:
        return [(kw["peer"], kw["reason"]) for _, kw in self.records]


def _intake(**kw: Any) -> tuple[Intake, Log, CollectorRegistry]:
    registry = CollectorRegistry()
    counter = Counter(DROPPED_FRAMES_METRIC, DROPPED_FRAMES_HELP, ["reason"], registry=registry)
    log = Log()
    return Intake(log=log, counter=counter, **kw), log, registry


def _dropped(registry: CollectorRegistry, reason: str) -> float | None:
    return registry.get_sample_value(DROPPED_FRAMES_METRIC, {"reason": reason})


def test_a_valid_frame_is_a_message_and_nothing_is_counted() -> None:
    intake, log, registry = _intake()
    assert intake.accept("w-0", [GOOD]) == Heartbeat(epoch=1)
    assert log.records == []
    assert all(_dropped(registry, r) == 0 for r in FRAME_ERROR_REASONS)


def test_bad_frames_are_counted_by_reason() -> None:
    intake, _, registry = _intake(max_frame_size=len(GOOD))
    bad = [
        [b"\xc1"],
        [GOOD, GOOD],  # two frames
        [],  # none
        [WRONG_VERSION],
        [UNKNOWN_TYPE],
        [encode(Bye("x" * 100))],  # over the limit
    ]
    assert [intake.accept("w-0", parts) for parts in bad] == [None] * len(bad)
    assert _dropped(registry, "malformed") == 3
    assert _dropped(registry, "version") == 1
    assert _dropped(registry, "unknown_type") == 1
    assert _dropped(registry, "oversized") == 1


def test_each_kind_of_bad_frame_is_logged_once_per_peer() -> None:
    intake, log, registry = _intake()
    for _ in range(3):
        intake.accept("w-0", [b"\xc1"])
        intake.accept("w-0", [WRONG_VERSION])
        intake.accept("w-1", [b"\xc1"])
    assert log.pairs() == [("w-0", "malformed"), ("w-0", "version"), ("w-1", "malformed")]
    assert _dropped(registry, "malformed") == 6
    event, fields = log.records[1]
    assert event == "wire frame dropped"
    assert "protocol version 99" in fields["detail"]
    assert fields["size"] == len(WRONG_VERSION)
    assert intake.accept("w-0", [GOOD]) == Heartbeat(epoch=1)


def test_the_memory_of_logged_pairs_is_bounded() -> None:
    intake, log, _ = _intake(remember=2)
    for peer in ("a", "b", "c", "a"):
        intake.accept(peer, [b"\xc1"])
    assert log.pairs() == [(peer, "malformed") for peer in ("a", "b", "c", "a")]


def test_without_a_counter_drops_are_only_logged() -> None:
    log = Log()
    intake = Intake(log=log)
    assert intake.accept("w-0", [b"\xc1"]) is None
    assert log.pairs() == [("w-0", "malformed")]
