"""A small HTTP/1.1 server on the event loop, for the operations endpoints (metrics, probes).

Prometheus and the kubelet ask a few fixed paths with GET; answering them needs no web
framework, and keeping aiohttp out of the worker processes (their own requests go through
``proto.runtime.http1``) saves each about 0.1 s of start-up and its memory.

Contract:
- ``HttpServer(routes, ...)`` maps paths to handlers, coroutines that return a ``Reply``.
  ``start(address)`` listens on a TCP address (port 0 picks a free port; an empty host
  means every interface) or a Unix socket (mode 0600: only this account may connect) and
  returns the port bound (0 for a Unix socket); it raises ``OSError`` when it cannot listen.
  ``stop()`` stops listening, cancels the requests under way and waits for them. Idempotent.
- One request per connection: the server reads the request head, answers with
  ``Connection: close``, and closes. Answers: the handler's for GET and HEAD of a known path
  (HEAD without the body), 404 for other paths, 405 (with ``Allow``) for other methods, 400
  for a malformed request line, 431 for a head over ``MAX_HEAD`` bytes, and 500 (logged)
  when the handler raises.
- A client that does not send its head within ``read_timeout`` seconds (``READ_TIMEOUT``),
  or does not take the answer within ``write_timeout`` (``WRITE_TIMEOUT``), is disconnected.
  The query string is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Final

from proto.runtime.addresses import Address, UnixAddress
from proto.runtime.logs import get_logger

MAX_HEAD: Final = 16 * 1024
READ_TIMEOUT: Final = 10.0
WRITE_TIMEOUT: Final = 30.0
TEXT: Final = "text/plain; charset=utf-8"
_METHODS: Final = (b"GET", b"HEAD")

log = get_logger("metashard.ops")


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    content_type: str = TEXT


Handler = Callable[[], Awaitable[Reply]]


class HttpServer:
    def __init__(
        self,
        routes: Mapping[str, Handler],
        *,
        read_timeout: float = READ_TIMEOUT,
        write_timeout: float = WRITE_TIMEOUT,
    ) -> None:
        self._routes = dict(routes)
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._server: asyncio.AbstractServer | None = None
        self._requests: set[asyncio.Task[object]] = set()

    async def start(self, address: Address) -> int:
        """Listen on ``address``; the port bound (0 for a Unix socket)."""
        if isinstance(address, UnixAddress):
            self._server = await asyncio.start_unix_server(
                self._connection, path=address.path, limit=MAX_HEAD
            )
            os.chmod(address.path, 0o600)
            return 0
        self._server = await asyncio.start_server(
            self._connection, host=address.host or None, port=address.port, limit=MAX_HEAD
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop listening; cancel the requests under way and wait for them."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        requests = list(self._requests)
        for task in requests:
            task.cancel()
        await asyncio.gather(*requests, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._requests.add(task)
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self._read_timeout)
            except asyncio.LimitOverrunError:
                answer = _encode(Reply(431, b"request head too large\n"), body=True)
            except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
                return  # gone, or too slow: nothing to answer
            else:
                answer = await self._answer(head)
            writer.write(answer)
            with contextlib.suppress(ConnectionError, TimeoutError):
                await asyncio.wait_for(writer.drain(), self._write_timeout)
        finally:
            self._requests.discard(task)
            writer.close()

    async def _answer(self, head: bytes) -> bytes:
        parts = head[: head.find(b"\r\n")].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return _encode(Reply(400, b"malformed request line\n"), body=True)
        method, target, _ = parts
        if method not in _METHODS:
            return _encode(Reply(405, b"method not allowed\n"), body=True, allow=True)
        path = target.split(b"?", 1)[0].decode("latin-1")
        handler = self._routes.get(path)
        if handler is None:
            return _encode(Reply(404, b"not found\n"), body=method == b"GET")
        try:
            reply = await handler()
        except Exception as e:
            # the route, never the query string the client sent
            log.error("ops endpoint failed", path=path, error=repr(e))
            reply = Reply(500, b"internal error\n")
        return _encode(reply, body=method == b"GET")


def _encode(reply: Reply, *, body: bool, allow: bool = False) -> bytes:
    try:
        phrase = HTTPStatus(reply.status).phrase
    except ValueError:
        phrase = ""
    lines = [
        f"HTTP/1.1 {reply.status} {phrase}",
        f"Content-Type: {reply.content_type}",
        f"Content-Length: {len(reply.body)}",
        "Connection: close",
    ]
    if allow:
        lines.append("Allow: GET, HEAD")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + reply.body if body else head
