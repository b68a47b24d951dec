"""``EmbeddedCluster``: the emulator as an object, started and stopped in an event loop.

::

    async with EmbeddedCluster() as cluster:          # or EmbeddedCluster(token="s3cret")
        cluster.url, cluster.kubeconfig               # http://127.0.0.1:PORT, a kubeconfig file
        cluster.faults.drop_watches()                 # fault hooks (see faults.py)
        cluster.kubelet.enable()                      # the fake kubelet (off by default)

``Settings`` holds the tunables (watch-cache size, bookmark interval, compaction interval,
watcher queue limit, namespace grace period). A ``proto.runtime.clock.FakeClock`` passed as
``clock`` steers every timer of the server (watch timeouts, bookmarks, the
future-resourceVersion wait, compaction, the namespace controller) from a test.
The cluster starts with the namespaces ``default``, ``kube-system``, ``kube-public`` and
``kube-node-lease`` (each with its ``default`` ServiceAccount) and the ``kubernetes`` Service,
plus the CustomResourceDefinitions given as ``crds`` (created, then established by the CRD
controller like any other; ``proto.api.crds.load_crds()`` gives Metacontroller's).

``rbac=True`` (off by default) turns on ServiceAccount tokens and RBAC authorization
(``access.py``): the admin ``token`` (or, without one, a request with no credentials) is a
``system:masters`` super-user, ServiceAccount tokens from the TokenRequest API are checked
against the stored Roles and bindings, the bootstrap ClusterRoles are created, the review
APIs are served and the clusterrole-aggregation controller runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from loadtest.apiserver import builtins, crd
from loadtest.apiserver.access import REVIEW_GROUPS, Access, review_types
from loadtest.apiserver.aggregation import AggregationController
from loadtest.apiserver.apiextensions import CrdController
from loadtest.apiserver.app import Router, http_server
from loadtest.apiserver.faults import AdminHandler, Faults, admin_routes
from loadtest.apiserver.gc import GarbageCollector
from loadtest.apiserver.handlers import Handlers
from loadtest.apiserver.kubelet import Kubelet
from loadtest.apiserver.lifecycle import Objects
from loadtest.apiserver.listener import Listener
from loadtest.apiserver.metrics import Metrics
from loadtest.apiserver.namespaces import NamespaceController, ServiceAccountController
from loadtest.apiserver.registry import Registry
from loadtest.apiserver.storage import Storage
from loadtest.apiserver.timers import call_later
from loadtest.apiserver.watch import WatchHub
from proto.runtime.clock import SYSTEM_CLOCK, Clock

SYSTEM_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")


@dataclass(frozen=True, slots=True)
class Settings:
    history_size: int = 10_000
    """Watch-cache capacity per resource: a watch from an older resourceVersion gets 410."""
    bookmark_interval: float = 60.0
    """Seconds between periodic BOOKMARK events (kube-apiserver: about a minute)."""
    compaction_interval: float = 300.0
    """Seconds between compactions of the MVCC history (kube-apiserver's default: 5 min)."""
    revision_limit: int = 200_000
    """Changes of one resource kept before an early compaction (bounds memory under load)."""
    watch_queue_limit: int = 100_000
    """Events a watcher may fall behind before the server closes its stream."""
    namespace_deletion_delay: float = 5.0
    """Seconds the namespace controller waits before cleaning a terminating namespace (5 s, as
    kube-controller-manager's ``namespaceDeletionGracePeriod``)."""


def write_kubeconfig(
    path: Path, url: str, token: str | None, *, ca_file: str | None = None
) -> None:
    """A kubeconfig for ``url`` with ``token`` (none: no credentials), trusting ``ca_file``
    (none: the system's CAs). Values are written as JSON strings, which YAML reads back as
    strings: a bare token of digits would be a number."""
    user = f"    token: {json.dumps(token)}\n" if token else "    {}\n"
    ca = f"    certificate-authority: {json.dumps(ca_file)}\n" if ca_file else ""
    path.write_text(
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- name: embedded\n"
        "  cluster:\n"
        f"    server: {json.dumps(url)}\n" + ca + "contexts:\n"
        "- name: embedded\n"
        "  context:\n"
        "    cluster: embedded\n"
        "    user: embedded\n"
        "    namespace: default\n"
        "current-context: embedded\n"
        "preferences: {}\n"
        "users:\n"
        "- name: embedded\n"
        "  user:\n" + user
    )


class EmbeddedCluster:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        kubelet: bool = False,
        kubeconfig: str | Path | None = None,
        settings: Settings | None = None,
        clock: Clock | None = None,
        rbac: bool = False,
        crds: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        self.host = host
        self._crds = [dict(c) for c in crds]
        self.port = port
        self.token = token
        self.settings = settings or Settings()
        self.clock: Clock = clock or SYSTEM_CLOCK
        self._kubeconfig_path = Path(kubeconfig) if kubeconfig else None
        self._tempdir: str | None = None
        self._runner: web.ServerRunner | None = None
        self._listener: Listener | None = None
        self._compaction: asyncio.Task[None] | None = None

        self.storage = Storage(
            history=self.settings.history_size, revisions=self.settings.revision_limit
        )
        crd_type = crd.crd_resource_type()
        types, order = [*builtins.builtin_types(), crd_type], list(builtins.GROUP_ORDER)
        if rbac:  # the review APIs, in the real server's discovery order
            types += review_types()
            order[order.index("events.k8s.io") + 1 : 0] = REVIEW_GROUPS
        self.registry = Registry(types, order)
        self.objects = Objects(self.storage, self.registry)
        self.metrics = Metrics()
        self.watches = WatchHub(
            self.storage,
            self.clock,
            bookmark_interval=self.settings.bookmark_interval,
            queue_limit=self.settings.watch_queue_limit,
        )
        self.faults = Faults(self.storage, self.watches)
        self.handlers = Handlers(self.objects, self.watches, self.clock)
        self.kubelet = Kubelet(self.objects, enabled=False)
        self._want_kubelet = kubelet
        self._controllers: list[Any] = [
            GarbageCollector(self.objects),
            NamespaceController(
                self.objects, self.clock, delay=self.settings.namespace_deletion_delay
            ),
            ServiceAccountController(self.objects),
            CrdController(self.objects, crd_type),
        ]
        self.access: Access | None = None
        """RBAC mode's authentication, authorization and token issuer (None when off)."""
        if rbac:
            self.access = Access(self.objects, self.handlers, admin_token=token)
            self._controllers.append(AggregationController(self.objects))
        self.url = ""
        self.kubeconfig = Path()

    async def __aenter__(self) -> EmbeddedCluster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def _bootstrap(self) -> None:
        ns_type = self.registry.get("", "v1", "namespaces")
        svc_type = self.registry.get("", "v1", "services")
        assert ns_type is not None and svc_type is not None
        for name in SYSTEM_NAMESPACES:
            self.objects.create(ns_type, "", {"metadata": {"name": name}})
        kubernetes = {
            "metadata": {
                "name": "kubernetes",
                "labels": {"component": "apiserver", "provider": "kubernetes"},
            },
            "spec": {
                "clusterIP": "10.96.0.1",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
            },
        }
        self.objects.create(svc_type, "default", kubernetes)
        if self.access is not None:
            self.access.bootstrap(self.registry)
        crd_type = self.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        assert crd_type is not None
        for definition in self._crds:
            self.objects.create(crd_type, "", definition)

    async def start(self) -> None:
        self._bootstrap()
        if self._want_kubelet:
            self.kubelet.enable()
        router = Router(
            self.registry,
            self.handlers,
            self.metrics,
            self.faults,
            token=self.token,
            admin=self._admin_routes(),
            access=self.access,
        )
        server = http_server(router)
        self._runner = web.ServerRunner(server)
        await self._runner.setup()
        self._listener = Listener(server, self.host, self.port)
        self.port = self._listener.start()
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{self.port}"
        router.host = f"{self.host}:{self.port}"
        if self._kubeconfig_path is None:
            self._tempdir = tempfile.mkdtemp(prefix="embedded-cluster-")
            self._kubeconfig_path = Path(self._tempdir) / "kubeconfig"
        self.kubeconfig = self._kubeconfig_path
        write_kubeconfig(self.kubeconfig, self.url, self.token)
        self._schedule_compaction()
        await asyncio.sleep(0)

    def _admin_routes(self) -> dict[tuple[str, str], AdminHandler]:
        routes = admin_routes(self.faults)
        if self.access is not None:
            routes[("GET", "/_emulator/rbac/denials")] = self.access.denials_handler
        return routes

    def _schedule_compaction(self) -> None:
        def compact() -> None:
            self.storage.compact()
            self._schedule_compaction()

        self._compaction = call_later(self.clock, self.settings.compaction_interval, compact)

    async def stop(self) -> None:
        if self._compaction is not None:
            self._compaction.cancel()
        self.watches.close_all()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner.cleanup()
            self._runner = None
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None
