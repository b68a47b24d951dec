"""A local aiohttp server for the hook tests: ``await serve_app(app, tls=...)`` listens on a
free loopback port and returns its runner (to clean up) and its base URL."""

from __future__ import annotations

import ssl

from aiohttp import web


async def serve_app(
    app: web.Application, *, tls: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"{'https' if tls else 'http'}://127.0.0.1:{port}"
