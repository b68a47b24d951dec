"""The lean HTTP/1.1 client: framing, keep-alive, stale connections, limits, proxy, failures.

Servers here are raw asyncio servers that write exactly the bytes a test needs, so framing and
connection handling are shown on the wire; the parser alone is checked against arbitrary
splits of the byte stream with Hypothesis. Every async test runs on both the stdlib event
loop and uvloop (the processes run uvloop, whose transports behave slightly differently; see
``conftest.py``).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
import pytest_asyncio
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from proto.runtime.http1 import (
    BodyTooLarge,
    HttpClient,
    HttpResponse,
    HttpTransportError,
    _Connection,
)
from tests.unit.proto.pki import Pki, server_tls


@dataclass
class Request:
    connection: int
    head: bytes
    body: bytes

    @property
    def line(self) -> bytes:
        return self.head.split(b"\r\n", 1)[0]

    def header(self, name: bytes) -> bytes | None:
        for line in self.head.split(b"\r\n")[1:]:
            key, _, value = line.partition(b":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None


# answer(request) -> bytes to write back, or None to close the connection without answering
Script = Callable[[Request], Awaitable[bytes | None]]


def reply(body: bytes = b"{}", *, status: bytes = b"200 OK", extra: bytes = b"") -> bytes:
    length = b"Content-Length: %d\r\n" % len(body)
    return b"HTTP/1.1 " + status + b"\r\n" + length + extra + b"\r\n" + body


@dataclass
class RawServer:
    """Reads requests (head and Content-Length body) and writes what the script says.

    The connection is closed after an answer that says ``Connection: close`` (unless the answer
    also carries ``X-Keep-Open``: a server that announces a close it does not do).
    """

    script: Script
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    open_now: int = 0
    most_open: int = 0
    url: str = ""
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        index = self.connections
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                request = Request(index, head, b"")
                length = request.header(b"content-length")
                if length:
                    request.body = await reader.readexactly(int(length))
                self.requests.append(request)
                answer = await self.script(request)
                if answer is None:
                    return
                writer.write(answer)
                await writer.drain()
                if b"connection: close" in answer.lower() and b"X-Keep-Open" not in answer:
                    return
        finally:
            self.open_now -= 1
            writer.close()


Serve = Callable[[Script], Awaitable[RawServer]]


@pytest_asyncio.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[asyncio.Server] = []

    async def start(script: Script) -> RawServer:
        raw = RawServer(script)
        server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
        servers.append(server)
        raw.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return raw

    yield start
    for server in servers:
        server.close()


def answer_with(data: bytes) -> Script:
    async def script(request: Request) -> bytes | None:
        return data

    return script


# --- framing -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_request_goes_out_as_http_1_1_with_host_length_and_headers(serve: Serve) -> None:
    server = await serve(answer_with(reply(b'{"ok":true}', extra=b"X-Thing: a\r\nX-Thing: b\r\n")))
    async with HttpClient() as client:
        response = await client.request(
            "POST",
            f"{server.url}/api/v1/namespaces/x/configmaps?dryRun=All",
            headers={"Content-Type": "application/json"},
            body=b'{"a":1}',
        )
    assert response == HttpResponse(
        200,
        {"content-length": "11", "x-thing": "a, b"},
        b'{"ok":true}',
    )
    (request,) = server.requests
    assert request.line == b"POST /api/v1/namespaces/x/configmaps?dryRun=All HTTP/1.1"
    assert request.header(b"host") == server.url.removeprefix("http://").encode()
    assert request.header(b"content-type") == b"application/json"
    assert request.body == b'{"a":1}'


@pytest.mark.asyncio
async def test_userinfo_is_sent_as_basic_auth_unless_the_request_has_an_authorization(
    serve: Serve,
) -> None:
    server = await serve(answer_with(reply()))
    host = server.url.removeprefix("http://")
    async with HttpClient() as client:
        await client.request("GET", f"http://alice:s3cr%40t@{host}/a")
        await client.request("GET", f"http://alice@{host}/b")
        await client.request("GET", f"http://alice:pw@{host}/c", headers={"authorization": "x"})
        await client.request("GET", f"http://{host}?next=a@b")  # no userinfo: '@' in the query
    sent = [(r.line, r.header(b"host"), r.header(b"authorization")) for r in server.requests]
    assert sent == [
        (b"GET /a HTTP/1.1", host.encode(), b"Basic " + base64.b64encode(b"alice:s3cr@t")),
        (b"GET /b HTTP/1.1", host.encode(), b"Basic " + base64.b64encode(b"alice:")),
        (b"GET /c HTTP/1.1", host.encode(), b"x"),
        (b"GET /?next=a@b HTTP/1.1", host.encode(), None),
    ]


@pytest.mark.asyncio
async def test_bodies_framed_by_chunks_by_close_and_none_for_head_and_204(serve: Serve) -> None:
    async def script(request: Request) -> bytes | None:
        path = request.line.split(b" ")[1]
        if path == b"/chunked":
            return (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"
            )
        if path == b"/close":
            return b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end"
        if path == b"/head":
            return b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"
        if path == b"/interim":
            return b"HTTP/1.1 100 Continue\r\n\r\n" + reply(b"after 100")
        return b"HTTP/1.1 204 No Content\r\n\r\n"

    server = await serve(script)
    async with HttpClient() as client:
        chunked = await client.request("GET", f"{server.url}/chunked")
        head = await client.request("HEAD", f"{server.url}/head")
        empty = await client.request("DELETE", f"{server.url}/nothing")
        interim = await client.request("GET", f"{server.url}/interim")
        closed = await client.request("GET", f"{server.url}/close")
        await client.request("GET", f"{server.url}/chunked")
    assert chunked.body == b"hello, world"
    assert (head.status, head.body) == (200, b"")
    assert (empty.status, empty.body) == (204, b"")
    assert (interim.status, interim.body) == (200, b"after 100")
    assert closed.body == b"until the end"
    assert server.connections == 2, "one keep-alive connection, then the closing one"


def _parse_in_pieces(data: bytes, cuts: list[int], *, head_only: bool = False) -> HttpResponse:
    """Feed ``data`` to a connection cut at ``cuts``; the response it completes."""

    class Transport(asyncio.Transport):
        def write(self, data: bytes | bytearray | memoryview) -> None:
            pass

        def close(self) -> None:
            pass

    async def run() -> HttpResponse:
        conn = _Connection()
        conn.connection_made(Transport())
        waiter = conn.exchange(b"GET / HTTP/1.1\r\n\r\n", head_only=head_only)
        edges = [0, *sorted(set(cuts)), len(data)]
        for start, end in itertools.pairwise(edges):
            if start < end:
                conn.data_received(data[start:end])
        conn.connection_lost(None)
        return await waiter

    return asyncio.run(run())


RESPONSES = [
    reply(b'{"kind":"ConfigMap"}'),
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.0 200 OK\r\n\r\nread until the connection closes",
]
BODIES = [
    b'{"kind":"ConfigMap"}',
    b"abc0123456789abcdef",
    b"{}",
    b"read until the connection closes",
]


@settings(max_examples=60, deadline=None)
@given(
    which=st.integers(min_value=0, max_value=len(RESPONSES) - 1),
    cuts=st.lists(st.integers(min_value=0, max_value=140), max_size=12),
)
def test_the_parser_gives_the_same_response_however_the_bytes_are_split(
    which: int, cuts: list[int]
) -> None:
    data = RESPONSES[which]
    response = _parse_in_pieces(data, [c for c in cuts if c < len(data)])
    assert response.body == BODIES[which]


@pytest.mark.parametrize(
    "data, message",
    [
        (b"HTTP/2 200 OK\r\n\r\n", "malformed HTTP status line"),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", "malformed HTTP status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed HTTP header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "closed before the response"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "bad chunk size",
        ),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000, "response head larger than"),
    ],
)
def test_malformed_responses_are_transport_errors(data: bytes, message: str) -> None:
    with pytest.raises(HttpTransportError, match=message):
        _parse_in_pieces(data, [])


# --- connections ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_keep_alive_reuses_one_connection_unless_the_server_says_close(serve: Serve) -> None:
    async def script(request: Request) -> bytes | None:
        if request.line.startswith(b"GET /close"):
            return reply(extra=b"Connection: close\r\nX-Keep-Open: 1\r\n")
        return reply()

    server = await serve(script)
    async with HttpClient() as client:
        for _ in range(5):
            await client.request("GET", f"{server.url}/a")
        await client.request("GET", f"{server.url}/close")
        await client.request("GET", f"{server.url}/a")
    assert [r.connection for r in server.requests] == [1, 1, 1, 1, 1, 1, 2]


@pytest.mark.parametrize("late", [False, True])
@pytest.mark.asyncio
async def test_bytes_beyond_the_response_make_the_connection_unusable(
    serve: Serve, late: bool
) -> None:
    async def script(request: Request) -> bytes | None:
        if request.connection == 1:
            if late:  # garbage arrives while the connection sits idle in the pool
                asyncio.get_running_loop().call_later(0.05, server.writers[0].write, b"garbage")
                return reply(b"first")
            return reply(b"first") + b"HTTP/1.1 200 OK\r\n"  # a second, unasked-for answer
        return reply(b"fresh")

    server = await serve(script)
    async with HttpClient() as client:
        first = await client.request("GET", f"{server.url}/a")
        await asyncio.sleep(0.15)
        second = await client.request("GET", f"{server.url}/b")
    assert (first.body, second.body) == (b"first", b"fresh")
    assert [r.connection for r in server.requests] == [1, 2]


@pytest.mark.asyncio
async def test_a_reused_connection_dropped_by_the_server_is_retried_once(serve: Serve) -> None:
    async def script(request: Request) -> bytes | None:
        if request.connection == 1 and len(server.requests) == 2:
            return None  # the idle connection is closed as the second request arrives
        return reply(b"%d" % request.connection)

    server = await serve(script)
    async with HttpClient() as client:
        first = await client.request("POST", f"{server.url}/hook", body=b"1")
        second = await client.request("POST", f"{server.url}/hook", body=b"2")
    assert (first.body, second.body) == (b"1", b"2")
    assert [(r.connection, r.body) for r in server.requests] == [(1, b"1"), (1, b"2"), (2, b"2")]


@pytest.mark.asyncio
async def test_a_new_connection_closed_unanswered_is_an_error_not_a_retry(
    serve: Serve,
) -> None:
    async def script(request: Request) -> bytes | None:
        return None

    server = await serve(script)
    async with HttpClient() as client:
        with pytest.raises(HttpTransportError, match="closed before the response ended"):
            await client.request("POST", f"{server.url}/hook", body=b"x")
    assert len(server.requests) == 1


async def _seconds_to_time_out(
    client: HttpClient, url: str, *, time_limit: float | None = None, cancel_after: float = 3
) -> float:
    """Seconds until ``GET url`` raised ``TimeoutError``: from its ``time_limit``, or from
    the caller's ``asyncio.timeout`` (``cancel_after``, also a guard: a time limit not kept
    fails the test instead of hanging it)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(cancel_after):
            await client.request("GET", url, time_limit=time_limit)
    return loop.time() - started


