"""Runs reconciles: one workqueue per controller, a shared concurrency limit, barriers.

Invariants:
- Every controller definition gets its own ``WorkQueue`` (named ``<Kind>-<name>``, like
  Metacontroller's queues) and reconciler; at most ``concurrency`` reconciles run at once in
  the process, across controllers. A key taken from its queue may wait for one of them; the
  queue counts that wait as work (``work_duration``), since it has handed the key out. A key
  is never reconciled twice at once (the queue's contract; a key whose reconcile was
  cancelled, its controller removed and added again, starts again only once the cancelled
  one has ended; across workers, the coordinator's slot ownership).
- A reconcile starts only when the ``Gate`` gives a ``Claim`` for the key
  (``workers.link.standing``: the worker is joined, not leaving, and owns the key's slot);
  otherwise the key is dropped: the coordinator hands it to whoever owns it, with all other
  keys of the slot. The reconcile runs under that claim, with an attempt id of its own
  (``<worker id>/<process tag>/<n>``, unique): its hook requests carry them. Contact with the
  coordinator is checked later, right before each write and hook call
  (``workers.link.fencing``); a reconcile stopped there (``OutOfContact``) is retried with
  backoff, not counted as a failure: if the worker fences meanwhile, the retry is dropped with
  the rest of its queues, and if it was only a pause, the key is not lost.
- A reconcile fetches its key's snapshot from the ``SnapshotSource``
  (``workers.link.snapshots``), then hands it to the controller's ``Reconciler``; when a
  snapshot holds one of its controller's permits (``Snapshot.permit``), the source is told
  (``done``) once that reconcile has ended, however it ended.
- After each reconcile: success -> ``forget``; ``Outcome.requeue_after`` -> ``forget`` and
  ``add_after``; ``RequeueAfter`` -> ``add_after`` (not a failure); a refused or failed fetch
  for a reason that is not the key's fault -> dropped; any other error -> ``add_rate_limited``
  and counted.
- A controller that goes away has its queue shut down, its running reconciles cancelled and its
  metric series removed (``Caches.forget_controller`` removes what the runner does not own,
  e.g. hook metrics).
- ``cancel(predicate)`` stops the running reconciles of matching keys at their next await
  (fencing: the coordinator is gone) and drops their queued keys; ``drain(predicate)`` drops
  queued keys and waits for running ones to finish (a slot is being revoked). Both pass the
  predicate to ``Caches.discard`` (per-key state kept outside the runner, e.g. ETag caches). A
  cancelled reconcile's key is forgotten by its queue's rate limiter, like a dropped one.
- Read-your-writes: the resourceVersions a reconcile reports through ``wrote`` become the
  barrier of the key's next fetch (``workers.runner.barriers``); a fetch that returned
  satisfied it, and it is forgotten then, or ``BARRIER_TTL`` (20 s) after the writes, or with
  the key.
- Echoes wait their turn: a LIVE key whose running reconcile has written, or whose last
  reconcile's writes no fetch has seen yet, is almost always the echo of those writes (it
  still runs again: the hook must see the children it created), and it must not go ahead of
  parents still waiting for their first reconcile (after a start or a new slot, those are
  LOW, most of them still at the coordinator, which sends a worker a window of them at a
  time): between them the order is first come, first served, as in a one-priority queue. So
  such a key, when not queued here already, is handed back to the coordinator (``Later``,
  ``workers.link.deferrals``), which queues it behind the LOW keys waiting there; when it
  cannot be (none wait there, or an older coordinator), it is queued here at LOW priority.
  A key already queued stays as it is (a LIVE one stays LIVE).
- A successful reconcile that wrote something is logged at info level, once: ``reconciled``
  with the controller, key, result, each write, the hook time and the whole reconcile's time
  (a reconcile that found nothing to write is logged at debug level).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger
from proto.wire import ControllerDef, ParentKey, Priority, Snapshot
from workers.reconcile import (
    Claim,
    Outcome,
    Reconciler,
    ReconcileRequest,
    ReconcilerFactory,
    RequeueAfter,
)
from workers.runner.barriers import Barriers
from workers.runner.metrics import ControllerMetrics, NoControllerMetrics, ReconcileResult
from workers.workqueue import MetricsProvider, NoMetricsProvider, ShutDown, WorkQueue

log = get_logger("metashard.runner")

KeyFilter = Callable[[ParentKey], bool]


class SnapshotSource(Protocol):
    """Where a reconcile's snapshot comes from (``workers.link.snapshots.Snapshots``)."""

    async def fetch(self, key: ParentKey, barrier: Mapping[str, str]) -> Snapshot:
        """The snapshot of ``key``, once the cache has seen the resourceVersions of
        ``barrier`` (group-resource -> resourceVersion). Raises ``KeyDropped`` when the key
        cannot be reconciled here; anything else is retried with backoff."""
        ...

    async def done(self, key: ParentKey) -> None:
        """The reconcile of ``key``, whose snapshot held a permit, has ended."""
        ...


