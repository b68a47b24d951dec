"""One leadership term of the coordinator: the wiring of its parts, from bind to BYE.

While the term runs, this process is the only coordinator (the Lease says so, or there is no
election). The parts, each with its own contract:
- ``manager.controllers.hosted``: the controller objects, turned into routes (starts the informers);
- ``manager.routing.router`` and ``manager.routing.related``: informer events to parent keys;
- ``manager.term.dispatch``: keys and messages queued for workers, KEYS batched per loop turn;
- ``manager.term.sessions``: the conversations with workers (HELLO, heartbeats, sends, BYE) over
  the ROUTER socket, and the slot table (``manager.term.membership``);
- ``manager.term.snapshot_server``: FETCH answered with SNAPSHOT from the caches;
- ``manager.term.resync``: periodic re-reconciles.

A term ends when it is cancelled, or when one of its parts fails or ends on its own: then
``run()`` raises ``TermFailed`` (with the part's error as its cause) after cleaning up, so the
process can give up its leadership visibly instead of leading without doing its job. When
the term ends, every worker gets BYE before the socket closes, so they stop at once instead of
waiting for their fence timeout.
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass
from functools import partial

from prometheus_client import Counter

from manager.controllers.finalizers import FinalizerWriter
from manager.controllers.hookrefs import HookReferences
from manager.controllers.hosted import Controllers
from manager.controllers.view import ControllerId, ControllerView
from manager.informers.shared import Informers, store_of
from manager.link.router import RouterLink
from manager.routing.related import Related
from manager.routing.router import Router
from manager.term.dispatch import Dispatch
from manager.term.grace import Grace
from manager.term.membership import Membership, Timing
from manager.term.metrics import TermMetrics
from manager.term.resync import ResyncPlanner
from manager.term.sessions import WorkerSessions
from manager.term.snapshot_server import SnapshotServer
from proto.api.selectors import Selector
from proto.hooks.client import HookClient
from proto.kube.events import EventRecorder
from proto.kube.resources import Discovery
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.curve import ServerCurve
from proto.runtime.logs import get_logger
from proto.wire import Controllers as ControllersMsg
from proto.wire import Priority

log = get_logger("metashard.coordinator")


GOODBYE_WAIT = 1.0  # seconds the ending term waits for its workers to confirm they stopped


class TermFailed(Exception):
    """A part of the term failed or stopped: the term cannot do its job."""


@dataclass(frozen=True, slots=True)
class TermSettings:
    bind: str  # ZeroMQ endpoint to bind, e.g. tcp://0.0.0.0:7070
    timing: Timing = Timing()  # noqa: RUF009 - frozen, never mutated
    grace: Grace = Grace(4.0)  # noqa: RUF009 - the wait before the first assignment
    barrier_timeout: float = 5.0
    retry_interval: float = 30.0  # retry of controllers that could not start
    cache_flush_interval: float = 1800.0  # every parent is pushed again (LOW) this often
    curve: ServerCurve | None = None  # authenticate workers with these keys
    selector: Selector = Selector.everything()  # noqa: RUF009 - the controllers to run
    cluster_revision_namespace: str = "default"  # ControllerRevisions of cluster-scoped parents


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
        references: HookReferences | None = None,
        writer: FinalizerWriter | None = None,
        metrics: TermMetrics | None = None,
        dropped_frames: Counter | None = None,
        refused_peers: Counter | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        link: RouterLink | None = None,
    ) -> None:
        self.epoch = epoch
        self.settings = settings
        self._informers = informers
        self._clock = clock
        metrics = metrics if metrics is not None else TermMetrics(None)
        self.link = (
            link
            if link is not None
            else RouterLink(dropped=dropped_frames, curve=settings.curve, refused=refused_peers)
        )
        self.endpoint = ""
        # Set when the term ends: every worker confirmed it stopped (``sessions.goodbye``).
        self.workers_stopped = False
        self.membership = Membership(
            epoch=epoch,
            coordinator_id=coordinator_id,
            keys_of=lambda slots: self.router.keys_of(slots),
            controllers=lambda: tuple(v.definition for v in self.controllers.views.values()),
            start_at=math.inf,
            timing=settings.timing,
        )
        self.dispatch = Dispatch(
            epoch=epoch, target_of=self.membership.dispatch_target, metrics=metrics
        )
        push = self.dispatch.push
        self.related = Related(
            hooks=hooks,
            discovery=discovery,
            informers=informers,
            recorder=recorder,
            push=push,
            clock=clock,
        )
        self.router = Router(
            push=push,
            stores=partial(store_of, informers),
            on_parent=self.related.parent_changed,
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
            references=references,
            cluster_revision_namespace=settings.cluster_revision_namespace,
        )
        self.snapshots = SnapshotServer(
            epoch=epoch,
            owner=self.membership.owner,
            controllers=self.controllers,
            informers=informers,
            related=self.related,
            router=self.router,
            dispatch=self.dispatch,
            metrics=metrics,
            barrier_timeout=settings.barrier_timeout,
        )
        self.sessions = WorkerSessions(
            epoch=epoch,
            link=self.link,
            membership=self.membership,
            dispatch=self.dispatch,
            snapshots=self.snapshots,
            ready=lambda: self.controllers.loaded and informers.synced,
            grace=settings.grace,
            metrics=metrics,
            clock=clock,
        )
        self.resync = ResyncPlanner(
            controllers=self.controllers,
            router=self.router,
            push=push,
            active=self.sessions.assigning.is_set,
            clock=clock,
            rng=rng if rng is not None else random.Random(),
            cache_flush_interval=settings.cache_flush_interval,
        )
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def assigning(self) -> asyncio.Event:
        """Set once slots are being assigned."""
        return self.sessions.assigning

    # --- lifecycle ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Lead until cancelled; ``TermFailed`` if a part of the term fails or stops."""
        try:
            self.endpoint = self.link.bind(self.settings.bind)
        except Exception as e:
            self.link.close()
            raise TermFailed(f"cannot bind {self.settings.bind}: {e}") from e
        log.info("leading", epoch=self.epoch, endpoint=self.endpoint)
        parts = {
            "controllers": self.controllers.run(),
            "receive": self.sessions.receive(),
            "send": self.sessions.send(),
            "tick": self.sessions.tick(),
            "resync": self.resync.run(),
            "related": self.related.run(),
        }
        tasks = [asyncio.create_task(coro, name=name) for name, coro in parts.items()]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                error = task.exception()
                raise TermFailed(
                    f"{task.get_name()} failed: {error!r}"
                    if error is not None
                    else f"{task.get_name()} stopped"
                ) from error
        finally:
            waiting = [*self._tasks, *self.snapshots.close()]
            for task in [*tasks, *waiting]:
                task.cancel()
            await asyncio.gather(*tasks, *waiting, return_exceptions=True)
            self.workers_stopped = await self.sessions.goodbye(GOODBYE_WAIT)
            self.link.close()
            log.info("stopped leading", epoch=self.epoch)

    # --- controllers --------------------------------------------------------------------------

    async def _controllers_changed(
        self, views: dict[ControllerId, ControllerView], added: set[ControllerId]
    ) -> None:
        self.related.set_controllers(views.values())
        self.router.set_controllers(views.values())
        definitions = tuple(v.definition for v in views.values())
        for worker in self.membership.workers:
            self.dispatch.send(worker, ControllersMsg(self.epoch, definitions))
        for name in added:
            task = asyncio.ensure_future(self._enqueue_all(views[name]))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _enqueue_all(self, view: ControllerView) -> None:
        """Once a new controller's parents are cached, push each of them once (LOW)."""
        for resource in view.parents:
            informer = self._informers.get(resource)
            if informer is None:
                return
            await informer.wait_synced()
        for key in self.router.parent_keys(view):
            self.dispatch.push(key, Priority.LOW)
