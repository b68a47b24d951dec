"""What a worker says about its contact with the coordinator, on a fake clock."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import zmq
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from proto.runtime.clock import FakeClock
from workers.link.contact import (
    FIRST_WARNING_INTERVALS,
    MAX_WARNING_INTERVAL,
    Cause,
    ContactReport,
    join_warnings_counter,
)

ADDRESS = "tcp://coordinator:7070"
E = zmq.Event
REFUSED = [(E.CONNECT_RETRIED, 100)]
OTHER_KEYS = [(E.CONNECTED, 12), (E.HANDSHAKE_FAILED_NO_DETAIL, 32), (E.CONNECT_RETRIED, 100)]
PLAIN_TO_CURVE = [(E.CONNECTED, 12), (E.HANDSHAKE_FAILED_PROTOCOL, 0x11000002)]
KEY_REFUSED = [(E.CONNECTED, 12), (E.HANDSHAKE_FAILED_AUTH, 400)]
NOT_WELCOMED = [(E.CONNECTED, 12), (E.HANDSHAKE_SUCCEEDED, 0)]


def report(clock: FakeClock) -> tuple[ContactReport, CollectorRegistry]:
    registry = CollectorRegistry()
    return ContactReport(ADDRESS, clock=clock, warnings=join_warnings_counter(registry)), registry


def warnings_at(clock: FakeClock, contact: ContactReport, until: float) -> list[float]:
    """When ``check()`` warned, called every quarter second up to ``until``."""
    times = []
    while clock.now() < until:
        with capture_logs() as logs:
            contact.check()
        times += [clock.now() for e in logs if e["event"] == "cannot join the coordinator"]
        clock.advance(0.25)
    return times


def warned(contact: ContactReport, clock: FakeClock) -> dict[str, Any]:
    clock.advance(MAX_WARNING_INTERVAL)
    with capture_logs() as logs:
        contact.check()
    [entry] = logs
    assert entry["log_level"] == "warning" and entry["coordinator"] == ADDRESS
    return dict(entry)


def test_warnings_come_after_three_intervals_then_back_off_to_the_cap() -> None:
    clock = FakeClock()
    contact, registry = report(clock)
    times = warnings_at(clock, contact, 1000)
    assert times[:5] == [3.0, 9.0, 21.0, 45.0, 93.0]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) == MAX_WARNING_INTERVAL and gaps[-1] == MAX_WARNING_INTERVAL
    sample = registry.get_sample_value(
        "metashard_worker_join_warnings_total", {"cause": "no_answer"}
    )
    assert sample == len(times)


@pytest.mark.parametrize(
    ("events", "cause", "says"),
    [
        ([], Cause.NO_ANSWER, "got no answer"),
        (REFUSED, Cause.CONNECTION_REFUSED, "nothing listens"),
        (OTHER_KEYS, Cause.HANDSHAKE_FAILED, "other CURVE keys"),
        (PLAIN_TO_CURVE, Cause.SECURITY_MISMATCH, "one side uses CURVE and the other not"),
        ([(E.HANDSHAKE_FAILED_PROTOCOL, 0x10000011)], Cause.SECURITY_MISMATCH, "error 0x10000011"),
        (KEY_REFUSED, Cause.KEY_REFUSED, "refused this worker's CURVE key"),
        (NOT_WELCOMED, Cause.NO_WELCOME, "not the leader"),
    ],
)
def test_the_cause_is_what_the_monitor_last_showed(
    events: list[tuple[zmq.Event, int]], cause: Cause, says: str
) -> None:
    clock = FakeClock()
    contact, registry = report(clock)
    contact.observe(events)
    entry = warned(contact, clock)
    assert entry["cause"] == cause.value and says in entry["detail"]
    assert (
        registry.get_sample_value("metashard_worker_join_warnings_total", {"cause": cause.value})
        == 1
    )


def test_a_later_attempt_changes_the_cause() -> None:
    clock = FakeClock()
    contact, _ = report(clock)
    # The coordinator went away: the retry scheduled by the disconnection, then one refused.
    causes = []
    for events in (NOT_WELCOMED + REFUSED, REFUSED, OTHER_KEYS):
        contact.observe(events)
        causes.append(contact.cause)
    # A retry after a connection is not a refusal.
    assert causes == [Cause.NO_WELCOME, Cause.CONNECTION_REFUSED, Cause.HANDSHAKE_FAILED]


def test_a_refusal_of_the_hello_is_given() -> None:
    clock = FakeClock()
    contact, _ = report(clock)
    contact.observe(NOT_WELCOMED)
    contact.refused("another process with worker id w-1 is a member")
    assert warned(contact, clock)["detail"].endswith("w-1 is a member")


def test_joined_is_said_once_and_again_after_a_loss() -> None:
    clock = FakeClock()
    contact, _ = report(clock)
    with capture_logs() as logs:
        contact.joined(epoch=3, coordinator="c-1", heartbeat_interval=0.5)
        contact.joined(epoch=4, coordinator="c-2", heartbeat_interval=0.5)
        assert warnings_at(clock, contact, 100) == []
        contact.lost()
        lost_at = clock.now()
        times = warnings_at(clock, contact, lost_at + 10)
        contact.joined(epoch=5, coordinator="c-2", heartbeat_interval=0.5)
    # The coordinator's interval now: 3 of 0.5 s, then 6 of them.
    assert times == [lost_at + FIRST_WARNING_INTERVALS * 0.5, lost_at + 4.5]
    said = [(e["event"], e.get("epoch")) for e in logs if "joined" in e["event"]]
    assert said == [("joined coordinator", 3), ("joined coordinator again", 5)]
    again = next(e for e in logs if e["event"] == "joined coordinator again")
    assert again["coordinator"] == ADDRESS and again["out_of_contact_seconds"] == 10.0
