"""The shared clock: the system clock, and a fake one that wakes sleepers in deadline order."""

from __future__ import annotations

import asyncio
import math

import pytest

from proto.runtime.clock import Clock, FakeClock, SystemClock


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_system_clock_is_monotonic_and_sleeps() -> None:
    clock: Clock = SystemClock()
    before = clock.now()
    await clock.sleep(0.01)
    await clock.sleep(-1.0)  # a negative duration only yields
    elapsed = clock.now() - before
    assert 0.005 <= elapsed < 5.0


@pytest.mark.asyncio
async def test_fake_clock_stands_still_until_advanced() -> None:
    clock = FakeClock(start=50.0)
    assert clock.now() == 50.0
    await clock.sleep(0)  # no duration: returns without time passing
    clock.advance(2.5)
    assert clock.now() == 52.5


@pytest.mark.asyncio
async def test_fake_clock_wakes_due_sleepers_in_deadline_order() -> None:
    clock = FakeClock()
    woken: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woken.append(name)

    tasks = [
        asyncio.create_task(sleeper(name, seconds))
        for name, seconds in [("c", 3.0), ("a", 1.0), ("b", 2.0), ("b2", 2.0), ("d", 10.0)]
    ]
    await settle()
    assert clock.sleepers == 5
    clock.advance(0.999)
    await settle()
    assert woken == []
    clock.advance(2.001)
    await settle()
    assert woken == ["a", "b", "b2", "c"]  # deadline order, ties first come first
    assert clock.sleepers == 1
    clock.advance(7.0)
    await asyncio.gather(*tasks)
    assert woken[-1] == "d"
    assert clock.sleepers == 0


@pytest.mark.asyncio
async def test_a_cancelled_sleeper_is_no_longer_counted() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(1.0))
    await settle()
    assert clock.sleepers == 1
    task.cancel()
    await settle()
    assert clock.sleepers == 0
    clock.advance(5.0)  # waking a cancelled sleeper is harmless
    assert task.cancelled()


@pytest.mark.parametrize("step", [-1.0, math.nan, math.inf])
def test_fake_clock_only_moves_forward_by_finite_steps(step: float) -> None:
    clock = FakeClock()
    with pytest.raises(ValueError):
        clock.advance(step)
    assert clock.now() == 0.0
