"""Re-reconciles: every parent pushed again at LOW priority, once when its controller starts and
then on two clocks.

- A controller that starts or changes (``controllers_changed``): once the informers of its
  parents have listed, each of its cached parents is pushed once.
- Every ``cache_flush_interval`` every parent of every controller is pushed (Metacontroller's
  ``--cache-flush-interval``); a controller's own parents also every ``resyncPeriodSeconds``.
  Both periods are jittered by +-10% so that many controllers do not resync at once.
- Nothing is pushed by the clocks before ``assigning`` is set (slots are assigned): the first
  assignment carries every parent key anyway.
- The keys of one controller are pushed ``PUSH_CHUNK`` at a time, the event loop turning
  between chunks: 100,000 pushes would hold it some 100 ms, during which no event or FETCH
  would be served.
- ``run()`` runs the clocks until cancelled; on the way out it cancels the pushes still
  waiting for informers.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Protocol

from manager.controllers.running import ControllerSet
from manager.controllers.view import ControllerId, ControllerView
from manager.informers.shared import Informers
from manager.routing.router import KeySink
from proto.runtime.clock import Clock
from proto.wire import ParentKey, Priority

PUSH_CHUNK = 1024
"""Keys pushed in one turn of the event loop (see the module docstring)."""


class ParentKeys(Protocol):
    def of_controller(self, controller: ControllerId) -> list[ParentKey]:
        """The keys of every cached parent one controller handles
        (``manager.routing.router.KeyIndex``, which the router keeps in step)."""
        ...


class ResyncPlanner:
    def __init__(
        self,
        *,
        controllers: ControllerSet,
        parents: ParentKeys,
        sink: KeySink,
        informers: Informers,
        assigning: asyncio.Event,
        clock: Clock,
        rng: random.Random,
        cache_flush_interval: float,
        tick: float = 1.0,
    ) -> None:
        self._controllers = controllers
        self._parents = parents
        self._sink = sink
        self._informers = informers
        self._assigning = assigning
        self._clock = clock
        self._rng = rng
        self._flush_interval = cache_flush_interval
        self._tick = tick
        self._tasks: set[asyncio.Task[None]] = set()

    def controllers_changed(
        self, views: Sequence[ControllerView], added: Sequence[ControllerView]
    ) -> None:
        for view in added:
            task = asyncio.ensure_future(self._enqueue_all(view))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _enqueue_all(self, view: ControllerView) -> None:
        """Once a new controller's parents are cached, push each of them once (LOW)."""
        for resource in view.parents:
            informer = self._informers.get(resource)
            if informer is None:
                return
            await informer.wait_synced()
        await self._push(self._parents.of_controller(view.id))

    async def _push(self, keys: Sequence[ParentKey]) -> None:
        push = self._sink.push
        for start in range(0, len(keys), PUSH_CHUNK):
            if start:
                await asyncio.sleep(0)
            for key in keys[start : start + PUSH_CHUNK]:
                push(key, Priority.LOW)

    def _jittered(self, period: float) -> float:
        return period * self._rng.uniform(0.9, 1.1)

    async def run(self) -> None:
        try:
            await self._clocks()
        finally:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _clocks(self) -> None:
        now = self._clock.now()
        flush_at = now + self._jittered(self._flush_interval)
        due: dict[ControllerId, float] = {}
        while True:
            await self._clock.sleep(self._tick)
            if not self._assigning.is_set():
                continue
            now = self._clock.now()
            views = self._controllers.views
            flush = now >= flush_at
            if flush:
                flush_at = now + self._jittered(self._flush_interval)
            for name in set(due) - set(views):
                del due[name]
            for name, view in list(views.items()):
                period = view.resync_period_seconds
                if period is not None and name not in due:
                    due[name] = now + self._jittered(period)
                if flush or (period is not None and now >= due[name]):
                    if period is not None:
                        due[name] = now + self._jittered(period)
                    await self._push(self._parents.of_controller(name))