class Later(Protocol):
    """Where the echoes of a worker's own writes go (``workers.link.deferrals.Deferrals``)."""

    def later(self, key: ParentKey) -> bool:
        """Hand ``key`` back to the coordinator, to run after the LOW keys waiting there;
        False: it cannot be now (nothing was sent)."""
        ...


class Gate(Protocol):
    """Whether a reconcile may start (``workers.link.standing.Standing``)."""

    def claim(self, key: ParentKey) -> Claim | None:
        """What a reconcile of ``key`` may start under now; None: it may not start here."""
        ...


class Caches(Protocol):
    """State other parts keep per controller and per key, dropped with them (the worker's
    hook client and server-side apply cache: ``workers.worker``)."""

    def forget_controller(self, definition: ControllerDef) -> None:
        """The controller went away."""
        ...

    def discard(self, keys: KeyFilter) -> None:
        """The runner dropped the keys ``keys`` accepts."""
        ...


class KeyDropped(Exception):
    """The key cannot be reconciled here now (not owner, unknown, no coordinator): drop it."""


class OutOfContact(Exception):
    """The worker may not act now (too close to its fence deadline, or past it): nothing was
    sent; retry the key later (module docstring)."""


def queue_name(definition: ControllerDef) -> str:
    return f"{definition.kind}-{definition.name}"


@dataclass(slots=True)
class _Controller:
    definition: ControllerDef
    reconciler: Reconciler
    queue: WorkQueue[ParentKey]
    consumers: list[asyncio.Task[None]] = field(default_factory=list)
    active: int = 0