@pytest.mark.asyncio
@pytest.mark.parametrize("ended_by", ["time_limit", "cancellation"])
async def test_an_exchange_out_of_time_closes_its_connection(serve: Serve, ended_by: str) -> None:
    gate = asyncio.Event()

    async def script(request: Request) -> bytes | None:
        if request.line.startswith(b"GET /slow"):
            await gate.wait()
            return reply(b"late")
        return reply(b"fresh")

    server = await serve(script)
    limits = {"time_limit": 0.2} if ended_by == "time_limit" else {"cancel_after": 0.2}
    async with HttpClient() as client:
        assert 0.15 < await _seconds_to_time_out(client, f"{server.url}/slow", **limits) < 2
        gate.set()
        response = await client.request("GET", f"{server.url}/next", time_limit=5)
    assert response.body == b"fresh", "the late answer must not be read as the next one"
    assert [r.connection for r in server.requests] == [1, 2]


@pytest.mark.asyncio
async def test_a_time_limit_met_leaves_the_connection_reusable(serve: Serve) -> None:
    async def script(request: Request) -> bytes | None:
        if request.line.startswith(b"GET /slow"):
            await asyncio.sleep(0.4)
        return reply(request.line)

    server = await serve(script)
    async with HttpClient() as client:
        first = await client.request("GET", f"{server.url}/a", time_limit=0.2)
        # On the same connection, still running when the first request's time limit passes.
        second = await client.request("GET", f"{server.url}/slow", time_limit=5)
    assert (first.body, second.body) == (b"GET /a HTTP/1.1", b"GET /slow HTTP/1.1")
    assert [r.connection for r in server.requests] == [1, 1]


