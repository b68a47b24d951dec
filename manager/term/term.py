"""One leadership term of the coordinator: the composition of its parts, from bind to BYE.

While the term runs, this process is the only coordinator (the Lease says so, or there is no
election). The parts, each with its own contract, built bottom up, each given at construction
what it uses (no part learns another later):
- ``manager.controllers.running.ControllerSet``: the controllers running now (state), and
  ``manager.routing.router.KeyIndex``: every handled parent key by slot (state);
- ``manager.term.membership``: the slot table (reads both: ASSIGN and WELCOME carry them);
- ``manager.term.dispatch``: keys and messages queued for workers, KEYS batched per loop turn
  (the ``KeySink`` every part pushes keys to);
- ``manager.routing.related``: customize hooks and their related objects;
- ``manager.routing.router``: informer events to parent keys (keeps the ``KeyIndex``, and
  ``manager.routing.paused``: the paused parents the metrics count);
- ``manager.term.throttle``: per-controller limits, a permit per reconcile (pushes the keys
  it held back to the dispatch);
- ``manager.term.snapshots``: FETCH answered with SNAPSHOT from the caches, as the throttle
  allows;
- ``manager.term.sessions``: the conversations with workers (HELLO, heartbeats, sends, BYE) over
  the ROUTER socket (``manager.link.router``);
- ``manager.term.resync``: re-reconciles of a new controller's parents, and periodic ones;
- ``manager.term.presence``: another active manager of the same controllers, seen through a
  presence Lease (when given one: ``presence``);
- ``manager.controllers.hosted``: the controller objects, turned into the ``ControllerSet``
  (starts the informers, whose events go to the router); it tells the customize hooks, the
  router, the throttle, the sessions and the resyncs of every change, in that order, and reports the
  requests the API server refuses (``refusals``, which the term's informers tell).

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

from prometheus_client import Counter

from manager.controllers.finalizers import FinalizerWriter
from manager.controllers.hookrefs import HookReferences
from manager.controllers.hosted import Controllers
from manager.controllers.refusals import Refusals
from manager.controllers.running import ControllerSet
from manager.election.lease import LeaseLock
from manager.informers.shared import Informers
from manager.link.router import RouterLink
from manager.routing.paused import PausedParents
from manager.routing.related import Related
from manager.routing.router import KeyIndex, Router
from manager.settings import CoordinatorSettings
from manager.term.dispatch import Dispatch
from manager.term.grace import Grace
from manager.term.membership import Membership, Timing
from manager.term.metrics import TermMetrics
from manager.term.presence import Presence
from manager.term.resync import ResyncPlanner
from manager.term.sessions import WorkerSessions
from manager.term.snapshots import SnapshotServer
from manager.term.throttle import Throttle
from proto.hooks.client import HookClient
from proto.kube.events import EventRecorder
from proto.kube.resources import Discovery
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger

log = get_logger("metashard.coordinator")


GOODBYE_WAIT = 1.0  # seconds the ending term waits for its workers to confirm they stopped
BARRIER_TIMEOUT = 5.0  # seconds a snapshot waits for the cache to see a worker's own writes


class TermFailed(Exception):
    """A part of the term failed or stopped: the term cannot do its job."""


class Term:
    def __init__(
        self,
        *,
        epoch: int,
        coordinator_id: str,
        settings: CoordinatorSettings,
        grace: Grace,
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
        refusals: Refusals | None = None,
        presence: LeaseLock | None = None,
    ) -> None:
        self.epoch = epoch
        self.refusals = refusals if refusals is not None else Refusals()
        self.settings = settings
        metrics = metrics if metrics is not None else TermMetrics(None)
        self.link = (
            link
            if link is not None
            else RouterLink(dropped=dropped_frames, curve=settings.curve, refused=refused_peers)
        )
        self.endpoint = ""
        # Set when the term ends: every worker confirmed it stopped (``sessions.goodbye``).
        self.workers_stopped = False
        self.controllers = ControllerSet()
        self.keys = KeyIndex()
        self.membership = Membership(
            epoch=epoch,
            coordinator_id=coordinator_id,
            controllers=self.controllers,
            start_at=math.inf,
            timing=Timing(settings.heartbeat_interval, settings.worker_timeout),
        )
        self.dispatch = Dispatch(
            epoch=epoch,
            owners=self.membership,
            members=self.membership,
            slots=self.keys,
            metrics=metrics,
        )
        self.related = Related(
            epoch=epoch,
            hooks=hooks,
            discovery=discovery,
            informers=informers,
            recorder=recorder,
            sink=self.dispatch,
            clock=clock,
        )
        self.paused = PausedParents(keys=self.keys, metrics=metrics)
        self.router = Router(
            sink=self.dispatch,
            keys=self.keys,
            stores=informers,
            parents=self.related,
            paused=self.paused,
        )
        self.throttle = Throttle(
            sink=self.dispatch, members=self.membership, metrics=metrics, clock=clock
        )
        self.snapshots = SnapshotServer(
            epoch=epoch,
            owners=self.membership,
            slots=self.keys,
            controllers=self.controllers,
            informers=informers,
            related=self.related,
            dispatch=self.dispatch,
            throttle=self.throttle,
            metrics=metrics,
            barrier_timeout=BARRIER_TIMEOUT,
        )
        self.sessions = WorkerSessions(
            epoch=epoch,
            link=self.link,
            membership=self.membership,
            dispatch=self.dispatch,
            snapshots=self.snapshots,
            throttle=self.throttle,
            controllers=self.controllers,
            informers=informers,
            grace=grace,
            metrics=metrics,
            clock=clock,
        )
        self.resync = ResyncPlanner(
            controllers=self.controllers,
            parents=self.keys,
            sink=self.dispatch,
            informers=informers,
            assigning=self.sessions.assigning,
            clock=clock,
            rng=rng if rng is not None else random.Random(),
            cache_flush_interval=settings.cache_flush_interval,
        )
        self.presence = (
            Presence(
                lock=presence,
                identity=coordinator_id,
                controllers=self.controllers,
                recorder=recorder,
                metrics=metrics,
                interval=settings.lease_duration / 3,
                clock=clock,
            )
            if presence is not None
            else None
        )
        self.hosted = Controllers(
            discovery=discovery,
            informers=informers,
            recorder=recorder,
            controllers=self.controllers,
            routes=self.router,
            listeners=(self.related, self.router, self.throttle, self.sessions, self.resync),
            writer=writer,
            clock=clock,
            references=references,
            settings=settings,
            refusals=self.refusals,
        )

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
            "controllers": self.hosted.run(),
            "receive": self.sessions.receive(),
            "send": self.sessions.send(),
            "tick": self.sessions.tick(),
            "resync": self.resync.run(),
            "related": self.related.run(),
            "throttle": self.throttle.run(),
        }
        if self.presence is not None:
            parts["presence"] = self.presence.run()
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
            waiting = self.snapshots.close()
            for task in [*tasks, *waiting]:
                task.cancel()
            await asyncio.gather(*tasks, *waiting, return_exceptions=True)
            self.paused.forget()
            self.workers_stopped = await self.sessions.goodbye(GOODBYE_WAIT)
            self.link.close()
            log.info("stopped leading", epoch=self.epoch)