class Runner:
    """All reconciles of one worker process."""

    def __init__(
        self,
        *,
        factory: ReconcilerFactory,
        snapshots: SnapshotSource,
        gate: Gate,
        concurrency: int,
        clock: Clock = SYSTEM_CLOCK,
        queue_metrics: MetricsProvider | None = None,
        metrics: ControllerMetrics | None = None,
        caches: Caches | None = None,
        later: Later | None = None,
        worker_id: str = "",
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._factory = factory
        self._snapshots = snapshots
        self._gate = gate
        self._concurrency = concurrency
        self._limit = asyncio.Semaphore(concurrency)
        self._clock = clock
        self._queue_metrics = queue_metrics or NoMetricsProvider()
        self._metrics = metrics or NoControllerMetrics()
        self._caches = caches
        self._later = later
        self._controllers: dict[str, _Controller] = {}
        self._running: dict[ParentKey, asyncio.Task[tuple[Outcome, ReconcileRequest]]] = {}
        self._barriers = Barriers(clock=clock)
        self._requests: dict[ParentKey, ReconcileRequest] = {}  # of the running reconciles
        self._attempt_prefix = f"{worker_id}/{uuid.uuid4().hex[:8]}/"
        self._attempts = itertools.count(1)

    # --- controllers --------------------------------------------------------------------------

    def set_controllers(self, definitions: tuple[ControllerDef, ...]) -> None:
        """Adopt the coordinator's current set: start new ones, rebuild changed, stop removed."""
        wanted = {queue_name(d): d for d in definitions}
        for name in list(self._controllers):
            if name not in wanted:
                self._stop(name)
        for name, definition in wanted.items():
            current = self._controllers.get(name)
            if current is not None and current.definition == definition:
                continue
            try:
                reconciler = self._factory(definition)
            except Exception as e:
                log.error("controller cannot run here", controller=name, error=str(e))
                if current is not None:
                    self._stop(name)
                continue
            if current is None:
                self._start(name, definition, reconciler)
            else:  # keep the queue (its keys are still wanted), swap the reconciler
                current.definition = definition
                current.reconciler = reconciler

    def _start(self, name: str, definition: ControllerDef, reconciler: Reconciler) -> None:
        queue: WorkQueue[ParentKey] = WorkQueue(
            name, clock=self._clock, metrics=self._queue_metrics
        )
        controller = _Controller(definition, reconciler, queue)
        controller.consumers = [
            asyncio.create_task(self._consume(name, controller), name=f"{name}/{i}")
            for i in range(self._concurrency)
        ]
        self._controllers[name] = controller
        self._metrics.set_max_concurrency(name, self._concurrency)
        self._metrics.set_active(name, 0)
        log.info("controller started", controller=name)

    def _stop(self, name: str) -> None:
        controller = self._controllers.pop(name)
        controller.queue.shut_down()
        controller.queue.discard(lambda _: True)
        for task in controller.consumers:
            task.cancel()
        definition = controller.definition
        for key, running in list(self._running.items()):
            if (key.kind, key.controller) == (definition.kind, definition.name):
                running.cancel()
        self._metrics.forget_controller(name)
        self._queue_metrics.forget_controller(name)
        if self._caches is not None:
            self._caches.forget_controller(definition)
        log.info("controller stopped", controller=name)

    async def close(self) -> None:
        """Stop everything: cancel running reconciles and the consumers."""
        for name in list(self._controllers):
            self._stop(name)
        tasks = list(self._running.values())
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- keys ---------------------------------------------------------------------------------

    def enqueue(self, key: ParentKey, priority: Priority) -> bool:
        """Queue ``key`` on its controller's queue; ``False`` if the controller is unknown."""
        controller = self._controllers.get(f"{key.kind}-{key.controller}")
        if controller is None:
            return False
        self._barriers.sweep()
        if priority is Priority.LIVE and self._echoing(key):
            later = self._later
            if key not in controller.queue and later is not None and later.later(key):
                return True
            priority = Priority.LOW
        controller.queue.add(key, priority=priority)
        return True

    def _echoing(self, key: ParentKey) -> bool:
        """Whether events of ``key``'s own writes may be arriving: its running reconcile has
        written, or its last one's writes wait for a fetch to see them."""
        if key in self._barriers:
            return True
        running = self._requests.get(key)
        return running is not None and bool(running.writes)

    def cancel(self, predicate: KeyFilter) -> int:
        """Drop queued keys and interrupt running reconciles that match; return how many ran."""
        self._discard(predicate)
        running = [task for key, task in self._running.items() if predicate(key)]
        for task in running:
            task.cancel()
        return len(running)

    async def drain(self, predicate: KeyFilter) -> None:
        """Drop queued keys that match and wait until no matching reconcile is running."""
        self._discard(predicate)
        while True:
            running = [task for key, task in self._running.items() if predicate(key)]
            if not running:
                return
            await asyncio.wait(running)

    def _discard(self, predicate: KeyFilter) -> None:
        for controller in self._controllers.values():
            controller.queue.discard(predicate)
        self._barriers.discard(predicate)
        if self._caches is not None:
            self._caches.discard(predicate)

    @property
    def in_flight(self) -> int:
        return len(self._running)

    @property
    def queued(self) -> int:
        return sum(len(c.queue) for c in self._controllers.values())

    def update_metrics(self) -> None:
        """Refresh the time-based queue gauges; call every half second or so."""
        for controller in self._controllers.values():
            controller.queue.update_unfinished_work()

    # --- the reconcile loop -------------------------------------------------------------------

    async def _consume(self, name: str, controller: _Controller) -> None:
        queue = controller.queue
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            try:
                async with self._limit:
                    await self._process(name, controller, key)
            finally:
                queue.done(key)

    async def _process(self, name: str, controller: _Controller, key: ParentKey) -> None:
        queue = controller.queue
        cancelled = self._running.get(key)
        if cancelled is not None:  # of the controller's previous queue, still ending
            await asyncio.wait((cancelled,))
        claim = self._gate.claim(key)
        if claim is None:
            queue.forget(key)
            return
        attempt = f"{self._attempt_prefix}{next(self._attempts)}"
        claim = dataclasses.replace(claim, attempt=attempt)
        task = asyncio.create_task(self._reconcile(controller.reconciler, key, claim))
        self._running[key] = task
        controller.active += 1
        self._metrics.set_active(name, controller.active)
        started = time.perf_counter()
        try:
            outcome, done = await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # the consumer itself is being cancelled
            queue.forget(key)
            return  # fenced or stopped: nothing to retry here
        except KeyDropped as e:
            queue.forget(key)
            log.debug("key dropped", controller=name, key=_fmt(key), reason=str(e))
            return
        except OutOfContact as e:
            queue.add_rate_limited(key)
            log.info("not acting: retried later", controller=name, key=_fmt(key), reason=str(e))
            return
        except RequeueAfter as e:
            queue.add_after(key, e.delay)
            self._metrics.observe(
                name, ReconcileResult.REQUEUE_AFTER, time.perf_counter() - started
            )
            log.info("requeued", controller=name, key=_fmt(key), after=e.delay, reason=str(e))
            return
        except Exception as e:
            queue.add_rate_limited(key)
            self._metrics.observe(name, ReconcileResult.ERROR, time.perf_counter() - started)
            log.warning(
                "reconcile failed",
                controller=name,
                key=_fmt(key),
                error=str(e) or type(e).__name__,
                error_type=type(e).__name__,
                retries=queue.num_requeues(key),
            )
            return
        finally:
            if self._running.get(key) is task:  # not yet the entry of the key's next run
                del self._running[key]
            controller.active -= 1
            self._metrics.set_active(name, controller.active)
        seconds = time.perf_counter() - started
        queue.forget(key)
        if outcome.requeue_after is not None and outcome.requeue_after > 0:
            queue.add_after(key, outcome.requeue_after)
            result = ReconcileResult.REQUEUE_AFTER
        else:
            result = ReconcileResult.SUCCESS
        self._metrics.observe(name, result, seconds)
        (log.info if done.written else log.debug)(
            "reconciled",
            controller=name,
            key=_fmt(key),
            result=result.value,
            wrote=done.written,
            hook_seconds=round(done.hook_seconds, 4),
            seconds=round(seconds, 4),
        )

    async def _reconcile(
        self, reconciler: Reconciler, key: ParentKey, claim: Claim
    ) -> tuple[Outcome, ReconcileRequest]:
        """Fetch the snapshot and run the reconciler under ``claim``: its outcome and what it
        recorded."""
        barrier = self._barriers.take(key)
        try:
            snapshot = await self._snapshots.fetch(key, {r: str(v) for r, v in barrier.items()})
        except BaseException:
            if barrier:  # not satisfied: keep it for the next attempt
                self._barriers.put(key, barrier)
            raise
        request = self._requests[key] = ReconcileRequest(key, snapshot, claim)
        try:
            return await reconciler.reconcile(request), request
        finally:
            del self._requests[key]
            if request.writes:
                self._barriers.put(key, request.writes)
            if snapshot.permit:
                await self._snapshots.done(key)


def _fmt(key: ParentKey) -> str:
    return f"{key.namespace}/{key.name}" if key.namespace else key.name
