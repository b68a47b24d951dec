"""Time as a dependency: a monotonic clock that can also sleep, real or fake.

Everything in metashard that waits or measures (workqueue delays, rate limiters, heartbeats,
lease renewals, metrics) takes a ``Clock`` instead of calling ``time`` or ``asyncio.sleep``
itself, so tests step a ``FakeClock`` instead of sleeping.

- ``now()`` is monotonic seconds: only differences between two readings mean anything.
- ``sleep(seconds)`` returns once ``now()`` has advanced by at least ``seconds``; a zero or
  negative duration only yields to the event loop. Cancelling the sleeping task cancels it.
- ``SystemClock`` reads ``time.monotonic()``, the same clock asyncio's event loop schedules by.
- ``FakeClock`` stands still until ``advance(seconds)`` moves it; ``advance`` wakes every
  sleeper whose deadline has been reached, earliest deadline first. Woken tasks run the next
  time the caller yields to the event loop (``advance`` itself is synchronous).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from typing import Protocol


class Clock(Protocol):
    """A monotonic time source that can suspend the calling task."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task until ``now()`` has advanced by ``seconds``."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic()`` and ``asyncio.sleep``."""

    __slots__ = ()

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


SYSTEM_CLOCK = SystemClock()
"""The process-wide real clock, the default wherever a ``clock`` parameter is optional."""


class FakeClock:
    """A clock that moves only when told to; for tests.

    ``sleep`` must be awaited inside a running event loop. ``advance`` may be called from
    any code on that loop's thread, synchronous or not.
    """

    __slots__ = ("_now", "_seq", "_sleepers")

    def __init__(self, *, start: float = 0.0) -> None:
        self._now = start
        self._seq = itertools.count()
        # (deadline, arrival order, future): the order breaks deadline ties first come first.
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        wakeup: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), wakeup))
        await wakeup

    def advance(self, seconds: float) -> None:
        """Move time forward and wake, in deadline order, the sleepers now due.

        Raises ``ValueError`` for a negative or non-finite step: a monotonic clock cannot go
        back, and an infinite step would leave nothing meaningful to read.
        """
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"a clock advances by a finite, non-negative step, not {seconds!r}")
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            wakeup = heapq.heappop(self._sleepers)[2]
            if not wakeup.done():
                wakeup.set_result(None)

    @property
    def sleepers(self) -> int:
        """How many tasks are sleeping on this clock right now."""
        return sum(1 for _, _, wakeup in self._sleepers if not wakeup.done())
