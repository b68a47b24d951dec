"""The worker process, and its composition root: every part is built here, bottom up.

``Worker.run`` builds the parts (``Worker._compose``) in this order, each given what it needs
at construction (no part learns another later):

1. the worker's ``Standing`` (epoch, slots, contact: ``workers.link.standing``; built with the
   ``Worker``, whose readiness reads it) and the DEALER link to the coordinator
   (``workers.link.dealer``);
2. ``Snapshots`` (FETCH and its answer, over the link, in the standing's epoch);
3. the API client and the webhook client, both fenced by the standing (``workers.link.fencing``:
   no write and no hook call sent within the safety margin of the fence deadline, no hook
   answer acted on past it), the event recorder (component
   ``metacontroller``) and, under ``--apply-strategy server-side-apply``, the server-side apply
   cache; together the ``WorkerContext`` every controller kind builds its reconcilers from
   (``workers.kinds.plugins``: the built-in kinds, or ``--reconciler``);
4. the ``Runner``: reconciles keys, gated by the standing, with snapshots from ``Snapshots``;
5. the ``Membership``: reads the link, keeps the standing, answers FETCHes, feeds the runner,
   and says in the log (``ContactReport``: ``workers.link.contact``) when the worker joined,
   lost contact, or why it cannot join (counted in
   ``metashard_worker_join_warnings_total{cause}``).

Reconcilers share one API client, one webhook client (hook metrics on the worker's registry,
answers capped at ``--hook-max-response-bytes``) and one event recorder; pending events are
flushed on exit. Cached hook answers (ETag) of keys the runner drops (their slot was revoked,
or the worker fenced) are dropped with them, and so are their server-side apply cache entries:
a slot that moves to another worker starts cold there (``WorkerCaches``).

``Worker(settings).run(stop)`` runs until ``stop`` is set, then leaves gracefully: running
reconciles finish, the coordinator gets a BYE, sockets and sessions close.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from proto.api import names
from proto.hooks.client import HookClient
from proto.hooks.metrics import PrometheusHookMetrics
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.events import EventRecorder
from proto.kube.metrics import RestClientMetrics
from proto.kube.session import Session
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.http1 import HttpClient
from proto.runtime.logs import bind, get_logger
from proto.runtime.ops import OpsServer
from proto.wire import ControllerDef, dropped_frames_counter
from workers.kinds.plugins import FactoryBuilder, WorkerContext, builtin, load
from workers.link.contact import ContactReport, join_warnings_counter
from workers.link.dealer import DealerLink
from workers.link.deferrals import Deferrals
from workers.link.fencing import Fence
from workers.link.membership import Membership
from workers.link.snapshots import Snapshots
from workers.link.standing import Standing
from workers.runner.metrics import PrometheusControllerMetrics
from workers.runner.runner import KeyFilter, Runner, queue_name
from workers.settings import WorkerSettings
from workers.sync.apply_metrics import PrometheusApplyMetrics
from workers.sync.ssa_writes import ServerSideApply
from workers.workqueue import PrometheusMetricsProvider

log = get_logger("metashard.worker")

METRICS_TICK = 0.5  # seconds between refreshes of the time-based queue gauges


class Worker:
    def __init__(
        self,
        settings: WorkerSettings,
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self.registry = registry if registry is not None else CollectorRegistry()
        self._clock = clock
        self._builder: FactoryBuilder = (
            load(settings.reconciler) if settings.reconciler else builtin
        )
        self.standing = Standing(clock=clock, fence_timeout=settings.unsafe_fence_timeout)
        self.ops = OpsServer(self.registry, ready=self._ready)

    def _ready(self) -> str | None:
        if not self.standing.welcomed:
            return "not joined to a coordinator"
        return None

    async def run(self, stop: asyncio.Event) -> None:
        settings = self.settings
        shared = settings.common
        bind(worker=settings.worker_id)
        config = load_config(shared.kubeconfig)
        hook_metrics = PrometheusHookMetrics(self.registry)
        async with (
            self.ops.serving(metrics=shared.metrics_address, health=shared.health_address),
            Session(
                config,
                qps=shared.qps,
                burst=shared.burst,
                metrics=RestClientMetrics(self.registry),
            ) as session,
            HttpClient() as http,
        ):
            client = Client(session)
            events = EventRecorder(
                client, component=names.EVENT_COMPONENT, instance=settings.worker_id
            )
            parts = self._compose(client, http, events, hook_metrics)
            log.info(
                "worker started",
                coordinator=settings.coordinator,
                concurrency=shared.concurrency,
                apply_strategy=shared.apply.strategy,
            )
            tasks = [
                asyncio.create_task(parts.membership.run(), name="membership"),
                asyncio.create_task(self._tick_metrics(parts.runner), name="metrics"),
            ]
            try:
                await stop.wait()
                log.info("worker stopping: finishing running reconciles")
                await parts.membership.leave()
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await parts.runner.close()
                await events.flush()
                parts.link.close()
        log.info("worker stopped")

    def _compose(
        self,
        client: Client,
        http: HttpClient,
        events: EventRecorder,
        hook_metrics: PrometheusHookMetrics,
    ) -> Parts:
        """The parts that run, built bottom up (module docstring) on the API session's client,
        the HTTP client, the event recorder and the hook metrics."""
        settings, registry = self.settings, self.registry
        link = DealerLink(
            settings.worker_id,
            settings.coordinator,
            dropped=dropped_frames_counter(registry),
            curve=settings.curve,
        )
        standing = self.standing
        snapshots = Snapshots(link, standing)
        deferrals = Deferrals(link, standing)
        fence = Fence(standing, clock=self._clock)
        hooks = HookClient(
            http,
            metrics=hook_metrics,
            max_response_bytes=settings.hook_max_response_bytes,
            gate=fence,
        )
        writer = client.gated(fence.write)
        ssa = (
            ServerSideApply(
                writer,
                field_manager=settings.common.apply.field_manager,
                events=events,
                metrics=PrometheusApplyMetrics(registry=registry),
            )
            if settings.common.apply.server_side
            else None
        )
        context = WorkerContext(
            worker_id=settings.worker_id,
            client=client,
            writer=writer,
            http=http,
            registry=registry,
            hooks=hooks,
            events=events,
            cluster_revision_namespace=settings.common.cluster_revision_namespace,
            revision_history_limit=settings.common.revision_history_limit,
            ssa=ssa,
        )
        runner = Runner(
            factory=self._builder(context),
            snapshots=snapshots,
            gate=standing,
            concurrency=settings.common.concurrency,
            clock=self._clock,
            queue_metrics=PrometheusMetricsProvider(registry=registry),
            metrics=PrometheusControllerMetrics(registry=registry),
            caches=WorkerCaches(hooks, ssa),
            later=deferrals,
            worker_id=settings.worker_id,
        )
        membership = Membership(
            link,
            standing,
            snapshots,
            runner,
            contact=ContactReport(
                settings.coordinator,
                clock=self._clock,
                warnings=join_warnings_counter(registry),
            ),
            worker_id=settings.worker_id,
            concurrency=settings.common.concurrency,
            clock=self._clock,
        )
        return Parts(link, runner, membership)

    async def _tick_metrics(self, runner: Runner) -> None:
        while True:
            runner.update_metrics()
            await self._clock.sleep(METRICS_TICK)


@dataclass(frozen=True, slots=True)
class Parts:
    """What ``Worker.run`` runs and closes of the parts it composed."""

    link: DealerLink
    runner: Runner
    membership: Membership


@dataclass(frozen=True, slots=True)
class WorkerCaches:
    """What the runner drops beside its own state (its ``Caches``): a controller that went away
    loses its hook metric series, ETag caches and TLS contexts, and its apply counts; dropped
    keys lose their cached hook answers and apply cache entries."""

    hooks: HookClient
    ssa: ServerSideApply | None

    def forget_controller(self, definition: ControllerDef) -> None:
        self.hooks.forget(controller_type=str(definition.kind), controller_name=definition.name)
        if self.ssa is not None:
            self.ssa.forget_controller(queue_name(definition))

    def discard(self, keys: KeyFilter) -> None:
        self.hooks.drop_cached(keys)
        if self.ssa is not None:
            self.ssa.discard(keys)