def slow_until(gate: asyncio.Event) -> Script:
    """Answers with the request line; ``GET /slow`` only once ``gate`` is set."""

    async def script(request: Request) -> bytes | None:
        if request.line.startswith(b"GET /slow"):
            await gate.wait()
        return reply(request.line)

    return script


@pytest.mark.asyncio
async def test_a_time_limit_covers_the_wait_for_a_connection(serve: Serve) -> None:
    gate = asyncio.Event()
    server = await serve(slow_until(gate))
    async with HttpClient(limit_per_origin=1) as client:
        slow = asyncio.ensure_future(client.request("GET", f"{server.url}/slow"))
        await asyncio.sleep(0.05)
        # The only connection stays busy.
        assert 0.15 < await _seconds_to_time_out(client, f"{server.url}/waits", time_limit=0.2) < 2
        gate.set()
        assert (await slow).body == b"GET /slow HTTP/1.1"
        after = await client.request("GET", f"{server.url}/after", time_limit=5)
    assert after.body == b"GET /after HTTP/1.1"
    assert [r.line for r in server.requests] == [b"GET /slow HTTP/1.1", b"GET /after HTTP/1.1"]


class Refused(Exception):
    pass


@pytest.mark.asyncio
async def test_ready_runs_once_a_connection_is_at_hand_and_may_refuse_the_send(
    serve: Serve,
) -> None:
    gate = asyncio.Event()
    server = await serve(slow_until(gate))
    allowed = True
    checked: list[int] = []

    def ready() -> None:
        checked.append(len(server.requests))  # the busy connection's request is in
        if not allowed:
            raise Refused

    async with HttpClient(limit_per_origin=1) as client:
        slow = asyncio.ensure_future(client.request("GET", f"{server.url}/slow"))
        await asyncio.sleep(0.05)
        waiting = asyncio.ensure_future(client.request("GET", f"{server.url}/w", ready=ready))
        await asyncio.sleep(0.05)
        assert checked == []  # not while the only connection is busy
        allowed = False
        gate.set()
        await slow
        with pytest.raises(Refused):
            await waiting
        allowed = True
        after = await client.request("GET", f"{server.url}/after", ready=ready)
    assert checked == [1, 1]
    assert after.body == b"GET /after HTTP/1.1"
    # Nothing of the refused request went out, and its connection was kept.
    assert [(r.connection, r.line) for r in server.requests] == [
        (1, b"GET /slow HTTP/1.1"),
        (1, b"GET /after HTTP/1.1"),
    ]


