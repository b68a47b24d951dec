"""Every hook call is counted in ``metacontroller_<hook>_requests_total``: an HTTP answer by its
status, a call without one by why it failed, a 200 whose body the caller's decoder refuses as
``invalid-response``. Every test runs on the stdlib loop and on uvloop (the processes' loop).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest
import pytest_asyncio
from aiohttp import web
from prometheus_client import CollectorRegistry

from proto.api.controllers import HookName, ResponseMode, Webhook
from proto.api.endpoints import Connection, ETag
from proto.api.errors import HookResponseError
from proto.api.hooks import decode_sync_response
from proto.hooks.client import HookClient, HookEndpoint
from proto.hooks.errors import (
    HookConnectionError,
    HookError,
    HookResponseTooLarge,
    HookStatusError,
    HookTransportError,
)
from proto.hooks.metrics import PrometheusHookMetrics
from proto.runtime.http1 import HttpClient
from tests.unit.proto.localserver import serve_app
from tests.unit.proto.pki import Pki, server_tls

TOTAL = "metacontroller_sync_requests_total"
DURATION = "metacontroller_sync_request_duration_histogram_seconds"
IN_FLIGHT = "metacontroller_sync_in_flight_requests"


def decode(body: bytes) -> Any:
    """A sync answer decoded as the workers decode it."""
    return decode_sync_response(body, mode=ResponseMode.STRICT)


class Answers:
    """A hook server: ``/<behaviour>`` answers as the behaviour says."""

    def __init__(self) -> None:
        self.base = ""
        self.if_none_match: list[str | None] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        behaviour = request.match_info["behaviour"]
        if behaviour == "ok":
            return web.Response(body=b'{"status": {}, "children": []}')
        if behaviour == "garbage":
            return web.Response(body=b"<html>502 Bad Gateway</html>")
        if behaviour == "wrong-shape":
            return web.Response(body=b'{"status": {}, "children": {"a": 1}}')
        if behaviour == "bad-etag":
            self.if_none_match.append(request.headers.get("If-None-Match"))
            if request.headers.get("If-None-Match") == '"e"':
                return web.Response(status=304)
            return web.Response(body=b"not json", headers={"ETag": '"e"'})
        if behaviour == "big":
            return web.Response(body=b"x" * 2048)
        if behaviour == "slow":
            await asyncio.sleep(30)
        return web.Response(status=503, body=b"down for maintenance")


Serve = Callable[..., Awaitable[Answers]]


@pytest_asyncio.fixture
async def serve() -> AsyncIterator[Serve]:
    """``await serve(tls=...)``: a new ``Answers`` server."""
    runners: list[web.AppRunner] = []

    async def start(*, tls: ssl.SSLContext | None = None) -> Answers:
        answers = Answers()
        app = web.Application()
        app.router.add_post("/{behaviour}", answers.handle)
        runner, answers.base = await serve_app(app, tls=tls)
        runners.append(runner)
        return answers

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest_asyncio.fixture
async def answers(serve: Serve) -> Answers:
    return await serve()


@pytest_asyncio.fixture
async def http() -> AsyncIterator[HttpClient]:
    async with HttpClient() as client:
        yield client


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def client(http: HttpClient, registry: CollectorRegistry) -> HookClient:
    return HookClient(http, metrics=PrometheusHookMetrics(registry))


def endpoint(
    url: str,
    connection: Connection | None = None,
    *,
    timeout: float = 5.0,
    etag: ETag | None = None,
) -> HookEndpoint:
    return HookEndpoint(
        HookName.SYNC,
        Webhook(url=url, timeout_seconds=timeout, etag=etag),
        "CompositeController",
        "cc",
        connection or Connection(),
    )


def counted(registry: CollectorRegistry, hook: HookEndpoint) -> dict[str, float]:
    """The ``code`` label of each sample of the hook's ``_requests_total``, with its count."""
    labels = {**series(hook), "method": "post"}
    return {
        sample.labels["code"]: sample.value
        for family in registry.collect()
        for sample in family.samples
        if sample.name == TOTAL and all(sample.labels[k] == v for k, v in labels.items())
    }


def series(hook: HookEndpoint) -> dict[str, str]:
    url, name, kind = hook.metric_labels
    return {"url": url, "controller_name": name, "controller_type": kind}


def answered(registry: CollectorRegistry, hook: HookEndpoint) -> float | None:
    """How many calls the latency histogram observed."""
    return registry.get_sample_value(f"{DURATION}_count", {"method": "post", **series(hook)})


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def fails(
    client: HookClient, hook: HookEndpoint, error: type[Exception] = HookError
) -> Exception:
    with pytest.raises(error) as info:
        await client.call_decoded(hook, b"{}", decode=decode)
    return info.value


# --- calls without an HTTP answer ----------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_refused_connection_counts_as_connect(
    client: HookClient, registry: CollectorRegistry
) -> None:
    hook = endpoint(f"http://127.0.0.1:{closed_port()}/sync")
    error = await fails(client, hook, HookTransportError)
    assert str(error).startswith("http error:")
    await fails(client, hook, HookTransportError)
    assert counted(registry, hook) == {"connect": 2}
    assert answered(registry, hook) is None  # latency is that of HTTP answers
    assert registry.get_sample_value(IN_FLIGHT, series(hook)) == 0


@pytest.mark.asyncio
async def test_a_host_name_that_does_not_resolve_counts_as_dns(
    client: HookClient, registry: CollectorRegistry
) -> None:
    hook = endpoint("http://no-such-hook.metashard.invalid/sync")
    await fails(client, hook, HookTransportError)
    assert counted(registry, hook) == {"dns": 1}


