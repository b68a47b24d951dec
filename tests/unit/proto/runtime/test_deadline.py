"""``within``: a result in time, TimeoutError on the injected clock, nothing left running."""

from __future__ import annotations

import asyncio

import pytest

from proto.runtime.clock import FakeClock
from proto.runtime.deadline import within


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_returns_the_result_when_it_comes_first() -> None:
    clock = FakeClock()

    async def answer() -> int:
        await clock.sleep(1.0)
        return 42

    task = asyncio.create_task(within(clock, 2.0, answer()))
    await settle()
    clock.advance(1.0)
    assert await task == 42


@pytest.mark.asyncio
async def test_times_out_on_the_fake_clock_and_cancels_the_work() -> None:
    clock = FakeClock()
    cancelled = asyncio.Event()

    async def slow() -> int:
        try:
            await clock.sleep(10.0)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 1

    task = asyncio.create_task(within(clock, 2.0, slow()))
    await settle()
    assert not task.done()
    clock.advance(2.0)
    with pytest.raises(TimeoutError):
        await task
    assert cancelled.is_set()


@pytest.mark.asyncio
async def test_the_work_s_exception_propagates() -> None:
    async def broken() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await within(FakeClock(), 1.0, broken())


@pytest.mark.asyncio
async def test_cancelling_the_caller_cancels_the_work() -> None:
    clock = FakeClock()
    work = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(within(clock, 5.0, work))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert work.cancelled()
    assert clock.sleepers == 0
