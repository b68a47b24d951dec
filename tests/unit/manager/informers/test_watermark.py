"""The resourceVersion watermark: integer comparison, waiters woken in order, timeouts, close."""

from __future__ import annotations

import asyncio

import pytest

from manager.informers.watermark import Watermark, parse_resource_version
from proto.runtime.clock import FakeClock


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_resource_versions_are_plain_integers_or_nothing() -> None:
    assert parse_resource_version("123") == 123
    assert parse_resource_version("") is None
    assert parse_resource_version("12a") is None
    assert parse_resource_version("+1") is None
    assert parse_resource_version(" 1") is None
    assert parse_resource_version("١٢") is None  # non-ASCII digits


def test_the_mark_only_rises_and_ignores_what_it_cannot_compare() -> None:
    mark = Watermark(clock=FakeClock())
    assert mark.revision == -1
    for rv, expected in [("5", 5), ("3", 5), ("abc", 5), ("", 5), ("12", 12)]:
        mark.advance(rv)
        assert mark.revision == expected


@pytest.mark.asyncio
async def test_waiters_wake_when_their_revision_is_reached_and_time_out_otherwise() -> None:
    clock = FakeClock()
    mark = Watermark(clock=clock)
    mark.advance("10")
    assert await mark.wait_for("10", timeout=0)
    assert await mark.wait_for("9", timeout=0)
    assert not await mark.wait_for("11", timeout=0)
    assert not await mark.wait_for("x", timeout=60)  # cannot tell: at once
    twelve = asyncio.create_task(mark.wait_for("12", timeout=5))
    fifteen = asyncio.create_task(mark.wait_for("15", timeout=5))
    far = asyncio.create_task(mark.wait_for("1000", timeout=5))
    await settle()
    assert mark.waiting == 3
    mark.advance("13")
    await settle()
    assert twelve.done() and twelve.result() is True
    assert not fifteen.done()
    mark.advance("15")
    assert await fifteen
    clock.advance(5)
    assert not await far
    assert mark.waiting == 0  # the timed-out waiter is gone, not left in the heap


@pytest.mark.asyncio
async def test_close_answers_pending_waiters_with_false() -> None:
    mark = Watermark(clock=FakeClock())
    waiting = asyncio.create_task(mark.wait_for("7", timeout=60))
    await settle()
    mark.close()
    assert not await waiting
    assert mark.waiting == 0


@pytest.mark.asyncio
async def test_a_cancelled_waiter_leaves_nothing_behind() -> None:
    mark = Watermark(clock=FakeClock())
    waiting = asyncio.create_task(mark.wait_for("7", timeout=60))
    await settle()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert mark.waiting == 0
