"""One leadership term of the coordinator: from binding the socket to saying BYE.

While the term runs, this process is the only coordinator (the Lease says so, or there is no
election):
- It binds the ROUTER, starts the controller registry (which starts the informers), and
  routes every informer event to parent keys, pushed as KEYS to the owner of each key's slot
  (batched per event-loop turn, dropped while the slot is in transit: ASSIGN carries them).
- It accepts workers (HELLO -> WELCOME), answers everything a worker that is not a member
  sends with NACK(STALE_EPOCH) so it joins again, tracks heartbeats, and moves slots
  (``manager.membership``). Nothing is assigned before the caches have synced and
  ``grace`` has passed since the term began (workers of a previous term have fenced by then).
  The first assignment carries every parent key: each parent is reconciled once per term.
- It answers FETCH with a SNAPSHOT from the caches, only to the slot's owner and only once the
  caches have seen the worker's own writes named in the FETCH barrier and, for controllers
  with a customize hook, once the parent's related objects are known (``manager.related``),
  waiting at most ``barrier_timeout`` (then NOT_READY if the related objects are still not).
  While such a snapshot waits, changes of its key are not pushed: the snapshot, taken after
  them, already reflects them (this saves a redundant reconcile after every write).
- A message that cannot be delivered to a worker ends its membership (it fences itself and
  joins again): no key notification is silently lost to a live member.
- When the term ends (cancelled), every worker gets BYE before the socket closes, so they
  stop at once instead of waiting for their fence timeout.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import defaultdict
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter

from manager.controllers import Controllers
from manager.finalizers import FinalizerWriter
from manager.informers import Informers
from manager.link import RouterLink, SendResult
from manager.membership import Membership, Timing
from manager.related import Related
from manager.routing import Router
from manager.snapshots import parent_of, revisions_of, snapshot_of
from manager.store import Store
from manager.term_metrics import TermMetrics
from manager.views import ControllerId, ControllerView, group_resource
from manager.watermark import parse_resource_version
from proto.api.selectors import Selector
from proto.clock import SYSTEM_CLOCK, Clock
from proto.hooks.client import HookClient
from proto.kube.events import EventRecorder
from proto.kube.resources import Discovery, Resource
from proto.logs import get_logger
from proto.wire import (
    Bye,
    Fetch,
    Heartbeat,
    Hello,
    Keys,
    Message,
    Nack,
    NackReason,
    ParentKey,
    Priority,
    Released,
    Revoke,
    Snapshot,
    slot_of,
)
from proto.wire import (
    Controllers as ControllersMsg,
)

log = get_logger("metashard.coordinator")

TICK = 0.1  # seconds between membership ticks
KEYS_BATCH = 512


@dataclass(frozen=True, slots=True)
class TermSettings:
    bind: str  # ZeroMQ endpoint to bind, e.g. tcp://0.0.0.0:7070
    timing: Timing = Timing()  # noqa: RUF009 - frozen, never mutated
    grace: float = 4.0  # seconds from the start of the term before the first assignment
    barrier_timeout: float = 5.0
    retry_interval: float = 30.0  # retry of controllers that could not start
    cache_flush_interval: float = 1800.0  # every parent is pushed again (LOW) this often
    selector: Selector = Selector.everything()  # noqa: RUF009 - the controllers to run


class Term:
    def __init__(
        self,
        *,
        epoch: int,
        coordinator_id: str,
        settings: TermSettings,
        discovery: Discovery,
        informers: Informers,
        recorder: EventRecorder,
        hooks: HookClient,
        writer: FinalizerWriter | None = None,
        metrics: TermMetrics | None = None,
        dropped_frames: Counter | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self.epoch = epoch
        self.settings = settings
        self._informers = informers
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._metrics = metrics if metrics is not None else TermMetrics(None)
        self.link = RouterLink(dropped=dropped_frames)
        self.endpoint = ""
        self.related = Related(
            hooks=hooks,
            discovery=discovery,
            informers=informers,
            recorder=recorder,
            push=self._push,
            clock=clock,
        )
        self.router = Router(
            push=self._push, stores=self._store, on_parent=self.related.parent_changed
        )
        self.controllers = Controllers(
            discovery=discovery,
            informers=informers,
            recorder=recorder,
            handler=self.router.handler,
            on_change=self._controllers_changed,
            writer=writer,
            selector=settings.selector,
            clock=clock,
            retry_interval=settings.retry_interval,
        )
        self.membership = Membership(
            epoch=epoch,
            coordinator_id=coordinator_id,
            keys_of=self.router.keys_of,
            controllers=lambda: tuple(v.definition for v in self.controllers.views.values()),
            start_at=math.inf,
            timing=settings.timing,
        )
        self._outbox: asyncio.Queue[tuple[str, Message]] = asyncio.Queue()
        self._pending_keys: dict[str, dict[Priority, list[ParentKey]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self._flush_scheduled = False
        self._nacked: dict[str, float] = {}
        self._parked: dict[ParentKey, int] = {}  # keys whose snapshot waits for the cache
        self._tasks: set[asyncio.Task[None]] = set()
        self.assigning = asyncio.Event()

    # --- lifecycle ----------------------------------------------------------------------------

    async def run(self) -> None:
        self.endpoint = self.link.bind(self.settings.bind)
        started = self._clock.now()
        log.info("leading", epoch=self.epoch, endpoint=self.endpoint)
        tasks = [
            asyncio.create_task(self.controllers.run(), name="controllers"),
            asyncio.create_task(self._receive(), name="receive"),
            asyncio.create_task(self._send(), name="send"),
            asyncio.create_task(self._tick(started), name="tick"),
            asyncio.create_task(self._resync(), name="resync"),
            asyncio.create_task(self.related.run(), name="related"),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # a task only ends on its own by failing: re-raise it
        finally:
            for task in [*tasks, *self._tasks]:
                task.cancel()
            await asyncio.gather(*tasks, *self._tasks, return_exceptions=True)
            await self._goodbye()
            self.link.close()
            log.info("stopped leading", epoch=self.epoch)

    async def _goodbye(self) -> None:
        for worker in list(self.membership.workers):
            await self.link.send(worker.encode(), Bye(f"coordinator term {self.epoch} ended"))

    # --- routing and dispatch -----------------------------------------------------------------

    def _store(self, resource: Resource) -> Store | None:
        informer = self._informers.get(resource)
        return informer.store if informer is not None else None

    def _push(self, key: ParentKey, priority: Priority) -> None:
        if key in self._parked:
            return  # a snapshot of it is about to be taken: it will reflect this change
        worker = self.membership.dispatch_target(slot_of(key))
        if worker is None:
            return
        self._pending_keys[worker][priority].append(key)
        self._metrics.keys_pushed(priority)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        pending, self._pending_keys = self._pending_keys, defaultdict(lambda: defaultdict(list))
        for worker, by_priority in pending.items():
            for priority, keys in sorted(by_priority.items()):
                unique = list(dict.fromkeys(keys))
                for i in range(0, len(unique), KEYS_BATCH):
                    batch = tuple(unique[i : i + KEYS_BATCH])
                    self._outbox.put_nowait((worker, Keys(self.epoch, priority, batch)))

    async def _controllers_changed(
        self, views: dict[ControllerId, ControllerView], added: set[ControllerId]
    ) -> None:
        self.related.set_controllers(views.values())
        self.router.set_controllers(views.values())
        definitions = tuple(v.definition for v in views.values())
        for worker in self.membership.workers:
            self._outbox.put_nowait((worker, ControllersMsg(self.epoch, definitions)))
        for name in added:
            self._spawn(self._enqueue_all(views[name]))

    async def _enqueue_all(self, view: ControllerView) -> None:
        """Once a new controller's parents are cached, push each of them once (LOW)."""
        for resource in view.parents:
            informer = self._informers.get(resource)
            if informer is None:
                return
            await informer.wait_synced()
        for key in self.router.parent_keys(view):
            self._push(key, Priority.LOW)

    # --- workers ------------------------------------------------------------------------------

    async def _send(self) -> None:
        while True:
            worker, msg = await self._outbox.get()
            if worker not in self.membership.workers and not isinstance(msg, (Nack, Bye)):
                continue
            result = await self.link.send(worker.encode(), msg)
            if result is SendResult.SENT:
                continue
            if result is SendResult.TOO_LARGE and isinstance(msg, Snapshot):
                detail = "the snapshot exceeds the frame size limit"
                reply = Nack(self.epoch, msg.request_id, NackReason.TOO_LARGE, detail)
                self._outbox.put_nowait((worker, reply))
                continue
            if self.membership.knows(worker):
                log.warning(
                    "message not delivered: dropping the worker",
                    worker=worker,
                    message=type(msg).__name__,
                    result=result.value,
                )
                self._emit(self.membership.lost(worker, self._clock.now()))

    def _emit(self, out: list[tuple[str, Message]]) -> None:
        for item in out:
            if isinstance(item[1], Revoke):
                self._metrics.revoked(len(item[1].slots))
            self._outbox.put_nowait(item)

    async def _receive(self) -> None:
        async for raw_id, msg in self.link:
            worker = raw_id.decode("utf-8", "replace")
            now = self._clock.now()
            if isinstance(msg, Hello):
                self._emit(self.membership.hello(worker, msg.incarnation, msg.concurrency, now))
                log.info("worker joined", worker=worker, pid=msg.pid, concurrency=msg.concurrency)
                continue
            if not self.membership.knows(worker):
                self._not_a_member(worker, msg, now)
                continue
            if isinstance(msg, Heartbeat):
                self.membership.seen(
                    worker, now, in_flight=msg.in_flight, queue_depth=msg.queue_depth
                )
                continue
            self.membership.seen(worker, now)
            if isinstance(msg, Fetch):
                self._fetch(worker, msg)
            elif isinstance(msg, Released):
                self._emit(self.membership.released(worker, msg.slots, now))
            elif isinstance(msg, Bye):
                log.info("worker left", worker=worker, reason=msg.reason)
                self._emit(self.membership.leave(worker, now))

    def _not_a_member(self, worker: str, msg: Message, now: float) -> None:
        if isinstance(msg, Bye):
            return
        if isinstance(msg, Fetch):
            reply = Nack(self.epoch, msg.request_id, NackReason.STALE_EPOCH, "not a member")
            self._outbox.put_nowait((worker, reply))
        if now - self._nacked.get(worker, -math.inf) >= 1.0:
            self._nacked[worker] = now
            self._outbox.put_nowait(
                (worker, Nack(self.epoch, 0, NackReason.STALE_EPOCH, "unknown worker: join"))
            )

    async def _tick(self, started: float) -> None:
        next_heartbeat = started
        while True:
            now = self._clock.now()
            membership = self.membership
            if (
                membership.start_at == math.inf
                and now - started >= self.settings.grace
                and self.controllers.loaded
                and self._informers.synced
            ):
                membership.start_at = now
                self.assigning.set()
                log.info(
                    "assigning slots", workers=len(membership.workers), keys=self.router.all_keys()
                )
            self._emit(membership.tick(now))
            if now >= next_heartbeat:
                next_heartbeat = now + self.settings.timing.heartbeat_interval
                for worker in membership.workers:
                    self._outbox.put_nowait((worker, Heartbeat(self.epoch)))
                self._metrics.slots(membership.owned_counts())
            self._metrics.workers(len(membership.workers))
            await self._clock.sleep(TICK)

    def _jittered(self, period: float) -> float:
        return period * self._rng.uniform(0.9, 1.1)

    async def _resync(self) -> None:
        """Push every parent again at LOW priority: all of them every cache flush interval,
        a controller's own every ``resyncPeriodSeconds``; both jittered by +-10%."""
        now = self._clock.now()
        flush_at = now + self._jittered(self.settings.cache_flush_interval)
        due: dict[ControllerId, float] = {}
        while True:
            await self._clock.sleep(1.0)
            if not self.assigning.is_set():
                continue
            now = self._clock.now()
            views = self.controllers.views
            flush = now >= flush_at
            if flush:
                flush_at = now + self._jittered(self.settings.cache_flush_interval)
            for name in set(due) - set(views):
                del due[name]
            for name, view in views.items():
                period = view.resync_period_seconds
                if period is not None and name not in due:
                    due[name] = now + self._jittered(period)
                if flush or (period is not None and now >= due[name]):
                    if period is not None:
                        due[name] = now + self._jittered(period)
                    for key in self.router.parent_keys(view):
                        self._push(key, Priority.LOW)

    # --- snapshots ----------------------------------------------------------------------------

    def _fetch(self, worker: str, msg: Fetch) -> None:
        def refuse(reason: NackReason, detail: str) -> None:
            self._metrics.fetch(reason.value)
            self._outbox.put_nowait((worker, Nack(self.epoch, msg.request_id, reason, detail)))

        key = msg.key
        if msg.epoch != self.epoch:
            return refuse(NackReason.STALE_EPOCH, f"current epoch is {self.epoch}")
        if self.membership.owner(slot_of(key)) != worker:
            return refuse(NackReason.NOT_OWNER, "the key's slot is not yours")
        view = self.controllers.views.get((key.kind, key.controller))
        if view is None:
            return refuse(NackReason.UNKNOWN_CONTROLLER, f"no {key.kind} {key.controller}")
        resource = view.parent_resource(key)
        if resource is None:
            return refuse(NackReason.UNKNOWN_KEY, f"{key.resource} is not this controller's parent")
        waits = self._barrier_waits(view, msg.barrier)
        parent = parent_of(view, key, self._store)
        if (
            parent is not None
            and Related.applies(view)
            and not self.related.ready(view, resource, parent)
        ):
            waits.append(
                asyncio.ensure_future(
                    self.related.wait_ready(view, resource, parent, self.settings.barrier_timeout)
                )
            )
        if waits:
            self._spawn(self._answer_later(worker, msg, view, waits))
        else:
            self._answer(worker, msg, view)
        return None

    def _barrier_waits(
        self, view: ControllerView, barrier: Mapping[str, str]
    ) -> list[asyncio.Future[bool]]:
        waits: list[asyncio.Future[bool]] = []
        for resource in (*view.parents, *view.children):
            wanted = barrier.get(group_resource(resource))
            if wanted is None:
                continue
            informer = self._informers.get(resource)
            if informer is None:
                continue
            have = parse_resource_version(informer.last_resource_version)
            need = parse_resource_version(wanted)
            if have is None or need is None or have >= need:
                continue
            waits.append(
                asyncio.ensure_future(informer.wait_for(wanted, self.settings.barrier_timeout))
            )
        return waits

    async def _answer_later(
        self, worker: str, msg: Fetch, view: ControllerView, waits: list[asyncio.Future[bool]]
    ) -> None:
        key = msg.key
        self._parked[key] = self._parked.get(key, 0) + 1
        try:
            results = await asyncio.gather(*waits)
        finally:
            left = self._parked.pop(key) - 1
            if left:
                self._parked[key] = left
        if not all(results):
            self._metrics.barrier_timeout()
        if self.membership.owner(slot_of(key)) == worker:
            self._answer(worker, msg, view)

    def _answer(self, worker: str, msg: Fetch, view: ControllerView) -> None:
        related = None
        resource = view.parent_resource(msg.key)
        if Related.applies(view) and resource is not None:
            parent = parent_of(view, msg.key, self._store)
            if parent is not None and not self.related.ready(view, resource, parent):
                self._metrics.fetch(NackReason.NOT_READY.value)
                detail = "the customize hook has not answered for this parent yet"
                reply = Nack(self.epoch, msg.request_id, NackReason.NOT_READY, detail)
                self._outbox.put_nowait((worker, reply))
                return
            related = self.related.related_of
        raw, children, objects = snapshot_of(view, msg.key, stores=self._store, related=related)
        self._metrics.fetch("snapshot")
        revisions = revisions_of(view, msg.key, stores=self._store)
        snapshot = Snapshot(self.epoch, msg.request_id, msg.key, raw, children, revisions, objects)
        self._outbox.put_nowait((worker, snapshot))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
