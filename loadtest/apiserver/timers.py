"""Callbacks after a delay, on the project's clock (``proto.runtime.clock``: real or fake).

The server's timers (watch deadlines and bookmarks, the namespace controller's grace period,
compaction) all go through ``call_later``, so a test that hands the cluster a ``FakeClock``
fires them by advancing it. The returned task is the handle: ``cancel()`` drops the timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from proto.runtime.clock import Clock


def call_later(clock: Clock, delay: float, callback: Callable[[], None]) -> asyncio.Task[None]:
    async def fire() -> None:
        await clock.sleep(delay)
        callback()

    return asyncio.get_running_loop().create_task(fire())
