"""The work queue core: client-go's queue (``util/workqueue/queue.go``) with two priorities
(``proto.wire.Priority``, the priority KEYS messages carry: lower goes first).

Invariants:

- **Stingy.** An item is *dirty* from the add that queues it until the get that hands it
  out. Adding a dirty item again changes nothing but, possibly, its priority: an item queued
  many times before it is taken is handed out once.
- **One consumer per item.** From ``get()`` until ``done(item)`` the item is *processing*
  and is never handed out again. An item added while processing stays dirty and is queued
  again by ``done``, so the change that arrived meanwhile is processed once more.
- **Fair within a priority.** Items of one priority are handed out in the order they were
  queued (``done`` re-queues at the back).
- **Live before low.** ``Priority.LIVE`` items (changes seen on a watch) are handed out before
  any ``Priority.LOW`` item (initial list, resync), so a resync flood cannot starve real
  changes (Metacontroller issue #78). A dirty item's priority is the most urgent it was added
  with since it was last taken; a LOW item that gets a LIVE add is *promoted*: it moves to the
  back of the LIVE line.
- **Shutdown stops intake, not output** (as client-go's): after ``shut_down()`` adds are
  ignored, ``get()`` keeps handing out what is already queued and raises ``ShutDown`` once
  nothing is; ``done`` still re-queues items that were dirty. To abandon queued work instead,
  ``discard`` it first.
- ``discard(predicate)`` drops dirty items (queued or waiting for a re-run) without handing
  them out; items being processed finish normally and are not re-run.
- ``len(queue)`` counts items ready to be handed out (not those processing, nor their
  pending re-runs); ``item in queue``: ``item`` is dirty.
- Waiting ``get()`` calls are served first come, first served. The queue belongs to one event
  loop and is not thread-safe; ``add`` and ``done`` never block.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.wire import Priority
from workers.workqueue.errors import InvalidPriority, NotProcessing, ShutDown
from workers.workqueue.metrics import MetricsProvider, NoMetricsProvider

T = TypeVar("T", bound=Hashable)


class Queue(Generic[T]):
    """Fair, stingy, one-consumer-per-item queue with two priorities (see module docstring)."""

    __slots__ = (
        "_clock",
        "_dirty",
        "_getters",
        "_lines",
        "_metrics",
        "_name",
        "_order",
        "_processing",
        "_shutting_down",
    )

    def __init__(
        self, name: str, *, clock: Clock | None = None, metrics: MetricsProvider | None = None
    ) -> None:
        self._name = name
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        provider = metrics if metrics is not None else NoMetricsProvider()
        self._metrics = provider.queue_metrics(name, clock=self._clock)
        # Dirty items and their priority: queued, or processing with a re-run pending.
        self._dirty: dict[T, Priority] = {}
        self._processing: set[T] = set()
        # One FIFO line per priority (ordered dicts: O(1) append, pop-first and removal).
        self._lines: dict[Priority, collections.OrderedDict[T, None]] = {
            priority: collections.OrderedDict() for priority in Priority
        }
        self._order = tuple(self._lines[p] for p in sorted(Priority))  # most urgent first
        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._shutting_down = False

    @property
    def name(self) -> str:
        return self._name

    def __len__(self) -> int:
        return sum(len(line) for line in self._order)

    def __contains__(self, item: object) -> bool:
        return item in self._dirty

    def add(self, item: T, *, priority: Priority = Priority.LIVE) -> None:
        """Mark ``item`` as needing processing (ignored once shutting down)."""
        line = self._line(priority)
        if self._shutting_down:
            return
        queued_as = self._dirty.get(item)
        if queued_as is None:
            self._dirty[item] = priority
            self._metrics.add(item)
            if item not in self._processing:
                line[item] = None
                if self._getters:
                    self._wake_getter()
        elif priority < queued_as:  # more urgent: promoted
            self._dirty[item] = priority
            if item not in self._processing:
                del self._lines[queued_as][item]
                line[item] = None

    async def get(self) -> T:
        """The next item to process; the caller must call ``done(item)`` after processing.

        Waits while nothing is queued. Raises ``ShutDown`` when the queue is shut down and
        nothing is queued.
        """
        while True:
            for line in self._order:
                if line:
                    item = line.popitem(last=False)[0]
                    del self._dirty[item]
                    self._processing.add(item)
                    self._metrics.get(item)
                    return item
            if self._shutting_down:
                raise ShutDown(f"work queue {self._name!r} is shut down")
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # A wake-up this getter received but cannot use goes to the next one.
                waiter.cancel()
                if waiter in self._getters:
                    self._getters.remove(waiter)
                if not waiter.cancelled():
                    self._wake_getter()
                raise

    def done(self, item: T) -> None:
        """Processing of ``item`` finished; re-queue it if it was added meanwhile.

        Raises ``NotProcessing`` if ``item`` was not handed out by ``get()``.
        """
        try:
            self._processing.remove(item)
        except KeyError:
            raise NotProcessing(item) from None
        self._metrics.done(item)
        priority = self._dirty.get(item)
        if priority is not None:
            self._lines[priority][item] = None
            if self._getters:
                self._wake_getter()

    def discard(self, predicate: Callable[[T], bool]) -> int:
        """Drop every dirty item matching ``predicate``; how many were dropped.

        Items being processed are left alone (they finish normally), but their pending
        re-run, if any, is dropped.
        """
        return len(self._discard(predicate))

    def shut_down(self) -> None:
        """Ignore further adds; ``get()`` raises ``ShutDown`` once nothing is queued."""
        self._stop_intake()

    def update_unfinished_work(self) -> None:
        """Refresh the gauges about items in progress; the owner calls it periodically."""
        self._metrics.update_unfinished_work()

    # -- for the layers above ------------------------------------------------------------

    def _line(self, priority: Priority) -> collections.OrderedDict[T, None]:
        try:
            return self._lines[priority]
        except (KeyError, TypeError):
            raise InvalidPriority(priority) from None

    def _discard(self, predicate: Callable[[T], bool]) -> set[T]:
        doomed = {item for item in self._dirty if predicate(item)}
        for item in doomed:
            priority = self._dirty.pop(item)
            if item not in self._processing:
                del self._lines[priority][item]
            self._metrics.discard(item)
        return doomed

    def _stop_intake(self) -> None:
        self._shutting_down = True
        getters, self._getters = self._getters, collections.deque()
        for waiter in getters:
            if not waiter.done():
                waiter.set_result(None)

    def _wake_getter(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
