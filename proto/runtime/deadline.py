"""Bounding an awaitable by a duration measured on an injected ``Clock``.

``asyncio.timeout`` measures on the event loop's clock, which a test cannot step; ``within``
races the awaitable against ``clock.sleep`` instead, so the same code runs on the real clock
in production and on a fake one in tests.

- The awaitable's result (or exception) is returned (raised) when it finishes first.
- Otherwise it is cancelled, its cancellation awaited, and ``TimeoutError`` raised.
- Cancelling the caller cancels the awaitable too; nothing is left running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from proto.runtime.clock import Clock

T = TypeVar("T")


async def within(clock: Clock, seconds: float, awaitable: Awaitable[T]) -> T:
    """``await awaitable``, but for at most ``seconds`` on ``clock``."""
    work = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((work, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not work.done():
            work.cancel()
            await asyncio.wait((work,))
    if work.cancelled() and timer.done() and not timer.cancelled():
        raise TimeoutError(f"no result within {seconds} s")
    return work.result()
