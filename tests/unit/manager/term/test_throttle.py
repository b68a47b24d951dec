"""manager.term.throttle: permits across workers, a token bucket, keys waiting their turn."""

from __future__ import annotations

from typing import cast

import orjson
import pytest
import structlog
from prometheus_client import CollectorRegistry

from manager.controllers.view import ControllerView
from manager.term.metrics import TermMetrics
from manager.term.throttle import RESERVE_FOR, Admission, Throttle
from proto.runtime.clock import FakeClock
from proto.wire import ParentKey, Priority

PERMIT, FREE, THROTTLED = Admission.PERMIT, Admission.FREE, Admission.THROTTLED


class View:
    def __init__(self, name: str, **annotations: str) -> None:
        self.id = ("CompositeController", name)
        self.raw = orjson.dumps({"metadata": {"name": name, "annotations": annotations}})


def limited(name: str = "noisy", *, most: str = "", rate: str = "") -> ControllerView:
    annotations = {}
    if most:
        annotations["metashard.io/max-concurrent-reconciles"] = most
    if rate:
        annotations["metashard.io/reconciles-per-second"] = rate
    return cast(ControllerView, View(name, **annotations))


def key(name: str, controller: str = "noisy") -> ParentKey:
    return ParentKey("CompositeController", controller, "things.example.com", "ns", name)


class World:
    def __init__(self, *views: ControllerView) -> None:
        self.clock = FakeClock()
        self.pushed: list[tuple[ParentKey, Priority]] = []
        self.routes = {"w0": b"r0", "w1": b"r1", "old": b"r2"}
        self.registry = CollectorRegistry()
        self.throttle = Throttle(
            sink=self, members=self, metrics=TermMetrics(self.registry), clock=self.clock
        )
        self.throttle.controllers_changed(views, views)
        self.throttle.joined("w0", limits=True)
        self.throttle.joined("w1", limits=True)
        self.throttle.joined("old", limits=False)

    def push(self, key: ParentKey, priority: Priority) -> None:
        self.pushed.append((key, priority))

    def route(self, worker_id: str) -> bytes | None:
        return self.routes.get(worker_id)

    def counts(self, controller: str = "noisy") -> tuple[float | None, float | None]:
        """(permits held, keys waiting) as reported by the last tick."""
        self.throttle.tick()
        labels = {"controller": f"CompositeController/{controller}"}
        return (
            self.registry.get_sample_value("metashard_coordinator_controller_permits", labels),
            self.registry.get_sample_value("metashard_coordinator_controller_waiting", labels),
        )


def test_at_most_max_concurrent_permits_across_workers_then_the_first_waiting_goes() -> None:
    w = World(limited(most="2"))
    t = w.throttle
    assert t.admit("w0", key("a")) is PERMIT
    assert t.admit("w1", key("b")) is PERMIT
    assert t.admit("w0", key("c")) is THROTTLED
    assert t.admit("w1", key("d")) is THROTTLED
    assert t.admit("w1", key("c")) is THROTTLED  # waits once, keeps its place
    assert w.counts() == (2, 2)
    t.release("w1", key("a"))  # not w1's permit: nothing changes
    assert w.pushed == []
    t.release("w0", key("a"))
    assert w.pushed == [(key("c"), Priority.LIVE)]
    assert t.admit("w1", key("e")) is THROTTLED  # d waits ahead of it, and no permit is free
    assert t.admit("w0", key("c")) is PERMIT  # the permit kept for it
    assert w.counts() == (2, 2)


def test_a_controller_without_limits_and_a_worker_that_does_not_take_part_are_free() -> None:
    w = World(limited(most="1"), limited("quiet"))
    t = w.throttle
    assert t.admit("w0", key("a", "quiet")) is FREE
    assert t.admit("w0", key("a")) is PERMIT
    with structlog.testing.capture_logs() as logs:
        assert t.admit("old", key("b")) is FREE
        assert t.admit("old", key("c")) is FREE
    assert [e["event"] for e in logs] == [
        "worker predates per-controller limits: its reconciles are not limited"
    ]
    assert w.counts() == (1, 0)
    assert w.counts("quiet") == (None, None)  # not limited: not reported


