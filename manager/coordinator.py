"""The coordinator process: election (optional), one ``Term`` per leadership, ops endpoint.

- With ``--leader-election`` the process is a candidate for the Lease; each time it wins, a
  ``Term`` runs for as long as it leads (``manager.election.elector``: release on cancel, epochs
  from ``leaseTransitions``). Without it, one term runs for the life of the process, its epoch the
  start time in milliseconds (only one coordinator may run then).
- ``/readyz`` is ready only while leading with the socket bound and the controllers (every
  kind of ``manager.kinds``) read once; while the last request to the API server got no
  answer it says ``API server unreachable`` and why, from the first failed request on (at
  start too, with or without election). ``/healthz`` always answers. Both are served on
  ``--health-probe-bind-address``, metrics on ``--metrics-address`` (``proto.runtime.ops``):
  the process's own (``process_*``, ``python_*``), the API client's (client-go's
  ``rest_client_*``: ``proto.kube.metrics``; an unreachable API server counts under
  ``code="<error>"`` at once), and the coordinator's. ``/readyz/controllers`` (not part of
  ``/readyz``: one controller that cannot run must not take the leader out of the worker
  link's Service) is 200 while every selected controller object runs, else 503 with one line
  per controller that does not and why (``ControllerSet.stalled``: invalid, a resource missing,
  a list or watch refused with 403).
- The informers of a term tell a ``Refusals`` which requests the API server refuses; the
  hosted controllers report them on the controller objects, naming the ServiceAccount when
  the credentials are one's token (``proto.kube.refusal.identity``).
- A term that fails (``manager.term.term.TermFailed``: the socket cannot be bound, a part of the
  term crashed) ends the process: the error is logged, the Lease is released (so a standby
  takes over within a retry period) and ``run()`` returns with ``failed`` saying why; the
  command exits non-zero. Leading on without doing the job is never an option.
- Informers live as long as a term: a standby holds no cache.
- Every term, elected or not, renews the presence Lease ``<--leader-election-id>-presence``
  in the election's namespace and warns when another coordinator writes it too
  (``manager.term.presence``).
"""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from manager.controllers.hookrefs import HookReferences
from manager.controllers.refusals import Refusals
from manager.election.config import default_identity
from manager.election.elector import LeaderElector
from manager.election.lease import ClientLeaseLock
from manager.election.metrics import PrometheusLeaderMetrics
from manager.informers.metrics import PrometheusInformerMetrics
from manager.informers.shared import Informers
from manager.link.auth import refused_peers_counter
from manager.settings import CoordinatorSettings
from manager.term.grace import Grace, first_assignment
from manager.term.metrics import TermMetrics
from manager.term.presence import presence_lease_name
from manager.term.term import Term, TermFailed
from proto.api import names
from proto.hooks.client import HookClient
from proto.hooks.metrics import PrometheusHookMetrics
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.events import EventRecorder
from proto.kube.metrics import RestClientMetrics
from proto.kube.refusal import identity
from proto.kube.session import Session
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.http1 import HttpClient
from proto.runtime.logs import get_logger
from proto.runtime.ops import OpsServer
from proto.wire import dropped_frames_counter

log = get_logger("metashard.coordinator")


