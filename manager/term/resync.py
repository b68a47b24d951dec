"""Re-reconciles: every parent pushed again at LOW priority, once when its controller starts and
then on two clocks; at LIVE priority when its controller object asks for it.

- A controller that starts or changes (``controllers_changed``): once the informers of its
  parents have listed, each of its cached parents is pushed once, at LOW: a new hook URL, a
  rotated hook Secret (a new view too: ``manager.controllers.hosted``) or any other edit of
  the controller object re-queues its parents behind live work.
- A controller object whose ``metashard.io/sync-requested-at`` changed (``metashard sync
  --controller``), or whose ``metashard.io/paused`` went from ``"true"`` to anything else,
  has its parents pushed at LIVE instead: someone waits for them
  (``proto.api.interventions``). A paused controller's parents are not pushed at all, by a
  change or by the clocks: its workers would skip them (``workers.sync.template``); live
  events still reach them, so a parent being deleted is finalized.
- Every ``cache_flush_interval`` every parent of every controller is pushed (Metacontroller's
  ``--cache-flush-interval``); a controller's own parents also every ``resyncPeriodSeconds``.
  Both periods are jittered by +-10% so that many controllers do not resync at once.
- Nothing is pushed by the clocks before ``assigning`` is set (slots are assigned): every
  parent key is queued with the first assignment anyway.
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
from dataclasses import dataclass
from typing import Protocol

import orjson

from manager.controllers.running import ControllerSet
from manager.controllers.view import ControllerId, ControllerView
from manager.informers.shared import Informers
from manager.routing.router import KeySink
from proto.api.interventions import annotations_of, pause_of, sync_requested
from proto.runtime.clock import Clock
from proto.wire import ParentKey, Priority

PUSH_CHUNK = 1024
"""Keys pushed in one turn of the event loop (see the module docstring)."""


class ParentKeys(Protocol):
    def of_controller(self, controller: ControllerId) -> list[ParentKey]:
        """The keys of every cached parent one controller handles
        (``manager.routing.router.KeyIndex``, which the router keeps in step)."""
        ...


@dataclass(frozen=True, slots=True)
class Asked:
    """What a controller object's annotations ask of its parents' syncs."""

    paused: bool
    requested: str | None

    @classmethod
    def of(cls, view: ControllerView) -> Asked:
        annotations = annotations_of(orjson.loads(view.raw))
        return cls(pause_of(annotations).paused, sync_requested(annotations))

    def priority_after(self, before: Asked | None) -> Priority | None:
        """The priority of a push of the parents of a controller that changed from
        ``before`` (None: it starts) to this; None: no push (paused)."""
        if self.paused:
            return None
        if before is not None and (before.paused or before.requested != self.requested):
            return Priority.LIVE
        return Priority.LOW


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
        self._asked: dict[ControllerId, Asked] = {}

    def controllers_changed(
        self, views: Sequence[ControllerView], added: Sequence[ControllerView]
    ) -> None:
        asked = {v.id: self._asked[v.id] for v in views if v.id in self._asked}
        for view in added:
            now = asked[view.id] = Asked.of(view)
            priority = now.priority_after(self._asked.get(view.id))
            if priority is None:
                continue
            task = asyncio.ensure_future(self._enqueue_all(view, priority))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._asked = asked

    async def _enqueue_all(self, view: ControllerView, priority: Priority) -> None:
        """Once a new or changed controller's parents are cached, push each of them once."""
        for resource in view.parents:
            informer = self._informers.get(resource)
            if informer is None:
                return
            await informer.wait_synced()
        await self._push(self._parents.of_controller(view.id), priority)

    async def _push(self, keys: Sequence[ParentKey], priority: Priority = Priority.LOW) -> None:
        push = self._sink.push
        for start in range(0, len(keys), PUSH_CHUNK):
            if start:
                await asyncio.sleep(0)
            for key in keys[start : start + PUSH_CHUNK]:
                push(key, priority)

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
                asked = self._asked.get(name)
                if asked is not None and asked.paused:
                    continue
                period = view.resync_period_seconds
                if period is not None and name not in due:
                    due[name] = now + self._jittered(period)
                if flush or (period is not None and now >= due[name]):
                    if period is not None:
                        due[name] = now + self._jittered(period)
                    await self._push(self._parents.of_controller(name))