def test_the_rate_is_a_token_bucket_of_one_second() -> None:
    w = World(limited(rate="2"))
    t = w.throttle
    assert [t.admit("w0", key(n)) for n in "abc"] == [PERMIT, PERMIT, THROTTLED]
    for n in "ab":
        t.release("w0", key(n))  # concurrency is not limited: no token, no permit
    assert w.pushed == []
    w.clock.advance(0.25)
    t.tick()
    assert w.pushed == []
    w.clock.advance(0.25)
    t.tick()
    assert w.pushed == [(key("c"), Priority.LIVE)]
    w.clock.advance(10)
    t.tick()
    assert [t.admit("w0", key(n)) for n in "xyz"] == [PERMIT, PERMIT, THROTTLED]


def test_a_waiting_key_fetched_again_when_its_turn_has_come_takes_its_permit_once() -> None:
    w = World(limited(rate="1"))
    t = w.throttle
    assert [t.admit("w0", key(n)) for n in "ab"] == [PERMIT, THROTTLED]
    w.clock.advance(1.0)  # a token, and no tick yet: b's turn
    assert t.admit("w0", key("b")) is PERMIT  # an event pushed it meanwhile
    w.clock.advance(1.0)
    assert w.counts() == (2, 0)  # b does not wait any more
    assert t.admit("w0", key("c")) is PERMIT


def test_a_kept_permit_not_taken_in_time_is_freed_for_the_next() -> None:
    w = World(limited(most="1"))
    t = w.throttle
    assert t.admit("w0", key("a")) is PERMIT
    assert t.admit("w0", key("b")) is THROTTLED
    assert t.admit("w0", key("c")) is THROTTLED
    t.release("w0", key("a"))
    assert w.pushed == [(key("b"), Priority.LIVE)]
    w.clock.advance(RESERVE_FOR)
    t.tick()
    assert w.pushed == [(key("b"), Priority.LIVE), (key("c"), Priority.LIVE)]
    assert t.admit("w0", key("b")) is THROTTLED  # late: it waits again


def test_the_permits_of_a_worker_gone_or_joined_again_are_freed() -> None:
    w = World(limited(most="2"))
    t = w.throttle
    assert t.admit("w0", key("a")) is PERMIT
    assert t.admit("w1", key("b")) is PERMIT
    assert t.admit("w1", key("c")) is THROTTLED
    del w.routes["w0"]
    w.routes["w1"] = b"r9"  # a new connection: its reconciles were cancelled
    t.tick()
    assert w.pushed == [(key("c"), Priority.LIVE)]
    assert w.counts() == (1, 0)


def test_a_controller_removed_or_no_longer_limited_lets_its_waiting_keys_go() -> None:
    w = World(limited(most="1"))
    t = w.throttle
    t.admit("w0", key("a"))
    t.admit("w0", key("b"))
    t.controllers_changed([limited(most="2")], [])
    assert w.pushed == [(key("b"), Priority.LIVE)]  # more room
    t.admit("w0", key("c"))
    t.controllers_changed([limited(most="x")], [])  # not parsed: no limit
    assert w.pushed == [(key("b"), Priority.LIVE), (key("c"), Priority.LIVE)]
    assert t.admit("w0", key("d")) is FREE


@pytest.mark.parametrize("flood", [20_000])
def test_a_flooded_controller_does_not_delay_another(flood: int) -> None:
    w = World(limited(most="4"), limited("other", most="4"))
    t = w.throttle
    for i in range(flood):
        t.admit("w0", key(str(i)))
    assert w.counts() == (4, flood - 4)
    assert t.admit("w1", key("fresh", "other")) is PERMIT
