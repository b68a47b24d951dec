"""The worker process: wires the link, membership, runner, API client and ops endpoint.

Reconcilers share one API client, one webhook client (hook metrics on the worker's registry,
answers capped at ``--hook-max-response-bytes``) and one event recorder (component
``metacontroller``); pending events are flushed on exit. Cached hook answers (ETag) of keys the
runner drops (their slot was revoked, or the worker fenced) are dropped with them, and so are
their server-side apply cache entries (``--apply-strategy server-side-apply``): a slot that
moves to another worker starts cold there.

``Worker(settings).run(stop)`` runs until ``stop`` is set, then leaves gracefully: running
reconciles finish, the coordinator gets a BYE, sockets and sessions close.
"""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from proto.api import names
from proto.hooks.client import HookClient
from proto.hooks.metrics import PrometheusHookMetrics
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.events import EventRecorder
from proto.kube.session import Session
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.http1 import HttpClient
from proto.runtime.logs import bind, get_logger
from proto.runtime.ops import OpsServer
from proto.wire import ControllerDef, dropped_frames_counter
from workers.kinds.plugins import FactoryBuilder, WorkerContext, builtin, load
from workers.link.dealer import DealerLink
from workers.link.fencing import FencedHookClient, FencedWriter
from workers.link.membership import Membership
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
        self.ops = OpsServer(self.registry, ready=self._ready)
        self.membership: Membership | None = None

    def _ready(self) -> str | None:
        if self.membership is None or not self.membership.welcomed:
            return "not joined to a coordinator"
        return None

    async def run(self, stop: asyncio.Event) -> None:
        settings = self.settings
        bind(worker=settings.worker_id)
        config = load_config(settings.kubeconfig)
        hook_metrics = PrometheusHookMetrics(self.registry)
        async with (
            self.ops.serving(metrics=settings.metrics_address, health=settings.health_address),
            Session(config, qps=settings.qps, burst=settings.burst) as session,
            HttpClient() as http,
        ):
            client = Client(session)
            events = EventRecorder(
                client, component=names.EVENT_COMPONENT, instance=settings.worker_id
            )
            link = DealerLink(
                settings.worker_id,
                settings.coordinator,
                dropped=dropped_frames_counter(self.registry),
                curve=settings.curve,
            )
            membership = Membership(
                link,
                worker_id=settings.worker_id,
                concurrency=settings.concurrency,
                clock=self._clock,
            )
            hooks = FencedHookClient(
                http,
                metrics=hook_metrics,
                max_response_bytes=settings.hook_max_response_bytes,
                in_contact=membership.in_contact,
            )
            writer = FencedWriter(client, membership.in_contact)
            ssa = (
                ServerSideApply(
                    writer,
                    field_manager=settings.apply.field_manager,
                    events=events,
                    metrics=PrometheusApplyMetrics(registry=self.registry),
                )
                if settings.apply.server_side
                else None
            )
            context = WorkerContext(
                worker_id=settings.worker_id,
                client=client,
                writer=writer,
                http=http,
                registry=self.registry,
                hooks=hooks,
                events=events,
                cluster_revision_namespace=settings.cluster_revision_namespace,
                revision_history_limit=settings.revision_history_limit,
                ssa=ssa,
            )
            runner = Runner(
                factory=self._builder(context),
                fetch=membership.fetch,
                gate=membership.owns,
                concurrency=settings.concurrency,
                clock=self._clock,
                queue_metrics=PrometheusMetricsProvider(registry=self.registry),
                metrics=PrometheusControllerMetrics(registry=self.registry),
                on_stop=lambda d: _forget(hooks, ssa, d),
                on_discard=lambda keys: _discard(hooks, ssa, keys),
            )
            membership.work = runner
            self.membership = membership
            log.info(
                "worker started",
                coordinator=settings.coordinator,
                concurrency=settings.concurrency,
                apply_strategy=settings.apply.strategy,
            )
            tasks = [
                asyncio.create_task(membership.run(), name="membership"),
                asyncio.create_task(self._tick_metrics(runner), name="metrics"),
            ]
            try:
                await stop.wait()
                log.info("worker stopping: finishing running reconciles")
                await membership.leave()
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await runner.close()
                await events.flush()
                link.close()
        log.info("worker stopped")

    async def _tick_metrics(self, runner: Runner) -> None:
        while True:
            runner.update_metrics()
            await self._clock.sleep(METRICS_TICK)


def _forget(
    hooks: HookClient,
    ssa: ServerSideApply | None,
    gone: ControllerDef,
) -> None:
    """A controller went away: drop its hook metric series, ETag caches and TLS contexts, and
    its apply counts."""
    hooks.forget(controller_type=gone.kind.value, controller_name=gone.name)
    if ssa is not None:
        ssa.forget_controller(queue_name(gone))


def _discard(hooks: HookClient, ssa: ServerSideApply | None, keys: KeyFilter) -> None:
    """Keys dropped by the runner: their cached hook answers and apply cache entries go."""
    hooks.drop_cached(keys)
    if ssa is not None:
        ssa.discard(keys)
