"""The delaying layer: ``add_after(item, seconds)`` (client-go ``delaying_queue.go``).

Invariants:

- ``add_after`` with a delay of zero or less is a plain ``add``. A positive delay parks the
  item in a *waiting* heap keyed by ready time; when the clock reaches that time the item is
  added with the priority it was parked with.
- An item waits at most once: parking it again keeps the **earlier** ready time and the
  more urgent priority of the two. Waiting does not make an item dirty: a plain ``add`` meanwhile
  queues it at once, and the later release is then deduplicated as usual.
- Every ``add_after`` call counts one retry in the metrics, whatever its delay (client-go).
- One background task per queue releases due items. It sleeps on the injected clock until
  the earliest ready time, wakes early when an earlier item arrives, and waits without a
  timeout when nothing is parked: it never polls. It starts with the first positive delay,
  so a queue that never delays needs no running event loop for its synchronous methods.
- Shutting down stops the task and drops every parked item. ``discard`` drops
  matching parked items too.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections.abc import Callable, Hashable
from typing import TypeVar

from proto.runtime.clock import Clock
from proto.wire import Priority
from workers.workqueue.errors import InvalidDelay
from workers.workqueue.metrics import MetricsProvider
from workers.workqueue.queue import Queue

T = TypeVar("T", bound=Hashable)


class DelayingQueue(Queue[T]):
    """A ``Queue`` whose items can be added after a delay (see module docstring)."""

    __slots__ = ("_parked", "_releaser", "_seq", "_waiting", "_wake", "_wake_at")

    def __init__(
        self, name: str, *, clock: Clock | None = None, metrics: MetricsProvider | None = None
    ) -> None:
        super().__init__(name, clock=clock, metrics=metrics)
        # Heap of (ready_at, seq, item); an entry is current only while _parked[item] holds
        # the same seq. Superseded entries are skipped when they reach the top.
        self._waiting: list[tuple[float, int, T]] = []
        self._parked: dict[T, tuple[float, int, Priority]] = {}
        self._seq = itertools.count()
        self._releaser: asyncio.Task[None] | None = None
        # The releaser's pending wake-up and the time it will wake at unprompted.
        self._wake: asyncio.Future[None] | None = None
        self._wake_at = math.inf

    def add_after(self, item: T, seconds: float, *, priority: Priority = Priority.LIVE) -> None:
        """Add ``item`` once ``seconds`` have passed (at once if ``seconds <= 0``).

        Raises ``InvalidDelay`` for a NaN or infinite delay. A positive delay must be
        requested from within the queue's event loop.
        """
        if not math.isfinite(seconds):
            raise InvalidDelay(seconds)
        self._line(priority)
        if self._shutting_down:
            return
        if seconds > 0 and self._releaser is None:  # first: no event loop, no change
            self._releaser = asyncio.get_running_loop().create_task(
                self._release_forever(), name=f"workqueue {self._name} delays"
            )
        self._metrics.retry()
        if seconds <= 0:
            self.add(item, priority=priority)
            return
        ready_at = self._clock.now() + seconds
        parked = self._parked.get(item)
        if parked is not None:
            parked_at, parked_seq, parked_priority = parked
            if parked_at <= ready_at:
                if priority < parked_priority:
                    self._parked[item] = (parked_at, parked_seq, priority)
                return
            priority = min(priority, parked_priority)
        seq = next(self._seq)
        self._parked[item] = (ready_at, seq, priority)
        heapq.heappush(self._waiting, (ready_at, seq, item))
        if ready_at < self._wake_at and self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _release_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = self._clock.now()
            self._release_due(now)
            self._wake = wake = loop.create_future()
            if not self._waiting:
                self._wake_at = math.inf
                await wake
                continue
            self._wake_at = self._waiting[0][0]
            sleeper = loop.create_task(self._sleep_until(self._wake_at))
            try:
                await asyncio.wait((sleeper, wake), return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()

    async def _sleep_until(self, deadline: float) -> None:
        # Read the clock when the sleep starts, not when it was scheduled: time may move
        # in between (a fake clock in particular).
        await self._clock.sleep(deadline - self._clock.now())

    def _release_due(self, now: float) -> None:
        waiting = self._waiting
        while waiting and waiting[0][0] <= now:
            _, seq, item = heapq.heappop(waiting)
            parked = self._parked.get(item)
            if parked is not None and parked[1] == seq:
                del self._parked[item]
                self.add(item, priority=parked[2])

    def _discard(self, predicate: Callable[[T], bool]) -> set[T]:
        removed = super()._discard(predicate)
        doomed = [item for item in self._parked if predicate(item)]
        if doomed:
            for item in doomed:
                del self._parked[item]
            self._waiting = [
                entry
                for entry in self._waiting
                if (parked := self._parked.get(entry[2])) is not None and parked[1] == entry[1]
            ]
            heapq.heapify(self._waiting)
            removed.update(doomed)
        return removed

    def _stop_intake(self) -> None:
        super()._stop_intake()
        if self._releaser is not None:
            self._releaser.cancel()
        self._waiting.clear()
        self._parked.clear()
