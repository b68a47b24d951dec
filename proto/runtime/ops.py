"""The operations endpoints every metashard process serves: metrics and probes.

- ``GET /metrics`` on the metrics address (``--metrics-address``, Metacontroller's default
  ``:9999``): the process's Prometheus registry in the text exposition format, without
  ``*_created`` series. With ``peers`` (the workers of ``metashard run``), their expositions
  are read over their Unix sockets and merged in, each labelled ``worker=<id>``
  (``proto.runtime.exposition``).
- ``GET /healthz`` and ``GET /readyz`` on the health-probe address
  (``--health-probe-bind-address``, Metacontroller's default ``:8081``): ``/healthz`` is 200
  ``ok`` while the event loop answers (liveness); ``/readyz`` is 200 ``ok`` when ``ready()``
  says so, else 503 with the reason it gives. Each of ``checks`` answers the same way at
  ``/readyz/<name>``, for operators and monitors, without taking part in ``/readyz`` (the
  probe). When both addresses are the same (even ``host:0``), one server answers every path.
- Addresses take Metacontroller's forms (``proto.runtime.addresses``); port 0 picks a free port
  (``metrics_port``/``health_port`` tell); a Unix socket file is removed when the server stops.
- A server that cannot bind raises ``StartupError`` naming the address and the reason.
- The servers are ``proto.runtime.httpserver`` (one request per connection, GET and HEAD), so a
  worker never imports aiohttp; only a coordinator reading its workers' expositions uses it.
- The process's own metrics come with the server: ``OpsServer`` registers on its registry the
  collectors Prometheus' Go and Python clients export by default (``process_collectors``):
  ``process_*`` (CPU seconds, resident and virtual memory, open and maximum file descriptors,
  start time), ``python_gc_*`` (collections and collected objects per generation) and
  ``python_info``. Under ``metashard run`` each worker's carry its ``worker`` label, the
  coordinator's none, so one exposition holds every process's apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics_core import Metric

from proto.runtime.addresses import Address, Peer, UnixAddress, parse_address
from proto.runtime.exposition import merge, without_created
from proto.runtime.httpserver import Handler, HttpServer, Reply
from proto.runtime.logs import get_logger
from proto.runtime.startup import StartupError

log = get_logger("metashard.ops")

Readiness = Callable[[], str | None]
"""Returns None when ready, else a short reason why not."""

PEER_TIMEOUT = 5.0  # seconds to wait for one worker's exposition
PEER_LABEL = "worker"
PEER_UP = "metashard_worker_scrape_up"


def process_collectors(registry: CollectorRegistry) -> None:
    """Register the process and Python runtime collectors on ``registry`` (once per
    registry)."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)


class OpsServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        ready: Readiness,
        checks: Mapping[str, Readiness] | None = None,
        peers: Sequence[Peer] = (),
    ) -> None:
        process_collectors(registry)
        self._registry = registry
        self._ready = ready
        self._checks = dict(checks or {})
        self._peers = tuple(peers)
        self._servers: list[HttpServer] = []
        self._unix_paths: list[str] = []
        self.metrics_port = 0
        self.health_port = 0

    @contextlib.asynccontextmanager
    async def serving(self, *, metrics: str, health: str) -> AsyncIterator[OpsServer]:
        """Serve while the block runs (``start`` on entry, ``stop`` on exit)."""
        await self.start(metrics=metrics, health=health)
        try:
            yield self
        finally:
            await self.stop()

    async def start(self, *, metrics: str, health: str) -> None:
        """Bind the endpoints (``ValueError`` for a malformed address, ``StartupError`` for
        one that cannot be bound)."""
        routes: dict[Address, dict[str, Handler]] = {}
        metrics_at, health_at = parse_address(metrics), parse_address(health)
        if metrics_at is not None:
            routes.setdefault(metrics_at, {})["/metrics"] = self._metrics
        if health_at is not None:
            routes.setdefault(health_at, {}).update(
                {"/healthz": self._healthz, "/readyz": self._readyz}
            )
            for name, check in self._checks.items():
                routes[health_at][f"/readyz/{name}"] = functools.partial(_answer, check)
        try:
            for address, paths in routes.items():
                port = await self._serve(address, paths)
                if address == metrics_at:
                    self.metrics_port = port
                if address == health_at:
                    self.health_port = port
        except BaseException:
            await self.stop()
            raise

    async def _serve(self, address: Address, routes: dict[str, Handler]) -> int:
        server = HttpServer(routes)
        try:
            port = await server.start(address)
        except OSError as e:
            raise StartupError(f"cannot listen on {address}: {e.strerror or e}") from e
        self._servers.append(server)
        if isinstance(address, UnixAddress):
            self._unix_paths.append(address.path)
        return port

    async def stop(self) -> None:
        for server in self._servers:
            await server.stop()
        self._servers.clear()
        for path in self._unix_paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self._unix_paths.clear()

    async def _metrics(self) -> Reply:
        families: Iterable[Metric] = self._registry.collect()
        if self._peers:
            texts = await asyncio.gather(*(_scrape(peer) for peer in self._peers))
            families = merge(
                families,
                {peer.name: text for peer, text in zip(self._peers, texts, strict=True)},
                label=PEER_LABEL,
                up_name=PEER_UP,
                up_help="1 if the worker's metrics were read for this scrape, 0 if not.",
            )
        body = generate_latest(_Families(without_created(families)))
        return Reply(200, body, CONTENT_TYPE_LATEST)

    async def _healthz(self) -> Reply:
        return Reply(200, b"ok")

    async def _readyz(self) -> Reply:
        return await _answer(self._ready)


async def _answer(check: Readiness) -> Reply:
    reason = check()
    if reason is None:
        return Reply(200, b"ok")
    return Reply(503, reason.encode())


class _Families:
    """What ``generate_latest`` needs: an object whose ``collect()`` yields families."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


async def _scrape(peer: Peer) -> str | None:
    """``peer``'s exposition, or None (logged at debug) when it cannot be read."""
    import aiohttp  # the coordinator's: loaded already for its watches

    try:
        async with (
            aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=peer.socket),
                timeout=aiohttp.ClientTimeout(total=PEER_TIMEOUT),
            ) as http,
            http.get("http://localhost/metrics") as resp,
        ):
            resp.raise_for_status()
            return await resp.text()
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        log.debug("worker metrics not read", worker=peer.name, error=str(e))
        return None
