"""The webhook executor against a local aiohttp server: statuses, Retry-After, failures, metrics."""

from __future__ import annotations

import asyncio
import calendar
import socket
from collections.abc import AsyncIterator, Callable
from email.utils import formatdate

import pytest
import pytest_asyncio
from aiohttp import web
from prometheus_client import CollectorRegistry

from proto.api.controllers import HookName, Webhook, parse_webhook
from proto.api.endpoints import ETag
from proto.api.errors import InvalidControllerError
from proto.api.fields import Fields
from proto.hooks.attempt import ATTEMPT
from proto.hooks.client import BODY_EXCERPT_BYTES, HookClient, HookEndpoint, parse_retry_after
from proto.hooks.errors import HookError, HookRetryAfter, HookStatusError, HookTransportError
from proto.hooks.metrics import PrometheusHookMetrics
from proto.runtime.http1 import HttpClient

NOW = float(calendar.timegm((2015, 10, 21, 7, 28, 0)))  # Wed, 21 Oct 2015 07:28:00 GMT


class Hooks:
    """A hook server whose handlers behave as the path says."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, bytes]] = []
        self.headers: list[dict[str, str]] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.app = web.Application()
        self.app.router.add_post("/{behaviour}", self.handle)
        self.base = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        behaviour = request.match_info["behaviour"]
        self.requests.append((behaviour, request.headers.get("Content-Type", ""), body))
        self.headers.append(dict(request.headers))
        if behaviour == "ok":
            return web.Response(body=b'{"echo": ' + body + b"}")
        if behaviour == "etag":
            if request.headers.get("If-None-Match") == '"v1"':
                return web.Response(status=304)
            return web.Response(body=b"{}", headers={"ETag": '"v1"'})
        if behaviour == "fail":
            return web.Response(status=500, body=b"boom " + b"x" * 5000)
        if behaviour == "created":
            return web.Response(status=201, body=b"{}")
        if behaviour == "busy-seconds":
            return web.Response(status=429, headers={"Retry-After": "7"})
        if behaviour == "busy-date":
            return web.Response(
                status=429, headers={"Retry-After": formatdate(NOW + 30, usegmt=True)}
            )
        if behaviour == "busy-garbage":
            return web.Response(status=429, headers={"Retry-After": "soon"})
        if behaviour == "busy":
            return web.Response(status=429)
        if behaviour == "slow":
            await asyncio.sleep(30)
        if behaviour == "held":
            self.entered.set()
            await self.release.wait()
            return web.Response(body=b"{}")
        return web.Response(status=404)


@pytest_asyncio.fixture
async def hooks() -> AsyncIterator[Hooks]:
    server = Hooks()
    runner = web.AppRunner(server.app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.base = f"http://127.0.0.1:{port}"
    yield server
    server.release.set()
    await runner.cleanup()


@pytest_asyncio.fixture
async def session() -> AsyncIterator[HttpClient]:
    async with HttpClient() as shared:
        yield shared


def endpoint(
    url: str,
    *,
    timeout: float = 5.0,
    name: str = "cc",
    hook: HookName = HookName.SYNC,
    etag: bool = False,
) -> HookEndpoint:
    return HookEndpoint(
        hook=hook,
        webhook=Webhook(
            url=url, timeout_seconds=timeout, etag=ETag(enabled=True) if etag else None
        ),
        controller_type="CompositeController",
        controller_name=name,
    )


@pytest.mark.asyncio
async def test_200_returns_the_body(hooks: Hooks, session: HttpClient) -> None:
    client = HookClient(session)
    answer = await client.call(endpoint(f"{hooks.base}/ok"), b'{"parent": {}}')
    assert answer == b'{"echo": {"parent": {}}}'
    assert hooks.requests == [("ok", "application/json", b'{"parent": {}}')]


@pytest.mark.asyncio
async def test_extra_headers_go_with_the_request_but_not_over_the_clients_own(
    hooks: Hooks, session: HttpClient
) -> None:
    client = HookClient(session)
    extra = {"X-Metashard-Epoch": "3", "Content-Type": "text/plain"}
    await client.call(endpoint(f"{hooks.base}/ok"), b"{}", headers=extra)
    (sent,) = hooks.headers
    assert sent["X-Metashard-Epoch"] == "3"
    assert sent["Content-Type"] == "application/json"


class Refused(Exception):
    pass


class Gate:
    """A ``HookGate`` that records the checks it is asked for and refuses as told."""

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks
        self.asked: list[tuple[str, str, int]] = []  # hook, attempt, requests received before
        self.refuse_send = False
        self.refuse_answer = False

    def hook_call(self, hook: str, attempt: str) -> Callable[[], None]:
        def check() -> None:
            self.asked.append((hook, attempt, len(self.hooks.requests)))
            if self.refuse_send:
                raise Refused

        return check

    def answered(self) -> None:
        if self.refuse_answer:
            raise Refused


@pytest.mark.asyncio
async def test_the_gate_may_stop_a_call_unsent_and_uncounted(
    hooks: Hooks, session: HttpClient
) -> None:
    registry = CollectorRegistry()
    gate = Gate(hooks)
    client = HookClient(session, metrics=PrometheusHookMetrics(registry), gate=gate)
    ok = endpoint(f"{hooks.base}/ok")
    await client.call(ok, b"{}", headers={ATTEMPT: "w/1/7"})
    gate.refuse_send = True
    with pytest.raises(Refused):
        await client.call(ok, b"{}")
    assert gate.asked == [("sync", "w/1/7", 0), ("sync", "", 1)]  # asked before each send
    assert len(hooks.requests) == 1
    labels = {
        "url": ok.webhook.url,
        "controller_name": "cc",
        "controller_type": "CompositeController",
    }
    total = "metacontroller_sync_requests_total"
    assert sample(registry, total, code="200", method="post", **labels) == 1
    assert sample(registry, "metacontroller_sync_in_flight_requests", **labels) == 0


@pytest.mark.asyncio
async def test_an_answer_the_gate_refuses_is_counted_and_not_cached(
    hooks: Hooks, session: HttpClient
) -> None:
    registry = CollectorRegistry()
    gate = Gate(hooks)
    gate.refuse_answer = True
    client = HookClient(session, metrics=PrometheusHookMetrics(registry), gate=gate)
    cached = endpoint(f"{hooks.base}/etag", etag=True)
    with pytest.raises(Refused):
        await client.call(cached, b"{}", cache_key="p")
    gate.refuse_answer = False
    await client.call(cached, b"{}", cache_key="p")
    await client.call(cached, b"{}", cache_key="p")
    assert [h.get("If-None-Match") for h in hooks.headers] == [None, None, '"v1"']
    labels = {
        "url": cached.webhook.url,
        "controller_name": "cc",
        "controller_type": "CompositeController",
    }
    total = "metacontroller_sync_requests_total"
    assert sample(registry, total, code="200", method="post", **labels) == 2
    assert sample(registry, total, code="304", method="post", **labels) == 1


@pytest.mark.asyncio
async def test_other_statuses_fail_with_a_body_excerpt(hooks: Hooks, session: HttpClient) -> None:
    client = HookClient(session)
    with pytest.raises(HookStatusError) as info:
        await client.call(endpoint(f"{hooks.base}/fail"), b"{}")
    error = info.value
    assert error.status == 500
    assert error.body.startswith("boom xxx") and len(error.body) == BODY_EXCERPT_BYTES
    assert str(error).startswith("unsupported status code: 500 body: boom x")
    assert error.url == f"{hooks.base}/fail"
    with pytest.raises(HookStatusError) as created:
        await client.call(endpoint(f"{hooks.base}/created"), b"{}")
    assert created.value.status == 201  # only 200 is success


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("behaviour", "delay"),
    [("busy-seconds", 7.0), ("busy-date", 30.0), ("busy-garbage", 0.0), ("busy", 0.0)],
)
async def test_429_asks_for_a_delay(
    hooks: Hooks, session: HttpClient, behaviour: str, delay: float
) -> None:
    client = HookClient(session, wall_clock=lambda: NOW)
    with pytest.raises(HookRetryAfter) as info:
        await client.call(endpoint(f"{hooks.base}/{behaviour}"), b"{}")
    assert info.value.delay == delay
    assert isinstance(info.value, HookError)


@pytest.mark.asyncio
async def test_timeout(hooks: Hooks, session: HttpClient) -> None:
    client = HookClient(session)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(HookTransportError) as info:
        await client.call(endpoint(f"{hooks.base}/slow", timeout=0.2), b"{}")
    assert info.value.timed_out
    assert "within 0.2s" in str(info.value)
    assert loop.time() - started < 10  # far below the handler's 30 s


@pytest.mark.asyncio
async def test_connection_refused(session: HttpClient) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = HookClient(session)
    with pytest.raises(HookTransportError) as info:
        await client.call(endpoint(f"http://127.0.0.1:{port}/sync"), b"{}")
    assert not info.value.timed_out
    assert str(info.value).startswith("http error:")


@pytest.mark.asyncio
async def test_url_from_service(hooks: Hooks, session: HttpClient) -> None:
    # <protocol>://<name>.<namespace>:<port><path>: name "127.0" + namespace "0.1" is 127.0.0.1
    port = int(hooks.base.rsplit(":", 1)[1])
    webhook = parse_webhook(
        Fields(
            {"service": {"name": "127.0", "namespace": "0.1", "port": port}, "path": "/ok"},
            "webhook",
            InvalidControllerError,
        )
    )
    assert webhook.url == f"http://127.0.0.1:{port}/ok"
    answer = await HookClient(session).call(
        HookEndpoint(HookName.SYNC, webhook, "CompositeController", "cc"), b"1"
    )
    assert answer == b'{"echo": 1}'


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


@pytest.mark.asyncio
async def test_metrics(hooks: Hooks, session: HttpClient) -> None:
    registry = CollectorRegistry()
    metrics = PrometheusHookMetrics(registry)
    ticks = iter([0.0, 0.25, 1.0, 1.5, 2.0, 2.75, 10.0, 10.0, 20.0, 20.0])
    client = HookClient(session, metrics=metrics, clock=lambda: next(ticks))
    ok, fail = endpoint(f"{hooks.base}/ok"), endpoint(f"{hooks.base}/fail")
    await client.call(ok, b"{}")
    await client.call(ok, b"{}")
    with pytest.raises(HookStatusError):
        await client.call(fail, b"{}")
    labels = {
        "url": ok.webhook.url,
        "controller_name": "cc",
        "controller_type": "CompositeController",
    }
    fail_labels = {**labels, "url": fail.webhook.url}
    total = "metacontroller_sync_requests_total"
    assert sample(registry, total, code="200", method="post", **labels) == 2
    assert sample(registry, total, code="500", method="post", **fail_labels) == 1
    duration = "metacontroller_sync_request_duration_histogram_seconds"
    assert sample(registry, f"{duration}_count", method="post", **labels) == 2
    assert sample(registry, f"{duration}_sum", method="post", **labels) == 0.75
    assert sample(registry, f"{duration}_bucket", le="0.25", method="post", **labels) == 1
    assert sample(registry, f"{duration}_sum", method="post", **fail_labels) == 0.75
    assert sample(registry, "metacontroller_sync_in_flight_requests", **labels) == 0
    # other hooks have their own families
    assert (
        sample(
            registry, "metacontroller_finalize_requests_total", code="200", method="post", **labels
        )
        is None
    )

    # calls without an HTTP answer count by why (tests.unit.proto.test_hook_metrics), have no
    # latency, and leave the in-flight gauge balanced
    refused = endpoint("http://127.0.0.1:1/sync")
    with pytest.raises(HookTransportError):
        await client.call(refused, b"{}")
    refused_labels = {**labels, "url": refused.webhook.url}
    assert sample(registry, total, code="connect", method="post", **refused_labels) == 1
    assert sample(registry, "metacontroller_sync_in_flight_requests", **refused_labels) == 0
    assert sample(registry, f"{duration}_count", method="post", **refused_labels) is None


@pytest.mark.asyncio
async def test_in_flight_and_forget(hooks: Hooks, session: HttpClient) -> None:
    registry = CollectorRegistry()
    metrics = PrometheusHookMetrics(registry)
    client = HookClient(session, metrics=metrics)
    held = endpoint(f"{hooks.base}/held", hook=HookName.CUSTOMIZE)
    labels = {
        "url": held.webhook.url,
        "controller_name": "cc",
        "controller_type": "CompositeController",
    }
    gauge = "metacontroller_customize_in_flight_requests"
    call = asyncio.create_task(client.call(held, b"{}"))
    await asyncio.wait_for(hooks.entered.wait(), 5)
    assert sample(registry, gauge, **labels) == 1
    hooks.release.set()
    await call
    assert sample(registry, gauge, **labels) == 0

    other = endpoint(f"{hooks.base}/ok", name="other", hook=HookName.CUSTOMIZE)
    await client.call(other, b"{}")
    total = "metacontroller_customize_requests_total"
    client.forget(controller_type="CompositeController", controller_name="cc")
    assert sample(registry, total, code="200", method="post", **labels) is None
    assert sample(registry, gauge, **labels) is None
    other_labels = {**labels, "url": other.webhook.url, "controller_name": "other"}
    assert sample(registry, total, code="200", method="post", **other_labels) == 1
    client.forget(controller_type="CompositeController", controller_name="cc")  # idempotent

    # a call under way when its controller is forgotten does not bring the series back
    hooks.entered.clear()
    hooks.release.clear()
    call = asyncio.create_task(client.call(held, b"{}"))
    await asyncio.wait_for(hooks.entered.wait(), 5)
    client.forget(controller_type="CompositeController", controller_name="cc")
    hooks.release.set()
    await call
    assert sample(registry, gauge, **labels) is None
    assert sample(registry, total, code="200", method="post", **labels) is None


@pytest.mark.parametrize(
    ("value", "delay"),
    [
        (None, 0.0),
        ("", 0.0),
        ("7", 7.0),
        ("+5", 5.0),
        ("0", 0.0),
        ("-3", 0.0),
        ("1.5", 0.0),
        (" 7", 0.0),
        ("soon", 0.0),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("wed, 21 oct 2015 07:28:10 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        ("Wed, 21 Oct 2015 07:20:00 GMT", 0.0),
        ("Wed, 21 Oct 2015 09:28:10 GMT+2", 10.0),
        ("Wed, 21 Oct 2015 07:28:10 PST", 10.0),  # Go: unknown zone names have offset 0
        ("Wed, 31 Feb 2015 07:28:10 GMT", 0.0),
        ("Wed, 21 Oct 2015 24:28:10 GMT", 0.0),
        ("21 Oct 2015 07:28:10 GMT", 0.0),
        ("Wed, 21 Oct 2015 07:28:10", 0.0),
    ],
)
def test_parse_retry_after(value: str | None, delay: float) -> None:
    assert parse_retry_after(value, now=NOW) == delay


def test_retry_after_date_rounds_up() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=NOW + 0.2) == 10.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=NOW - 0.2) == 11.0
