"""The stand-in API server of the watch benchmarks: pre-built bodies streamed from a process.

- ``stream`` answers a request with a body as the API server streams a watch: chunked, in
  writes of ``SERVER_WRITE`` bytes, so that the server spends as little CPU as it can and
  the client is what is measured; with ``hold`` it keeps the stream open before ending it.
- ``serve`` runs in a child process: one GET route on an ephemeral loopback port, the port
  put on ``port_queue`` once listening, served until the process is killed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from aiohttp import web

SERVER_WRITE = 8 << 20
HOLD_SECONDS = 3600


async def stream(request: web.Request, body: bytes, *, hold: bool = False) -> web.StreamResponse:
    """``body`` as a chunked JSON response; with ``hold``, open for an hour before it ends."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    view = memoryview(body)
    for start in range(0, len(view), SERVER_WRITE):
        await response.write(view[start : start + SERVER_WRITE])
    if hold:
        await asyncio.sleep(HOLD_SECONDS)
    await response.write_eof()
    return response


def serve(
    port_queue: Any,
    path: str,
    handle: Callable[[web.Request], Awaitable[web.StreamResponse]],
    *,
    run: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """Serve GET ``path`` with ``handle`` on 127.0.0.1 (an ephemeral port, put on
    ``port_queue``) on an event loop started by ``run``, until the process is killed."""

    async def main() -> None:
        app = web.Application()
        app.router.add_get(path, handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_queue.put(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        await asyncio.Event().wait()

    run(main())