@pytest.mark.asyncio
async def test_ready_runs_again_before_a_resend_and_what_it_returns_after_each_send(
    serve: Serve,
) -> None:
    async def script(request: Request) -> bytes | None:
        if request.connection == 1 and len(server.requests) == 2:
            return None  # the idle connection is closed as the second request arrives
        return reply()

    server = await serve(script)
    calls: list[str] = []

    def ready(name: str) -> Callable[[], None]:
        calls.append(name)
        return lambda: calls.append(f"{name} sent")

    async with HttpClient() as client:
        await client.request("POST", f"{server.url}/a", body=b"1", ready=lambda: ready("a"))
        await client.request("POST", f"{server.url}/b", body=b"2", ready=lambda: ready("b"))
    assert calls == ["a", "a sent", "b", "b sent", "b", "b sent"]


@pytest.mark.asyncio
async def test_connections_per_origin_are_limited_and_waiters_are_served(serve: Serve) -> None:
    async def script(request: Request) -> bytes | None:
        await asyncio.sleep(0.02)
        return reply()

    server = await serve(script)
    async with HttpClient(limit_per_origin=2) as client:
        responses = await asyncio.gather(
            *(client.request("GET", f"{server.url}/{i}") for i in range(10))
        )
    assert [r.status for r in responses] == [200] * 10
    assert server.most_open == 2
    assert server.connections == 2


