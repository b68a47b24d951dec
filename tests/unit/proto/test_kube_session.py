"""Session: headers, rate limiting, Retry-After retries, token re-reads, transport errors."""

from __future__ import annotations

import asyncio
import base64
import socket
import traceback
from pathlib import Path

import pytest

from proto.kube import errors
from proto.kube.auth import Authorization, read_token_file
from proto.kube.cluster import ClusterConfig
from proto.kube.session import USER_AGENT, Session, TokenBucket
from tests.unit.proto.kube_fake import FakeApiServer, FakeClock, Reply, serve

PATH = "/api/v1/namespaces/default/configmaps/c"
OK = Reply.json(200, {"kind": "ConfigMap", "metadata": {"name": "c"}})
THROTTLED = Reply.json(
    429,
    {"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": "slow down"},
    headers={"Retry-After": "2"},
)


def unreachable(session: Session) -> str | None:
    """Read anew each time: mypy keeps a narrowed attribute (mypy#11969)."""
    return session.unreachable


class Attempts:
    """A ``RequestMetrics`` that records what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int | None]] = []
        self.hosts: set[str] = set()
        self.waits: list[float] = []

    def attempted(self, *, host: str, method: str, status: int | None, seconds: float) -> None:
        self.calls.append((method, status))
        self.hosts.add(host)

    def throttled(self, *, host: str, method: str, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.mark.asyncio
async def test_requests_carry_user_agent_accept_and_authorization() -> None:
    server = FakeApiServer()
    server.route("GET", PATH, OK)
    await server.start()
    config = ClusterConfig(server=server.url, authorization="Bearer abc")
    try:
        async with Session(config, qps=0) as session:
            response = await session.request("GET", PATH)
    finally:
        await server.close()
    assert response.status == 200 and response.json()["metadata"]["name"] == "c"
    headers = server.received[0].headers
    assert headers["User-Agent"] == USER_AGENT and USER_AGENT.startswith("metashard/")
    assert headers["Accept"] == "application/json"
    assert headers["Authorization"] == "Bearer abc"


def test_token_bucket_allows_a_burst_then_paces_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(5.0, 10, clock=clock)
    waits = [bucket.reserve() for _ in range(13)]
    assert waits[:10] == [0.0] * 10
    assert waits[10:] == pytest.approx([0.2, 0.4, 0.6])
    clock.time += 10.0  # refills, but never beyond the burst
    assert [bucket.reserve() for _ in range(10)] == [0.0] * 10
    assert bucket.reserve() == pytest.approx(0.2)


def test_token_bucket_with_qps_zero_never_waits_and_rejects_a_zero_burst() -> None:
    bucket = TokenBucket(0, 0, clock=FakeClock())
    assert {bucket.reserve() for _ in range(1000)} == {0.0}
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(5.0, 0)


@pytest.mark.asyncio
async def test_every_request_is_paced_by_the_bucket() -> None:
    clock = FakeClock()
    server = FakeApiServer()
    server.route("GET", PATH, OK)
    async with serve(server, qps=5.0, burst=10, clock=clock) as session:
        started = clock.time
        for _ in range(20):
            await session.request("GET", PATH)
    assert len(server.received) == 20
    assert clock.sleeps == pytest.approx([0.2] * 10)
    assert clock.time - started == pytest.approx(2.0)


@pytest.mark.asyncio
async def test_429_with_retry_after_is_retried_then_succeeds() -> None:
    clock = FakeClock()
    metrics = Attempts()
    server = FakeApiServer()
    server.route("GET", PATH, THROTTLED, THROTTLED, OK)
    async with serve(server, clock=clock, metrics=metrics) as session:
        response = await session.request("GET", PATH)
    assert response.status == 200
    assert clock.sleeps == [2.0, 2.0]
    assert metrics.calls == [("GET", 429), ("GET", 429), ("GET", 200)]


class Stale(Exception):
    pass


@pytest.mark.asyncio
async def test_ready_is_asked_before_every_attempt_and_may_stop_a_retry_unsent() -> None:
    clock = FakeClock()
    metrics = Attempts()
    asked: list[float] = []
    server = FakeApiServer()
    server.route("PUT", PATH, THROTTLED, OK)

    def ready() -> None:
        asked.append(clock.time)
        if len(asked) > 1:  # the retry, 2 s later: no longer allowed
            raise Stale

    async with serve(server, clock=clock, metrics=metrics) as session:
        with pytest.raises(Stale):
            await session.request("PUT", PATH, body=b"{}", ready=ready)
    assert len(server.received) == 1  # the retry never went out
    assert metrics.calls == [("PUT", 429)]  # and is not counted
    assert asked[1] - asked[0] == pytest.approx(2.0)


@pytest.mark.asyncio
async def test_429_retries_are_exhausted_after_ten() -> None:
    clock = FakeClock()
    server = FakeApiServer()
    server.route("GET", PATH, THROTTLED)
    async with serve(server, clock=clock) as session:
        with pytest.raises(errors.TooManyRequests) as caught:
            await session.request("GET", PATH)
    assert caught.value.retry_after == 2.0
    assert len(server.received) == 11  # the first attempt and 10 retries, like client-go
    assert clock.sleeps == [2.0] * 10


@pytest.mark.asyncio
async def test_5xx_is_retried_only_with_retry_after() -> None:
    clock = FakeClock()
    unavailable = {"kind": "Status", "code": 503, "reason": "ServiceUnavailable", "message": "x"}
    server = FakeApiServer()
    server.route("GET", PATH, Reply.json(503, unavailable, headers={"Retry-After": "1"}), OK)
    server.route("GET", "/api/v1/other", Reply.json(503, unavailable))
    async with serve(server, clock=clock) as session:
        assert (await session.request("GET", PATH)).status == 200
        with pytest.raises(errors.ServerError):
            await session.request("GET", "/api/v1/other")
    assert len(server.requests_to("/api/v1/other")) == 1
    assert clock.sleeps == [1.0]


@pytest.mark.asyncio
async def test_429_without_retry_after_is_not_retried() -> None:
    server = FakeApiServer()
    server.route("GET", PATH, Reply.json(429, {"kind": "Status", "code": 429}))
    async with serve(server, clock=FakeClock()) as session:
        with pytest.raises(errors.TooManyRequests) as caught:
            await session.request("GET", PATH)
    assert caught.value.retry_after is None
    assert len(server.received) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("value", ["inf", "nan", "1e12", "3.5", "0x10", "-1", "1_0", "9" * 20])
async def test_a_retry_after_that_is_no_integer_of_seconds_is_ignored(value: str) -> None:
    clock = FakeClock()
    server = FakeApiServer()
    server.route("GET", PATH, Reply.json(429, {"kind": "Status"}, headers={"Retry-After": value}))
    async with serve(server, clock=clock) as session:
        with pytest.raises(errors.TooManyRequests) as caught:
            await session.request("GET", PATH)
    assert caught.value.retry_after is None  # as client-go's strconv.Atoi: not retried
    assert len(server.received) == 1 and clock.sleeps == []


@pytest.mark.asyncio
@pytest.mark.parametrize(("value", "seconds"), [("0", 0.0), ("+3", 3.0), ("007", 7.0)])
async def test_a_retry_after_of_whole_seconds_is_waited(value: str, seconds: float) -> None:
    clock = FakeClock()
    server = FakeApiServer()
    busy = Reply.json(429, {"kind": "Status"}, headers={"Retry-After": value})
    server.route("GET", PATH, busy, OK)
    async with serve(server, clock=clock) as session:
        assert (await session.request("GET", PATH)).status == 200
    assert clock.sleeps == [seconds]


@pytest.mark.asyncio
async def test_token_file_is_re_read_every_minute(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    clock = FakeClock()
    server = FakeApiServer()
    server.route("GET", PATH, OK)
    await server.start()
    config = ClusterConfig(server=server.url, token_file=str(token))
    try:
        async with Session(config, qps=0, clock=clock) as session:
            await session.request("GET", PATH)
            token.write_text("second\n")
            clock.time += 59.0
            await session.request("GET", PATH)
            clock.time += 1.0
            await session.request("GET", PATH)
    finally:
        await server.close()
    sent = [r.headers["Authorization"] for r in server.received]
    assert sent == ["Bearer first", "Bearer first", "Bearer second"]


@pytest.mark.asyncio
async def test_a_401_re_reads_the_token_and_retries_once(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old")
    unauthorized = Reply.json(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
    server = FakeApiServer()
    server.route("GET", PATH, unauthorized, OK)
    server.route("GET", "/api/v1/denied", unauthorized)
    await server.start()
    config = ClusterConfig(server=server.url, token_file=str(token))
    try:
        async with Session(config, qps=0, clock=FakeClock()) as session:
            with pytest.raises(errors.NotFound):  # reads "old"
                await session.request("GET", "/api/v1/namespaces")
            token.write_text("rotated")
            assert (await session.request("GET", PATH)).status == 200
            with pytest.raises(errors.Unauthorized):
                await session.request("GET", "/api/v1/denied")
    finally:
        await server.close()
    assert [r.headers["Authorization"] for r in server.requests_to(PATH)] == [
        "Bearer old",
        "Bearer rotated",
    ]
    assert len(server.requests_to("/api/v1/denied")) == 2


@pytest.mark.asyncio
async def test_a_failed_token_re_read_keeps_the_last_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("kept")
    clock = FakeClock()
    auth = Authorization(source=lambda: read_token_file(str(token)), clock=clock)
    assert await auth.header() == "Bearer kept"
    token.unlink()
    clock.time += 60.0
    assert await auth.header() == "Bearer kept"
    token.write_text("new")
    clock.time += 60.0
    assert await auth.header() == "Bearer new"


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["request", "stream"])
async def test_a_token_with_a_line_break_is_a_config_error_that_does_not_quote_it(
    mode: str,
) -> None:
    server = FakeApiServer()
    server.route("GET", PATH, OK)
    await server.start()
    config = ClusterConfig(
        server=server.url, authorization="Bearer tok3nPART1\ntok3nPART2", source="kubeconfig k"
    )
    try:
        async with Session(config, qps=0) as session:
            with pytest.raises(errors.ConfigError) as info:
                if mode == "request":
                    await session.request("GET", PATH)
                else:
                    async with session.stream("GET", PATH):
                        pass
    finally:
        await server.close()
    assert str(info.value) == (
        f"GET {PATH}: the credentials of kubeconfig k hold a line break,"
        " which cannot go into the Authorization header"
    )
    assert server.received == []


@pytest.mark.asyncio
async def test_connection_refused_is_a_transport_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    metrics = Attempts()
    config = ClusterConfig(server=f"http://127.0.0.1:{port}")
    async with Session(config, qps=0, metrics=metrics) as s:
        assert unreachable(s) is None
        with pytest.raises(errors.TransportError, match="GET /api") as caught:
            await s.request("GET", "/api")
        assert unreachable(s) == str(caught.value)
    assert metrics.calls == [("GET", None)]
    assert metrics.hosts == {f"127.0.0.1:{port}"}


@pytest.mark.asyncio
async def test_the_first_answer_ends_unreachable() -> None:
    server = FakeApiServer()
    server.route("GET", PATH, Reply(status=500, body=b"boom"))
    async with serve(server) as session:
        session.unreachable = "GET /api: refused"  # as a failed attempt left it
        with pytest.raises(errors.ServerError):
            await session.request("GET", PATH)
        assert unreachable(session) is None


@pytest.mark.asyncio
async def test_the_rate_limit_wait_is_reported_only_with_a_limit() -> None:
    clock = FakeClock()
    metrics = Attempts()
    server = FakeApiServer()
    server.route("GET", PATH, OK)
    async with serve(server, clock=clock, qps=1, burst=1, metrics=metrics) as session:
        await session.request("GET", PATH)
        await session.request("GET", PATH)
    assert metrics.waits == [0.0, pytest.approx(1.0)]
    unlimited = Attempts()
    other = FakeApiServer()
    other.route("GET", PATH, OK)
    async with serve(other, metrics=unlimited) as session:
        await session.request("GET", PATH)
    assert unlimited.waits == [] and unlimited.calls == [("GET", 200)]


@pytest.mark.asyncio
async def test_a_stream_refused_by_the_proxy_is_reported_without_the_proxy_credentials() -> None:
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    proxy = await asyncio.start_server(refuse, "127.0.0.1", 0)
    port = proxy.sockets[0].getsockname()[1]
    config = ClusterConfig(
        server="https://127.0.0.1:6443", proxy=f"http://puser:pPASSw0rd@127.0.0.1:{port}"
    )
    try:
        async with Session(config, qps=0) as session:
            with pytest.raises(errors.TransportError) as info:
                async with session.stream("GET", "/api", params={"watch": "true"}):
                    pass
    finally:
        proxy.close()
        await proxy.wait_closed()
    assert str(info.value) == (
        "GET /api: ClientHttpProxyError: 407 Proxy Authentication Required"
        f" from http://127.0.0.1:{port}"
    )
    shown = "".join(traceback.format_exception(info.value))
    assert "pPASSw0rd" not in shown
    assert base64.b64encode(b"puser:pPASSw0rd").decode() not in shown


@pytest.mark.asyncio
async def test_request_outside_the_context_manager_is_refused() -> None:
    session = Session(ClusterConfig(server="http://127.0.0.1:1"))
    with pytest.raises(RuntimeError, match="not open"):
        await session.request("GET", "/api")


@pytest.mark.asyncio
async def test_query_parameters_and_body_are_sent_as_given() -> None:
    server = FakeApiServer()
    server.route("POST", "/api/v1/namespaces/a/configmaps", Reply.json(201, {"kind": "X"}))
    async with serve(server) as session:
        await session.request(
            "POST",
            "/api/v1/namespaces/a/configmaps",
            params={"labelSelector": "app in (web,db)", "dryRun": "All"},
            body=b'{"a":1}',
            content_type="application/json",
        )
    received = server.received[0]
    assert received.query == {"labelSelector": "app in (web,db)", "dryRun": "All"}
    assert received.body == b'{"a":1}'
    assert received.headers["Content-Type"] == "application/json"


@pytest.mark.asyncio
async def test_a_body_that_is_not_json_is_a_stream_error() -> None:
    server = FakeApiServer()
    server.route("GET", PATH, Reply(status=200, body=b"<html>proxy login</html>"))
    async with serve(server) as session:
        response = await session.request("GET", PATH)
        with pytest.raises(errors.StreamError, match="not JSON"):
            response.json()


@pytest.mark.asyncio
async def test_other_errors_are_not_retried_even_with_retry_after() -> None:
    conflict = {"kind": "Status", "code": 409, "reason": "Conflict", "message": "stale"}
    server = FakeApiServer()
    server.route("PUT", PATH, Reply.json(409, conflict, headers={"Retry-After": "1"}))
    clock = FakeClock()
    async with serve(server, clock=clock) as session:
        with pytest.raises(errors.Conflict):
            await session.request("PUT", PATH, body=b"{}")
    assert len(server.received) == 1 and clock.sleeps == []