class Coordinator:
    def __init__(
        self,
        settings: CoordinatorSettings,
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock = SYSTEM_CLOCK,
        identity: str | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry if registry is not None else CollectorRegistry()
        self.identity = identity or default_identity()
        self._clock = clock
        self.ops = OpsServer(
            self.registry,
            ready=self._ready,
            checks={"controllers": self._controllers_running},
            peers=settings.metrics_peers,
        )
        self._informer_metrics = PrometheusInformerMetrics(self.registry)
        self._term_metrics = TermMetrics(self.registry)
        self._dropped_frames = dropped_frames_counter(self.registry)
        self._refused_peers = refused_peers_counter(self.registry)
        self._hook_metrics = PrometheusHookMetrics(self.registry)
        self._client_metrics = RestClientMetrics(self.registry)
        self._session: Session | None = None
        self._credentials: str | None = None  # a ServiceAccount, when the token says so
        self._lease_namespace = "default"  # of the election and presence Leases
        self._hooks: HookClient | None = None
        self.term: Term | None = None
        self._client: Client | None = None
        self._recorder: EventRecorder | None = None
        self._stop: asyncio.Event | None = None
        self.failed: str | None = None  # why the process gave up, if it did
        self._elector: LeaderElector | None = None
        self._workers_stopped = False  # the last term's workers all confirmed they stopped

    def _ready(self) -> str | None:
        session = self._session
        if session is not None and session.unreachable is not None:
            return f"API server unreachable: {session.unreachable}"
        term = self.term
        if term is None:
            return "not leading"
        if not term.endpoint:
            return "leading, socket not bound yet"
        if not term.controllers.loaded:
            refused = term.refusals.of_group(names.GROUP)
            why = "".join(f"; {term.refusals.describe(r)}" for r in refused)
            return f"leading, controllers not read yet{why}"
        return None

    def _controllers_running(self) -> str | None:
        """``/readyz/controllers``: None when every selected controller object runs."""
        term = self.term
        if term is None:
            return "not leading"
        stalled = term.controllers.stalled
        if not stalled:
            return None
        return "\n".join(f"{kind} {name}: {why}" for (kind, name), why in sorted(stalled.items()))

    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        settings = self.settings
        shared = settings.common
        config = load_config(shared.kubeconfig)
        self._credentials = identity(config)
        self._lease_namespace = settings.leader_election_namespace or config.namespace
        async with (
            self.ops.serving(metrics=shared.metrics_address, health=shared.health_address),
            Session(
                config, qps=shared.qps, burst=shared.burst, metrics=self._client_metrics
            ) as session,
            HttpClient() as http,
        ):
            self._session = session
            self._client = Client(session)
            self._hooks = HookClient(http, metrics=self._hook_metrics)
            self._recorder = EventRecorder(
                self._client,
                component=names.EVENT_COMPONENT,
                instance=self.identity,
                clock=self._clock,
            )
            if settings.leader_election:
                namespace = self._lease_namespace
                elector = self._elector = LeaderElector(
                    ClientLeaseLock(
                        self._client, namespace=namespace, name=settings.leader_election_id
                    ),
                    settings.election(self.identity),
                    on_started_leading=self._lead,
                    on_stopped_leading=self._unlead,
                    clock=self._clock,
                    metrics=PrometheusLeaderMetrics(self.registry).for_lease(
                        settings.leader_election_id
                    ),
                    workers_stopped=lambda: self._workers_stopped,
                )
                log.info(
                    "candidate for leadership", lease=f"{namespace}/{settings.leader_election_id}"
                )
                main = asyncio.create_task(elector.run(), name="election")
            else:
                main = asyncio.create_task(self._lead(int(time.time() * 1000)), name="term")
            try:
                await stop.wait()
            finally:
                main.cancel()
                await asyncio.gather(main, return_exceptions=True)
                await self._recorder.flush()
        log.info("coordinator stopped")

    def _grace(self) -> Grace:
        previous = self._elector.previous_term if self._elector is not None else None
        return first_assignment(self.settings, previous=previous)

    async def _lead(self, epoch: int) -> None:
        assert self._client is not None and self._recorder is not None
        assert self._hooks is not None
        settings = self.settings
        refusals = Refusals(credentials=self._credentials)
        informers = Informers(
            self._client, clock=self._clock, metrics=self._informer_metrics, refusals=refusals
        )
        term = Term(
            epoch=epoch,
            coordinator_id=self.identity,
            settings=settings,
            grace=self._grace(),
            discovery=self._client.discovery,
            informers=informers,
            recorder=self._recorder,
            hooks=self._hooks,
            references=HookReferences(self._client, clock=self._clock),
            writer=self._client,
            metrics=self._term_metrics,
            dropped_frames=self._dropped_frames,
            refused_peers=self._refused_peers,
            clock=self._clock,
            refusals=refusals,
            presence=ClientLeaseLock(
                self._client,
                namespace=self._lease_namespace,
                name=presence_lease_name(settings.leader_election_id),
            ),
        )
        self.term = term
        self._workers_stopped = False
        try:
            await term.run()
        except TermFailed as e:
            self.failed = str(e)
            log.error("the term failed: giving up leadership and exiting", error=str(e))
            if self._stop is not None:
                self._stop.set()
        finally:
            self._workers_stopped = term.workers_stopped
            self.term = None
            await informers.close()

    async def _unlead(self) -> None:
        self.term = None
