"""The rate-limited layer: requeues delayed by the limiter, forget, num_requeues."""

from __future__ import annotations

import pytest

from proto.runtime.clock import FakeClock
from proto.wire import Priority
from tests.unit.workers.workqueue.conftest import Settle
from workers.workqueue import WorkQueue
from workers.workqueue.ratelimiters import ItemExponentialFailureRateLimiter


@pytest.mark.asyncio
async def test_requeues_back_off_exponentially_until_forgotten(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle
) -> None:
    for failures, delay in enumerate([0.005, 0.010, 0.020, 0.040]):
        assert queue.num_requeues("a") == failures
        queue.add_rate_limited("a")
        clock.advance(delay / 2)
        await settle()
        assert len(queue) == 0
        clock.advance(delay / 2)
        await settle()
        assert len(queue) == 1
        assert await queue.get() == "a"
        queue.done("a")
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    queue.add_rate_limited("a")
    clock.advance(0.005)
    await settle()
    assert len(queue) == 1


@pytest.mark.asyncio
async def test_the_default_limiter_runs_on_the_queue_clock(
    queue: WorkQueue[str], clock: FakeClock, settle: Settle
) -> None:
    # 100 distinct items use up the shared bucket; the 101st waits for a token (0.1 s).
    for i in range(101):
        queue.add_rate_limited(f"item-{i}")
    clock.advance(0.005)
    await settle()
    assert len(queue) == 100
    clock.advance(0.095)
    await settle()
    assert len(queue) == 101


@pytest.mark.asyncio
async def test_a_requeue_keeps_the_priority_it_is_given(clock: FakeClock, settle: Settle) -> None:
    queue: WorkQueue[str] = WorkQueue(
        "prio", clock=clock, rate_limiter=ItemExponentialFailureRateLimiter(base_delay=1.0)
    )
    queue.add_rate_limited("resync", priority=Priority.LOW)
    queue.add_rate_limited("change")
    clock.advance(1.0)
    await settle()
    assert [await queue.get() for _ in range(2)] == ["change", "resync"]
    queue.shut_down()


@pytest.mark.asyncio
async def test_discard_forgets_the_failures_of_dropped_items(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_rate_limited("slot1/a")
    queue.add_rate_limited("slot2/b")
    assert queue.discard(lambda key: key.startswith("slot1/")) == 1
    assert queue.num_requeues("slot1/a") == 0
    assert queue.num_requeues("slot2/b") == 1
