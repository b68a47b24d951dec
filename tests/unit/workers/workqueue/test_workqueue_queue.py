"""The queue core: fairness, dedup, one consumer per item, priorities, shutdown, discard."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from proto.wire import Priority
from tests.unit.workers.workqueue.conftest import Settle
from workers.workqueue import InvalidPriority, NotProcessing, ShutDown, WorkQueue


def depth(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("workqueue_depth", {"name": "test", "controller": "test"})


async def take(queue: WorkQueue[str], n: int) -> list[str]:
    return [await queue.get() for _ in range(n)]


@pytest.mark.asyncio
async def test_items_come_out_in_the_order_they_went_in(queue: WorkQueue[str]) -> None:
    for item in "cab":
        queue.add(item)
    assert len(queue) == 3
    assert await take(queue, 3) == ["c", "a", "b"]
    assert len(queue) == 0


@pytest.mark.asyncio
async def test_an_item_added_many_times_is_handed_out_once(queue: WorkQueue[str]) -> None:
    for item in "abab":
        queue.add(item)
    assert len(queue) == 2
    assert await take(queue, 2) == ["a", "b"]
    assert len(queue) == 0


@pytest.mark.asyncio
async def test_an_item_added_while_processing_waits_for_done(
    queue: WorkQueue[str], settle: Settle
) -> None:
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0  # not ready: "a" is still being processed
    second = asyncio.create_task(queue.get())
    await settle()
    assert not second.done()
    queue.done("a")
    assert await second == "a"
    queue.done("a")
    assert len(queue) == 0


@pytest.mark.asyncio
async def test_done_requeues_at_the_back(queue: WorkQueue[str]) -> None:
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    queue.add("b")
    queue.done("a")
    assert await take(queue, 2) == ["b", "a"]


@pytest.mark.asyncio
async def test_live_items_go_before_low_ones(queue: WorkQueue[str]) -> None:
    queue.add("resync-1", priority=Priority.LOW)
    queue.add("resync-2", priority=Priority.LOW)
    queue.add("change-1")
    queue.add("resync-3", priority=Priority.LOW)
    queue.add("change-2", priority=Priority.LIVE)
    assert await take(queue, 5) == ["change-1", "change-2", "resync-1", "resync-2", "resync-3"]


@pytest.mark.asyncio
async def test_a_live_add_promotes_a_low_item_to_the_back_of_the_live_line(
    queue: WorkQueue[str],
) -> None:
    queue.add("low-1", priority=Priority.LOW)
    queue.add("low-2", priority=Priority.LOW)
    queue.add("live-1")
    queue.add("low-2")  # a live change for a key queued by a resync
    queue.add("live-2")
    assert len(queue) == 4
    assert await take(queue, 4) == ["live-1", "low-2", "live-2", "low-1"]


@pytest.mark.asyncio
async def test_a_low_add_never_demotes(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.add("b", priority=Priority.LOW)
    queue.add("a", priority=Priority.LOW)
    assert await take(queue, 2) == ["a", "b"]


@pytest.mark.asyncio
async def test_a_rerun_keeps_the_highest_priority_it_was_added_with(
    queue: WorkQueue[str],
) -> None:
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a", priority=Priority.LOW)
    queue.add("b", priority=Priority.LOW)
    queue.add("a")  # while processing: the re-run becomes live
    queue.done("a")
    assert await take(queue, 2) == ["a", "b"]


@pytest.mark.asyncio
async def test_a_rerun_after_a_low_add_stays_low(queue: WorkQueue[str]) -> None:
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a", priority=Priority.LOW)
    queue.add("b")
    queue.done("a")
    queue.add("c", priority=Priority.LOW)
    assert await take(queue, 3) == ["b", "a", "c"]


@pytest.mark.asyncio
async def test_waiting_getters_are_served_in_arrival_order(
    queue: WorkQueue[str], settle: Settle
) -> None:
    first = asyncio.create_task(queue.get())
    await settle()
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("a")
    await settle()
    assert first.done()
    assert not second.done()
    assert first.result() == "a"
    queue.add("b")
    assert await second == "b"


@pytest.mark.asyncio
async def test_two_consumers_never_hold_the_same_item(
    queue: WorkQueue[str], settle: Settle
) -> None:
    queue.add("a")
    held = await queue.get()
    other = asyncio.create_task(queue.get())
    queue.add("a")
    await settle()
    assert not other.done()  # the second consumer must wait for done
    queue.done(held)
    assert await other == "a"


@pytest.mark.asyncio
async def test_a_cancelled_getter_passes_its_wakeup_on(
    queue: WorkQueue[str], settle: Settle
) -> None:
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("a")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    await settle()
    assert first.cancelled()
    assert second.done()
    assert second.result() == "a"


@pytest.mark.asyncio
async def test_done_for_an_item_not_processing_is_a_typed_error(queue: WorkQueue[str]) -> None:
    queue.add("a")
    with pytest.raises(NotProcessing) as caught:
        queue.done("a")
    assert caught.value.item == "a"
    assert len(queue) == 1


@pytest.mark.asyncio
async def test_an_unknown_priority_is_rejected_without_changing_anything(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    with pytest.raises(InvalidPriority):
        queue.add("a", priority=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        queue.add_after("a", 1.0, priority="high")  # type: ignore[arg-type]
    assert len(queue) == 0
    assert depth(registry) == 0


@pytest.mark.asyncio
async def test_shut_down_ignores_adds_and_hands_out_what_is_queued(
    queue: WorkQueue[str],
) -> None:
    queue.add("a")
    queue.add("b")
    queue.shut_down()
    queue.add("c")
    assert len(queue) == 2
    assert await take(queue, 2) == ["a", "b"]
    with pytest.raises(ShutDown):
        await queue.get()


@pytest.mark.asyncio
async def test_shut_down_wakes_waiting_getters(queue: WorkQueue[str], settle: Settle) -> None:
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    queue.shut_down()
    results = await asyncio.gather(*getters, return_exceptions=True)
    assert all(isinstance(result, ShutDown) for result in results)


@pytest.mark.asyncio
async def test_done_after_shut_down_still_requeues_a_dirty_item(queue: WorkQueue[str]) -> None:
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    queue.shut_down()
    queue.done("a")
    assert await queue.get() == "a"
    queue.done("a")
    with pytest.raises(ShutDown):
        await queue.get()


@pytest.mark.asyncio
async def test_discard_drops_queued_items_and_pending_reruns_only(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    queue.add("slot1/a")
    queue.add("slot1/b", priority=Priority.LOW)
    queue.add("slot2/c")
    in_flight = await queue.get()
    assert in_flight == "slot1/a"
    queue.add("slot1/a")  # re-run pending behind the in-flight one
    assert depth(registry) == 3

    dropped = queue.discard(lambda key: key.startswith("slot1/"))

    assert dropped == 2  # slot1/b (queued) and slot1/a's pending re-run
    assert len(queue) == 1
    assert depth(registry) == 1
    queue.done(in_flight)  # the in-flight item finishes normally, without a re-run
    assert len(queue) == 1
    assert await queue.get() == "slot2/c"
    assert queue.discard(lambda key: True) == 0


@pytest.mark.asyncio
async def test_discarded_items_can_be_added_again(queue: WorkQueue[str]) -> None:
    queue.add("a", priority=Priority.LOW)
    assert queue.discard(lambda key: key == "a") == 1
    queue.add("a")
    assert await queue.get() == "a"


def test_synchronous_methods_need_no_event_loop() -> None:
    queue: WorkQueue[tuple[str, str]] = WorkQueue("sync")
    queue.add(("ns", "a"))
    queue.add(("ns", "a"))
    queue.add_after(("ns", "b"), 0)
    assert len(queue) == 2
    assert queue.discard(lambda key: key[1] == "a") == 1
    # A real delay needs the event loop that will release the item; without one, nothing
    # is parked.
    with pytest.raises(RuntimeError):
        queue.add_after(("ns", "c"), 1.0)
    queue.shut_down()
    assert len(queue) == 1