@pytest.mark.asyncio
async def test_a_connect_not_done_within_connect_timeout_is_a_transport_error() -> None:
    silent: list[asyncio.StreamWriter] = []  # accepts, never answers the TLS handshake
    server = await asyncio.start_server(lambda r, w: silent.append(w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with HttpClient(connect_timeout=0.3) as client:
            with pytest.raises(
                HttpTransportError,
                match=rf"cannot connect to 127\.0\.0\.1:{port} \(https\): not within 0\.3 s",
            ):
                await client.request("GET", f"https://127.0.0.1:{port}/")
    finally:
        server.close()
        for writer in silent:
            writer.close()


@pytest.mark.asyncio
async def test_connection_refused_is_a_transport_error() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    async with HttpClient() as client:
        with pytest.raises(HttpTransportError, match=f"cannot connect to 127.0.0.1:{port}"):
            await client.request("GET", f"http://127.0.0.1:{port}/")


@pytest.mark.parametrize(
    "headers, url, message",
    [
        (
            {"X-Evil": "a\r\nInjected: yes"},
            "http://127.0.0.1:1/",
            "CR or LF in the value of HTTP header 'X-Evil'",
        ),
        ({"X-Evil\nInjected": "yes"}, "http://127.0.0.1:1/", "CR or LF in an HTTP header name"),
        ({}, "http://127.0.0.1:1/path\r\nInjected: yes", "CR or LF in the request target"),
    ],
)
@pytest.mark.asyncio
async def test_cr_or_lf_in_headers_or_target_is_refused_before_sending(
    headers: dict[str, str], url: str, message: str
) -> None:
    async with HttpClient() as client:
        with pytest.raises(ValueError) as info:
            await client.request("GET", url, headers=headers)
    assert str(info.value) == message  # the value, perhaps a credential, is not quoted


@pytest.mark.parametrize("url", ["ftp://example.com/", "/relative/path", "http:///no-host"])
@pytest.mark.asyncio
async def test_only_absolute_http_urls_are_accepted(url: str) -> None:
    async with HttpClient() as client:
        with pytest.raises(ValueError):
            await client.request("GET", url)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("alice:pw@hook/sync", "not an absolute URL: '[REDACTED]@hook/sync'"),
        ("ftp://alice:pw@hook/sync", "not an absolute http(s) URL: ftp://hook"),
    ],
)
@pytest.mark.asyncio
async def test_a_refused_url_is_named_without_its_userinfo(url: str, message: str) -> None:
    async with HttpClient() as client:
        with pytest.raises(ValueError) as info:
            await client.request("GET", url)
    assert str(info.value) == message


def test_a_proxy_other_than_http_is_refused_without_its_credentials() -> None:
    with pytest.raises(ValueError) as info:
        HttpClient(proxy="https://puser:pPASSw0rd@proxy.example:3128")
    assert str(info.value) == (
        "only http:// proxies are supported, got 'https://[REDACTED]@proxy.example:3128'"
    )


# --- body size limit ---------------------------------------------------------------------------

_BIG = b"x" * 5000


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "answer",
    [
        reply(_BIG),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"3e8\r\n" + b"y" * 1000 + b"\r\n" for _ in range(5))
        + b"0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + _BIG,
    ],
    ids=["content-length", "chunked", "until-close"],
)
async def test_a_body_over_max_body_is_refused_and_its_connection_closed(
    serve: Serve, answer: bytes
) -> None:
    server = await serve(answer_with(answer))
    async with HttpClient() as client:
        with pytest.raises(BodyTooLarge, match="larger than 4096 bytes"):
            await client.request("GET", f"{server.url}/big", max_body=4096)
        response = await client.request("GET", f"{server.url}/big", max_body=5000)
    assert response.body == _BIG.replace(b"x", b"y") if b"chunked" in answer else _BIG
    assert server.connections == 2  # the refused one was not reused


