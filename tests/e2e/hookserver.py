"""A programmable Metacontroller hook server for end-to-end tests.

``HookServer().start()`` serves ``POST /<controller>/<hook>`` on 127.0.0.1 (a free port) from
its own thread and event loop, so it outlives any one test's event loop and can be shared by a
module. ``program(controller, handler)`` sets how one controller's hooks answer:
``handler(hook, request)`` gets the hook name (``sync``, ``finalize``) and the decoded request,
and returns a ``Reply`` or, for a plain 200, the JSON answer itself; ``program(...,
with_headers=True)`` passes the request's headers as a third argument. ``calls(controller)``
lists what was received, ``(time, hook, request)``; ``received(controller)`` the same as
``Received`` records, with the headers and when the answer was done (the chaos test judges
overlapping calls by them). ``url(controller, hook)`` is what the CompositeController's webhook
points at. ``measure_pauses()`` starts a ticker on the server's event loop (every 10 ms) that
records each time it woke more than 20 ms late (``pauses()``): the server itself was paused,
and calls it handled then may look longer, or later, than they were.

Transport features, for the hook-transport tests: ``HookServer(tls=context)`` serves HTTPS
(``url`` says ``https``) and closes every connection after its answer, so each call makes a
new handshake (a replaced certificate is seen by the next call). ``program(...,
authorization="Bearer x")`` answers 401 to calls without exactly that header, before the
handler runs (counted by ``refused``). ``program(..., etag=True)`` tags answers with an ETag
of their body and answers 304 to an ``If-None-Match`` that names the current one;
``full_answers`` counts the answers that carried a body.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (a slow or hung hook)
    chunked: bool = False  # sent in 64 KiB chunks without Content-Length (a streamed answer)

    @classmethod
    def json(cls, answer: Any, **kwargs: Any) -> Reply:
        return cls(body=orjson.dumps(answer), **kwargs)


Handler = Callable[..., "Reply | dict[str, Any]"]
"""``handler(hook, request)``, or ``handler(hook, request, headers)`` (module docstring)."""
PAUSE_TICK = 0.01
PAUSE_MIN = 0.02


@dataclass
class Received:
    """One call a controller's hook answered (or is answering)."""

    hook: str
    request: dict[str, Any]
    headers: dict[str, str]
    arrived: float  # time.monotonic(), shared by the processes of this machine
    answered: float | None = None  # None: still being answered


@dataclass
class _Options:
    authorization: str | None = None
    etag: bool = False
    refused: int = 0
    full_answers: int = 0
    not_modified: int = 0
    with_headers: bool = False


class HookServer:
    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self._tls = tls
        self._options: dict[str, _Options] = {}
        self._handlers: dict[str, Handler] = {}
        self._received: dict[str, list[Received]] = {}
        self._pauses: list[tuple[float, float]] = []
        self._metering = False
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    def start(self) -> HookServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def url(self, controller: str, hook: str = "sync") -> str:
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}/{controller}/{hook}"

    def program(
        self,
        controller: str,
        handler: Handler,
        *,
        authorization: str | None = None,
        etag: bool = False,
        with_headers: bool = False,
    ) -> None:
        with self._lock:
            self._handlers[controller] = handler
            options = self._options.setdefault(controller, _Options())
            options.authorization, options.etag = authorization, etag
            options.with_headers = with_headers

    def refused(self, controller: str) -> int:
        """Calls answered 401 for a missing or wrong ``Authorization`` header."""
        with self._lock:
            return self._options.get(controller, _Options()).refused

    def full_answers(self, controller: str) -> int:
        """Answers with a body (under ``etag``: not 304)."""
        with self._lock:
            return self._options.get(controller, _Options()).full_answers

    def not_modified(self, controller: str) -> int:
        with self._lock:
            return self._options.get(controller, _Options()).not_modified

    def received(self, controller: str) -> list[Received]:
        with self._lock:
            return list(self._received.get(controller, ()))

    def calls(
        self, controller: str, hook: str | None = None
    ) -> list[tuple[float, str, dict[str, Any]]]:
        return [
            (r.arrived, r.hook, r.request)
            for r in self.received(controller)
            if hook is None or r.hook == hook
        ]

    def measure_pauses(self) -> None:
        """Start recording the server's own pauses (module docstring), once."""
        with self._lock:
            if self._metering:
                return
            self._metering = True
        asyncio.run_coroutine_threadsafe(self._meter(), self._loop)

    def pauses(self) -> list[tuple[float, float]]:
        """``(start, end)`` of each pause measured so far."""
        with self._lock:
            return list(self._pauses)

    async def _meter(self) -> None:
        while True:
            due = time.monotonic() + PAUSE_TICK
            await asyncio.sleep(PAUSE_TICK)
            now = time.monotonic()
            if now - due > PAUSE_MIN:
                with self._lock:
                    self._pauses.append((due, now))

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/{controller}/{hook}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._tls)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        arrived = time.monotonic()
        body = orjson.loads(await request.read())
        received = Received(
            request.match_info["hook"], body, dict(request.headers), arrived, answered=None
        )
        try:
            return await self._answer(request, received)
        finally:
            received.answered = time.monotonic()

    async def _answer(self, request: web.Request, received: Received) -> web.StreamResponse:
        controller, hook, body = request.match_info["controller"], received.hook, received.request
        with self._lock:
            options = self._options.get(controller, _Options())
            if options.authorization and request.headers.get("Authorization") != (
                options.authorization
            ):
                options.refused += 1
                return self._close(web.Response(status=401, text="wrong or missing credentials"))
            self._received.setdefault(controller, []).append(received)
            handler = self._handlers.get(controller)
        if handler is None:
            return web.Response(status=404, text=f"no handler for {controller}")
        try:
            if options.with_headers:
                answer = handler(hook, body, received.headers)
            else:
                answer = handler(hook, body)
        except Exception as err:  # a broken test handler answers 500 and says why
            return web.Response(status=500, text=f"handler failed: {err!r}")
        reply = answer if isinstance(answer, Reply) else Reply.json(answer)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        headers = dict(reply.headers)
        if options.etag and reply.status == 200:
            tag = '"' + hashlib.sha256(reply.body).hexdigest()[:16] + '"'
            headers["ETag"] = tag
            if request.headers.get("If-None-Match") == tag:
                with self._lock:
                    options.not_modified += 1
                return self._close(web.Response(status=304, headers=headers))
        with self._lock:
            options.full_answers += 1
        if reply.chunked:
            return await self._stream(request, reply)
        return self._close(
            web.Response(
                status=reply.status,
                body=reply.body,
                headers=headers,
                content_type="application/json",
            )
        )

    async def _stream(self, request: web.Request, reply: Reply) -> web.StreamResponse:
        response = web.StreamResponse(status=reply.status, headers=reply.headers)
        response.content_type = "application/json"
        response.enable_chunked_encoding()
        await response.prepare(request)
        body = memoryview(reply.body)
        try:
            for start in range(0, len(body), 64 * 1024):
                await response.write(body[start : start + 64 * 1024])
            await response.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the client stopped reading
        return response

    def _close(self, response: web.Response) -> web.Response:
        if self._tls is not None:
            response.force_close()  # every call makes a new TLS handshake
        return response
