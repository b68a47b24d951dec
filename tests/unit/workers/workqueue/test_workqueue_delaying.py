"""The delaying layer: ready times, the earlier one winning, waking early, no polling."""

from __future__ import annotations

import asyncio
import math

import pytest
from prometheus_client import CollectorRegistry

from proto.runtime.clock import FakeClock
from proto.wire import Priority
from tests.unit.workers.workqueue.conftest import Settle
from workers.workqueue import InvalidDelay, WorkQueue


def retries(registry: CollectorRegistry) -> float | None:
    labels = {"name": "test", "controller": "test"}
    return registry.get_sample_value("workqueue_retries_total", labels)


async def ready_after(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle, seconds: float
) -> list[str]:
    """Advance the clock, let the releaser run, and take everything that became ready."""
    clock.advance(seconds)
    await settle()
    return [await queue.get() for _ in range(len(queue))]


@pytest.mark.asyncio
@pytest.mark.parametrize("seconds", [0.0, -1.0])
async def test_no_delay_adds_at_once(
    queue: WorkQueue[str], clock: FakeClock, seconds: float
) -> None:
    queue.add_after("a", seconds)
    assert len(queue) == 1
    assert await queue.get() == "a"


@pytest.mark.asyncio
async def test_an_item_is_ready_exactly_when_its_delay_has_passed(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle
) -> None:
    queue.add_after("a", 2.0)
    await settle()
    assert len(queue) == 0
    assert await ready_after(queue, clock, settle, 1.999) == []
    assert await ready_after(queue, clock, settle, 0.001) == ["a"]


@pytest.mark.asyncio
async def test_items_are_released_in_ready_time_order(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle
) -> None:
    queue.add_after("late", 3.0)
    queue.add_after("early", 1.0)
    queue.add_after("middle", 2.0)
    queue.add_after("middle-too", 2.0)
    assert await ready_after(queue, clock, settle, 5.0) == ["early", "middle", "middle-too", "late"]


@pytest.mark.asyncio
@pytest.mark.parametrize("delays", [(10.0, 2.0), (2.0, 10.0)])
async def test_the_earlier_ready_time_wins(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle, delays: tuple[float, float]
) -> None:
    for delay in delays:
        queue.add_after("a", delay)
    assert await ready_after(queue, clock, settle, 2.0) == ["a"]
    queue.done("a")
    assert await ready_after(queue, clock, settle, 20.0) == []  # not released a second time


@pytest.mark.asyncio
async def test_an_earlier_item_wakes_the_releaser(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle
) -> None:
    queue.add_after("slow", 100.0)
    await settle()
    assert clock.sleepers == 1  # asleep until t+100
    queue.add_after("fast", 1.0)
    await settle()
    assert clock.sleepers == 1  # re-armed for t+1, the old sleep abandoned
    assert await ready_after(queue, clock, settle, 1.0) == ["fast"]
    assert await ready_after(queue, clock, settle, 98.0) == []
    assert await ready_after(queue, clock, settle, 1.0) == ["slow"]


@pytest.mark.asyncio
async def test_the_releaser_never_polls(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle
) -> None:
    queue.add_after("a", 5.0)
    await settle()
    assert clock.sleepers == 1
    assert await ready_after(queue, clock, settle, 5.0) == ["a"]
    assert clock.sleepers == 0  # nothing parked: waits for the next add_after, no timer
    queue.add_after("b", 1.0)
    await settle()
    assert clock.sleepers == 1
    assert await ready_after(queue, clock, settle, 1.0) == ["b"]


@pytest.mark.asyncio
async def test_a_parked_item_keeps_the_more_urgent_priority(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle
) -> None:
    queue.add_after("resync", 1.0, priority=Priority.LOW)
    queue.add_after("retry", 1.0, priority=Priority.LOW)
    queue.add_after("retry", 5.0, priority=Priority.LIVE)  # later, but raises the priority
    queue.add("other", priority=Priority.LOW)
    assert await ready_after(queue, clock, settle, 1.0) == ["retry", "other", "resync"]


@pytest.mark.asyncio
async def test_an_earlier_low_park_keeps_a_live_priority(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle
) -> None:
    queue.add_after("a", 5.0)
    queue.add_after("a", 1.0, priority=Priority.LOW)
    queue.add("b", priority=Priority.LOW)
    assert await ready_after(queue, clock, settle, 1.0) == ["a", "b"]


@pytest.mark.asyncio
async def test_a_plain_add_does_not_wait_for_the_parked_copy(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle
) -> None:
    queue.add_after("a", 5.0)
    queue.add("a")
    assert await queue.get() == "a"
    queue.done("a")
    # The parked copy is still due: a retry scheduled before the change is not lost.
    assert await ready_after(queue, clock, settle, 5.0) == ["a"]


@pytest.mark.asyncio
async def test_a_release_of_a_queued_item_is_deduplicated(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle, registry: CollectorRegistry
) -> None:
    queue.add_after("a", 1.0)
    queue.add("a")
    assert await ready_after(queue, clock, settle, 1.0) == ["a"]
    labels = {"name": "test", "controller": "test"}
    assert registry.get_sample_value("workqueue_adds_total", labels) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("seconds", [math.nan, math.inf, -math.inf])
async def test_a_delay_that_is_not_finite_is_rejected(
    queue: WorkQueue[str], registry: CollectorRegistry, seconds: float
) -> None:
    with pytest.raises(InvalidDelay):
        queue.add_after("a", seconds)
    assert len(queue) == 0
    assert retries(registry) == 0


@pytest.mark.asyncio
async def test_every_add_after_counts_a_retry(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    queue.add_after("a", 0.0)
    queue.add_after("a", 1.0)
    queue.add_after("a", 2.0)
    assert retries(registry) == 3
    queue.shut_down()
    queue.add_after("a", 1.0)  # ignored, and not counted
    assert retries(registry) == 3


@pytest.mark.asyncio
async def test_shut_down_drops_parked_items_and_stops_the_releaser(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle
) -> None:
    queue.add_after("a", 1.0)
    await settle()
    releasers = [t for t in asyncio.all_tasks() if "delays" in t.get_name()]
    assert len(releasers) == 1
    queue.shut_down()
    await settle()
    assert releasers[0].done()
    assert clock.sleepers == 0
    clock.advance(10.0)
    await settle()
    assert len(queue) == 0


@pytest.mark.asyncio
async def test_discard_drops_parked_items(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle
) -> None:
    queue.add_after("slot1/a", 1.0)
    queue.add_after("slot1/b", 2.0)
    queue.add_after("slot2/c", 3.0)
    queue.add("slot1/b")  # both queued and parked: counted once
    assert queue.discard(lambda key: key.startswith("slot1/")) == 2
    assert len(queue) == 0
    assert await ready_after(queue, clock, settle, 5.0) == ["slot2/c"]
