"""A hook served by this process: the demo's and the benchmarks' webhooks.

``serve(path, handler, port=...)`` answers POST ``path`` with ``handler`` on
``127.0.0.1:port`` (no access log) until the returned runner is cleaned up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(path: str, handler: Handler, *, port: int) -> web.AppRunner:
    """Serve POST ``path`` (an aiohttp route: ``/{name}`` matches one segment) on 127.0.0.1."""
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner
