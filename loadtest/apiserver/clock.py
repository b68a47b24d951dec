"""Time sources for the emulator's timers (watch deadlines, bookmarks, waits).

- ``Clock.now()`` is monotonic seconds; ``call_later`` schedules a callback on the event loop
  and returns a handle with ``cancel()``.
- ``RealClock`` is the event loop's clock. ``ManualClock`` only moves when ``advance`` is
  called, firing due callbacks in deadline order: tests steer watch timeouts, bookmark
  intervals and the future-resourceVersion wait without sleeping.
- Wall-clock timestamps in objects (creationTimestamp...) are not taken from here.
- ``ManualClock`` must be advanced from the thread running the cluster's event loop.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable: ...


class RealClock:
    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable:
        return asyncio.get_running_loop().call_later(max(delay, 0.0), callback)


class _Timer:
    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[tuple[float, int, _Timer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable:
        timer = _Timer(callback)
        heapq.heappush(self._heap, (self._now + max(delay, 0.0), next(self._seq), timer))
        return timer

    def next_deadline(self) -> float | None:
        """The earliest pending deadline, or None when nothing waits."""
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def advance(self, seconds: float) -> None:
        """Move time forward, running every callback that falls due, in order."""
        target = self._now + seconds
        while self._heap and self._heap[0][0] <= target:
            when, _, timer = heapq.heappop(self._heap)
            self._now = max(self._now, when)
            if not timer.cancelled:
                timer.callback()
        self._now = target


async def sleep(clock: Clock, seconds: float) -> None:
    """Sleep on ``clock`` (a manual clock only wakes this when advanced)."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not future.done():
            future.set_result(None)

    handle = clock.call_later(seconds, wake)
    try:
        await future
    finally:
        handle.cancel()
