"""Periodic re-reconciles: every parent again at LOW priority, on two clocks.

- Every ``cache_flush_interval`` every parent of every controller is pushed (Metacontroller's
  ``--cache-flush-interval``); a controller's own parents also every ``resyncPeriodSeconds``.
  Both periods are jittered by +-10% so that many controllers do not resync at once.
- Nothing is pushed before ``active()`` says so (slots are assigned): the first assignment
  carries every parent key anyway.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from manager.controllers.hosted import Controllers
from manager.controllers.view import ControllerId
from manager.routing.router import Router
from proto.runtime.clock import Clock
from proto.wire import ParentKey, Priority

Push = Callable[[ParentKey, Priority], None]


class ResyncPlanner:
    def __init__(
        self,
        *,
        controllers: Controllers,
        router: Router,
        push: Push,
        active: Callable[[], bool],
        clock: Clock,
        rng: random.Random,
        cache_flush_interval: float,
        tick: float = 1.0,
    ) -> None:
        self._controllers = controllers
        self._router = router
        self._push = push
        self._active = active
        self._clock = clock
        self._rng = rng
        self._flush_interval = cache_flush_interval
        self._tick = tick

    def _jittered(self, period: float) -> float:
        return period * self._rng.uniform(0.9, 1.1)

    async def run(self) -> None:
        now = self._clock.now()
        flush_at = now + self._jittered(self._flush_interval)
        due: dict[ControllerId, float] = {}
        while True:
            await self._clock.sleep(self._tick)
            if not self._active():
                continue
            now = self._clock.now()
            views = self._controllers.views
            flush = now >= flush_at
            if flush:
                flush_at = now + self._jittered(self._flush_interval)
            for name in set(due) - set(views):
                del due[name]
            for name, view in views.items():
                period = view.resync_period_seconds
                if period is not None and name not in due:
                    due[name] = now + self._jittered(period)
                if flush or (period is not None and now >= due[name]):
                    if period is not None:
                        due[name] = now + self._jittered(period)
                    for key in self._router.parent_keys(view):
                        self._push(key, Priority.LOW)
