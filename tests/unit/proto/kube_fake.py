"""A scripted API server for testing ``proto.kube`` at the transport: it replays responses
recorded from a real API server (``../shared/conformance``) and records what it received.

- ``FakeApiServer.route(method, path, *replies, query=..., accept=...)`` scripts replies for
  matching requests; they are served in order and the last one repeats.
- ``FakeApiServer.replay(step)`` scripts a transcript step's recorded response for its request.
- ``Reply.chunks`` streams a body piece by piece (each piece flushed on its own), optionally
  stalling or dropping the connection mid-body, to exercise the watch decoder.
- ``serve(server, **session_options)`` runs the server and yields an open ``Session`` to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

from proto.kube.cluster import ClusterConfig
from proto.kube.session import Session


def load_transcript(shared_dir: Path, name: str) -> list[dict[str, Any]]:
    """The steps of one conformance transcript, e.g. ``"03-errors.json"``."""
    steps: list[dict[str, Any]] = orjson.loads((shared_dir / "conformance" / name).read_bytes())[
        "steps"
    ]
    return steps


def watch_line(event_type: str, obj: Mapping[str, Any]) -> bytes:
    """One watch event as the API server writes it."""
    return orjson.dumps({"type": event_type, "object": obj}) + b"\n"


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] | None = None  # stream these, flushing each
    stall: float = 0.0  # then wait this long before ending the body
    truncate: bool = False  # then drop the connection instead of ending the body

    @classmethod
    def json(cls, status: int, body: Any, **kwargs: Any) -> Reply:
        return cls(status=status, body=orjson.dumps(body), **kwargs)

    @classmethod
    def events(cls, *events: tuple[str, Mapping[str, Any]], **kwargs: Any) -> Reply:
        return cls(chunks=[watch_line(t, o) for t, o in events], **kwargs)

    @classmethod
    def recorded(cls, response: Mapping[str, Any]) -> Reply:
        """A transcript step's ``response``: a JSON body, a text body or watch events."""
        content_type = response["headers"].get("Content-Type", "application/json")
        if "events" in response:
            lines = [watch_line(e["type"], e["object"]) for e in response["events"]]
            return cls(status=response["status"], content_type=content_type, chunks=lines)
        if "bodyText" in response:
            body = response["bodyText"].encode()
        else:
            body = orjson.dumps(response["body"])
        return cls(status=response["status"], body=body, content_type=content_type)


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    query: dict[str, str]
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class _Route:
    method: str
    path: str
    query: Mapping[str, str] | None
    accept: str | None
    replies: list[Reply]

    def matches(self, request: web.Request) -> bool:
        if request.method != self.method or request.path != self.path:
            return False
        if self.query is not None and any(request.query.get(k) != v for k, v in self.query.items()):
            return False
        return self.accept is None or request.headers.get("Accept") == self.accept


class FakeApiServer:
    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.received: list[Received] = []
        self.peer_certificates: list[Any] = []  # with TLS: the client certificate of each request
        self._routes: list[_Route] = []
        self._ssl = ssl_context
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._server = TestServer(app)

    @property
    def url(self) -> str:
        return str(self._server.make_url("")).rstrip("/")

    def route(
        self,
        method: str,
        path: str,
        *replies: Reply,
        query: Mapping[str, str] | None = None,
        accept: str | None = None,
    ) -> None:
        """Later routes win over earlier ones for the same request."""
        self._routes.insert(0, _Route(method, path, query, accept, list(replies)))

    def replay(self, step: Mapping[str, Any]) -> None:
        request = step["request"]
        self.route(
            request["method"],
            request["path"],
            Reply.recorded(step["response"]),
            query=request.get("query") or None,
            accept=request["headers"].get("Accept"),
        )

    def requests_to(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    async def start(self) -> None:
        await self._server.start_server(ssl=self._ssl)

    async def close(self) -> None:
        await self._server.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self._ssl is not None and request.transport is not None:
            self.peer_certificates.append(request.transport.get_extra_info("peercert"))
        self.received.append(
            Received(
                request.method,
                request.path,
                dict(request.query),
                dict(request.headers),
                await request.read(),
            )
        )
        route = next((r for r in self._routes if r.matches(request)), None)
        if route is None:
            return web.Response(status=404, text="404 page not found\n")
        reply = route.replies.pop(0) if len(route.replies) > 1 else route.replies[0]
        headers = {"Content-Type": reply.content_type, **reply.headers}
        if reply.chunks is None:
            return web.Response(status=reply.status, body=reply.body, headers=headers)
        response = web.StreamResponse(status=reply.status, headers=headers)
        response.enable_chunked_encoding()
        await response.prepare(request)
        for chunk in reply.chunks:
            await response.write(chunk)
            await asyncio.sleep(0)
        if reply.stall:
            await asyncio.sleep(reply.stall)
        if reply.truncate:
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write_eof()
        return response


@contextlib.asynccontextmanager
async def serve(server: FakeApiServer, **session_options: Any) -> AsyncIterator[Session]:
    """Run ``server`` and yield an open ``Session`` to it (no rate limit unless asked)."""
    session_options.setdefault("qps", 0)
    await server.start()
    try:
        async with Session(ClusterConfig(server=server.url), **session_options) as session:
            yield session
    finally:
        await server.close()


class FakeClock:
    """A clock whose ``sleep`` advances time at once (and records the wait)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.time = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.time += seconds
        await asyncio.sleep(0)