@pytest.mark.asyncio
async def test_no_answer_within_the_timeout_counts_as_timeout(
    answers: Answers, client: HookClient, registry: CollectorRegistry
) -> None:
    hook = endpoint(f"{answers.base}/slow", timeout=0.2)
    error = await fails(client, hook, HookTransportError)
    assert "within 0.2s" in str(error)
    assert counted(registry, hook) == {"timeout": 1}


@pytest.mark.asyncio
async def test_no_connection_within_the_connect_limit_counts_as_timeout(
    registry: CollectorRegistry,
) -> None:
    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # accepts, never answers the TLS handshake

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    async with server, HttpClient(connect_timeout=0.2) as http:
        port = server.sockets[0].getsockname()[1]
        client = HookClient(http, metrics=PrometheusHookMetrics(registry))
        hook = endpoint(f"https://127.0.0.1:{port}/sync", timeout=30)
        error = await fails(client, hook, HookTransportError)
        assert "not within 0.2 s" in str(error)
    assert counted(registry, hook) == {"timeout": 1}


@pytest.mark.asyncio
async def test_a_server_certificate_that_does_not_verify_counts_as_tls(
    serve: Serve, client: HookClient, registry: CollectorRegistry, pki: Pki
) -> None:
    answers = await serve(tls=server_tls(pki, require_client_cert=False))
    hook = endpoint(f"{answers.base}/ok")  # the system's roots do not know the test CA
    error = await fails(client, hook, HookTransportError)
    assert "CERTIFICATE_VERIFY_FAILED" in str(error)
    assert counted(registry, hook) == {"tls": 1}


@pytest.mark.asyncio
async def test_a_connection_closed_before_the_answer_ends_counts_as_transport(
    client: HookClient, registry: CollectorRegistry
) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(cut, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        hook = endpoint(f"http://127.0.0.1:{port}/sync")
        await fails(client, hook, HookTransportError)
    assert counted(registry, hook) == {"transport": 1}


@pytest.mark.asyncio
async def test_unusable_credentials_or_tls_material_count_as_config_and_nothing_is_sent(
    answers: Answers, client: HookClient, registry: CollectorRegistry
) -> None:
    unresolved = endpoint(f"{answers.base}/ok", Connection(error="Secret ops/auth not found"))
    await fails(client, unresolved, HookConnectionError)
    bad_ca = Connection(ca_bundle="-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----")
    https = endpoint(answers.base.replace("http:", "https:") + "/ok", bad_ca)
    await fails(client, https, HookConnectionError)
    assert counted(registry, unresolved) == {"config": 1}
    assert counted(registry, https) == {"config": 1}


# --- HTTP answers --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_answers_count_by_status_and_their_latency_is_observed(
    answers: Answers, client: HookClient, registry: CollectorRegistry
) -> None:
    ok, down = endpoint(f"{answers.base}/ok"), endpoint(f"{answers.base}/down")
    response = await client.call_decoded(ok, b"{}", decode=decode)
    assert response.children == ()
    await fails(client, down, HookStatusError)
    assert counted(registry, ok) == {"200": 1}
    assert counted(registry, down) == {"503": 1}
    assert answered(registry, ok) == answered(registry, down) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("behaviour", "problem"),
    [("garbage", "response is not valid JSON"), ("wrong-shape", "children")],
)
async def test_a_200_the_decoder_refuses_counts_as_invalid_response_not_200(
    answers: Answers, client: HookClient, registry: CollectorRegistry, behaviour: str, problem: str
) -> None:
    hook = endpoint(f"{answers.base}/{behaviour}")
    error = await fails(client, hook, HookResponseError)
    assert problem in str(error)
    assert counted(registry, hook) == {"invalid-response": 1}
    assert answered(registry, hook) == 1  # an answer came: its latency counts


@pytest.mark.asyncio
async def test_an_answer_over_the_size_limit_counts_as_too_large(
    answers: Answers, http: HttpClient, registry: CollectorRegistry
) -> None:
    client = HookClient(http, metrics=PrometheusHookMetrics(registry), max_response_bytes=1024)
    hook = endpoint(f"{answers.base}/big")
    await fails(client, hook, HookResponseTooLarge)
    assert counted(registry, hook) == {"too-large": 1}


@pytest.mark.asyncio
async def test_an_answer_the_decoder_refuses_is_not_kept_for_etag_reuse(
    answers: Answers, client: HookClient, registry: CollectorRegistry
) -> None:
    hook = endpoint(f"{answers.base}/bad-etag", etag=ETag(enabled=True))
    for _ in range(2):
        with pytest.raises(HookResponseError):
            await client.call_decoded(hook, b"{}", decode=decode, cache_key="ns/p")
    assert answers.if_none_match == [None, None]  # the second call got the whole answer again
    assert counted(registry, hook) == {"invalid-response": 2}


@pytest.mark.asyncio
async def test_call_returns_the_body_undecoded_and_counts_it_by_status(
    answers: Answers, client: HookClient, registry: CollectorRegistry
) -> None:
    hook = endpoint(f"{answers.base}/garbage")
    assert await client.call(hook, b"{}") == b"<html>502 Bad Gateway</html>"
    assert counted(registry, hook) == {"200": 1}
    assert orjson.loads(await client.call(endpoint(f"{answers.base}/ok"), b"{}"))["children"] == []