@pytest.mark.asyncio
async def test_a_declared_length_over_the_limit_fails_before_the_body_arrives(
    serve: Serve,
) -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\npartial"
    server = await serve(answer_with(answer))
    async with HttpClient() as client, asyncio.timeout(2):  # the body never comes
        with pytest.raises(BodyTooLarge):
            await client.request("GET", f"{server.url}/x", max_body=100)


@pytest.mark.asyncio
async def test_each_request_may_bring_its_own_tls_context(pki: Pki, tls_site: str) -> None:
    trusted = ssl.create_default_context(cafile=pki.ca)
    async with HttpClient() as client:  # the default context does not know the private CA
        response = await client.request("GET", f"{tls_site}/a", ssl_context=trusted)
        assert response.body == b"secret /a"
        with pytest.raises(HttpTransportError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.request("GET", f"{tls_site}/b")  # never the pooled trusted connection
        client.discard(trusted)
        assert all(key[1] is not trusted for key in client._pools)
        response = await client.request("GET", f"{tls_site}/c", ssl_context=trusted)
        assert response.body == b"secret /c"


# --- TLS and proxies ----------------------------------------------------------------------------


@pytest_asyncio.fixture
async def tls_site(pki: Pki) -> AsyncIterator[str]:
    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=b"secret " + request.path.encode())

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(
        runner, "127.0.0.1", 0, ssl_context=server_tls(pki, require_client_cert=False)
    )
    await site.start()
    yield f"https://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    await runner.cleanup()


@pytest.mark.asyncio
async def test_https_verifies_the_server_against_the_given_ca(pki: Pki, tls_site: str) -> None:
    async with HttpClient(ssl_context=ssl.create_default_context(cafile=pki.ca)) as client:
        response = await client.request("GET", f"{tls_site}/x")
    assert response.body == b"secret /x"
    async with HttpClient(ssl_context=ssl.create_default_context()) as client:
        with pytest.raises(HttpTransportError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.request("GET", f"{tls_site}/x")


@pytest.mark.asyncio
async def test_https_through_a_proxy_tunnels_with_connect(pki: Pki, tls_site: str) -> None:
    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head)
        host, _, port = head.split(b" ")[1].decode().rpartition(":")
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
            dst.close()

        await asyncio.gather(
            pipe(reader, upstream_writer), pipe(upstream_reader, writer), return_exceptions=True
        )

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    proxy_url = f"http://user:p%40ss@127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        context = ssl.create_default_context(cafile=pki.ca)
        async with HttpClient(ssl_context=context, proxy=proxy_url) as client:
            first = await client.request("GET", f"{tls_site}/one")
            second = await client.request("GET", f"{tls_site}/two")
    finally:
        server.close()
    assert (first.body, second.body) == (b"secret /one", b"secret /two")
    (connect,) = seen  # the tunnel is kept alive and reused
    authority = tls_site.removeprefix("https://").encode()
    assert connect.startswith(b"CONNECT " + authority + b" HTTP/1.1\r\n")
    assert b"Proxy-Authorization: Basic " + base64.b64encode(b"user:p@ss") in connect


@pytest.mark.asyncio
async def test_plain_http_through_a_proxy_uses_the_absolute_form(serve: Serve) -> None:
    proxy = await serve(answer_with(reply(b"via proxy")))
    async with HttpClient(proxy=proxy.url) as client:
        response = await client.request("GET", "http://hooks.example:8080/sync?x=1")
    assert response.body == b"via proxy"
    (request,) = proxy.requests
    assert request.line == b"GET http://hooks.example:8080/sync?x=1 HTTP/1.1"
    assert request.header(b"host") == b"hooks.example:8080"
