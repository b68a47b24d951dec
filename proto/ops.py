"""The operations endpoint every metashard process serves: metrics and probes.

- ``GET /metrics``: the process's Prometheus registry in the text exposition format.
- ``GET /healthz``: 200 ``ok`` while the process's event loop answers (liveness).
- ``GET /readyz``: 200 ``ok`` when ``ready()`` says so, else 503 with the reason it gives
  (the coordinator is ready only while leading with its socket bound).
- ``address`` takes Metacontroller's flag forms: ``:9999`` (all interfaces), ``host:port``;
  ``0`` (or empty) disables the endpoint. Port 0 picks a free port; ``OpsServer.port`` tells.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Readiness = Callable[[], str | None]
"""Returns None when ready, else a short reason why not."""


def parse_address(address: str) -> tuple[str, int] | None:
    """``":9999"`` -> ("0.0.0.0", 9999); ``"0"``/``""`` -> None. Raises ``ValueError``."""
    if address in ("", "0"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {address!r}: expected [HOST]:PORT, or 0 to disable")
    return (host.strip("[]") or "0.0.0.0", int(port))


class OpsServer:
    def __init__(self, registry: CollectorRegistry, *, ready: Readiness) -> None:
        self._registry = registry
        self._ready = ready
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, address: str) -> None:
        bind = parse_address(address)
        if bind is None:
            return
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, bind[0], bind[1])
        await site.start()
        sockets = self._runner.addresses
        self.port = sockets[0][1] if sockets else bind[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self._registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, _: web.Request) -> web.Response:
        reason = self._ready()
        if reason is None:
            return web.Response(text="ok")
        return web.Response(status=503, text=reason)
