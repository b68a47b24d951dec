"""The webhook executor's transport: TLS roots and client certificates, credentials, the body
limit, whole-call timeouts, ETag reuse and credential-free labels and messages.

Hook servers are local aiohttp servers (TLS with a private CA from ``pki``) or raw asyncio
servers where the bytes on the wire matter. Every test runs on the stdlib loop and on uvloop.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import ssl
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
import pytest_asyncio
from aiohttp import web
from prometheus_client import CollectorRegistry

from proto.api.controllers import HookName, Webhook
from proto.api.endpoints import Connection, ETag
from proto.hooks.client import BODY_EXCERPT_BYTES, HookClient, HookEndpoint
from proto.hooks.errors import (
    HookConnectionError,
    HookResponseTooLarge,
    HookStatusError,
    HookTransportError,
)
from proto.hooks.metrics import PrometheusHookMetrics
from proto.runtime.http1 import HttpClient
from proto.runtime.redact import REDACTED
from tests.unit.proto.localserver import serve_app
from tests.unit.proto.pki import Pki, server_tls

MIB = 1024 * 1024


@dataclass
class HookServer:
    """Answers ``/ok`` with the request's ``Authorization`` header; counts full answers."""

    base: str = ""
    authorizations: list[str | None] = field(default_factory=list)
    peer_certs: list[object] = field(default_factory=list)
    full_answers: int = 0
    etag: str = '"v1"'

    async def ok(self, request: web.Request) -> web.Response:
        await request.read()
        self.authorizations.append(request.headers.get("Authorization"))
        transport = request.transport
        self.peer_certs.append(transport.get_extra_info("peercert") if transport else None)
        self.full_answers += 1
        return web.Response(body=b'{"ok": true}', content_type="application/json")

    async def etag_handler(self, request: web.Request) -> web.Response:
        await request.read()
        status = int(request.match_info["status"])
        if request.headers.get("If-None-Match") == self.etag:
            return web.Response(status=status)
        self.full_answers += 1
        return web.Response(body=b'{"n": %d}' % self.full_answers, headers={"ETag": self.etag})

    async def etag_by_body(self, request: web.Request) -> web.Response:
        """A 304 when ``If-None-Match`` is the ETag of this request's answer (its body's hash)."""
        body = await request.read()
        etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304)
        self.full_answers += 1
        return web.Response(body=b'{"n": %d}' % self.full_answers, headers={"ETag": etag})

    async def huge(self, request: web.Request) -> web.StreamResponse:
        """50 MB, chunked, written 64 KiB at a time (the server holds no more than that)."""
        await request.read()
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        block = b"x" * (64 * 1024)
        try:
            for _ in range(50 * MIB // len(block)):
                await response.write(block)
        except (ConnectionError, RuntimeError):
            pass  # the client stopped reading
        return response

    async def denied(self, request: web.Request) -> web.Response:
        """401 echoing the request's credentials, as some auth proxies do, after ``pad`` bytes:
        the ``Authorization`` value, its credentials and, for Basic, ``user:password`` and the
        password."""
        await request.read()
        authorization = request.headers.get("Authorization", "")
        scheme, _, credentials = authorization.partition(" ")
        echoes = [authorization, credentials]
        if scheme == "Basic":
            userinfo = base64.b64decode(credentials).decode()
            echoes += [userinfo, userinfo.partition(":")[2]]
        pad = "x" * int(request.query.get("pad", "0"))
        return web.Response(status=401, text=pad + " | ".join(echoes))

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/ok", self.ok)
        app.router.add_post("/denied", self.denied)
        app.router.add_post("/etag/{status}", self.etag_handler)
        app.router.add_post("/etag-by-body", self.etag_by_body)
        app.router.add_post("/huge", self.huge)
        return app


Start = Callable[..., Awaitable[HookServer]]


@pytest_asyncio.fixture
async def start() -> AsyncIterator[Start]:
    runners: list[web.AppRunner] = []

    async def run(*, tls: ssl.SSLContext | None = None) -> HookServer:
        server = HookServer()
        runner, server.base = await serve_app(server.app(), tls=tls)
        runners.append(runner)
        return server

    yield run
    for runner in runners:
        await runner.cleanup()


@pytest_asyncio.fixture
async def http() -> AsyncIterator[HttpClient]:
    async with HttpClient() as client:
        yield client


def endpoint(
    url: str,
    connection: Connection | None = None,
    *,
    timeout: float = 5.0,
    etag: ETag | None = None,
    name: str = "cc",
) -> HookEndpoint:
    return HookEndpoint(
        HookName.SYNC,
        Webhook(url=url, timeout_seconds=timeout, etag=etag),
        "CompositeController",
        name,
        connection or Connection(),
    )


def material(pki: Pki, *, client: bool = False, token: str | None = None) -> Connection:
    return Connection(
        ca_bundle=pki.ca.read_text(),
        client_cert=pki.client_cert.read_text() if client else None,
        client_key=pki.client_key.read_text() if client else None,
        authorization=f"Bearer {token}" if token else None,
    )


# --- TLS and credentials -----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_private_ca_is_trusted_only_where_it_is_given(
    pki: Pki, start: Start, http: HttpClient
) -> None:
    server = await start(tls=server_tls(pki, require_client_cert=False))
    client = HookClient(http)
    with pytest.raises(HookTransportError, match="CERTIFICATE_VERIFY_FAILED"):
        await client.call(endpoint(f"{server.base}/ok"), b"{}")
    assert await client.call(endpoint(f"{server.base}/ok", material(pki)), b"{}") == b'{"ok": true}'
    # another controller without the CA never rides on the trusted pooled connection
    with pytest.raises(HookTransportError, match="CERTIFICATE_VERIFY_FAILED"):
        await client.call(endpoint(f"{server.base}/ok", name="other"), b"{}")


@pytest.mark.asyncio
async def test_a_client_certificate_is_presented_when_configured(
    pki: Pki, start: Start, http: HttpClient
) -> None:
    server = await start(tls=server_tls(pki, require_client_cert=True))
    client = HookClient(http)
    with pytest.raises(HookTransportError):
        await client.call(endpoint(f"{server.base}/ok", material(pki)), b"{}")
    answer = await client.call(endpoint(f"{server.base}/ok", material(pki, client=True)), b"{}")
    assert answer == b'{"ok": true}'
    assert server.peer_certs and server.peer_certs[-1]


@pytest.mark.asyncio
async def test_the_authorization_header_is_sent_and_replaced_when_rotated(
    start: Start, http: HttpClient
) -> None:
    server = await start()
    client = HookClient(http)
    await client.call(endpoint(f"{server.base}/ok", Connection(authorization="Bearer one")), b"{}")
    basic = "Basic " + base64.b64encode(b"alice:pw").decode()
    await client.call(endpoint(f"{server.base}/ok", Connection(authorization=basic)), b"{}")
    await client.call(endpoint(f"{server.base}/ok"), b"{}")
    assert server.authorizations == ["Bearer one", basic, None]


@pytest.mark.asyncio
async def test_url_userinfo_is_sent_as_basic_auth_unless_the_connection_sets_credentials(
    start: Start, http: HttpClient
) -> None:
    server = await start()
    client = HookClient(http)
    host = server.base.removeprefix("http://")
    await client.call(endpoint(f"http://alice:pa%3Ass@{host}/ok"), b"{}")
    own = Connection(authorization="Bearer one")
    await client.call(endpoint(f"http://alice:pa%3Ass@{host}/ok", own), b"{}")
    assert server.authorizations == [
        "Basic " + base64.b64encode(b"alice:pa:ss").decode(),
        "Bearer one",
    ]
    with pytest.raises(HookStatusError) as info:  # echoed back, the password is masked
        await client.call(endpoint(f"http://alice:pa%3Ass@{host}/denied"), b"{}")
    assert info.value.body == " | ".join([REDACTED] * 4)
    assert info.value.url == f"http://{host}/denied"


@pytest.mark.asyncio
async def test_unusable_material_means_no_call(pki: Pki, start: Start, http: HttpClient) -> None:
    server = await start(tls=server_tls(pki, require_client_cert=False))
    client = HookClient(http)
    unresolved = Connection(error='Secret ops/auth has no key "token"')
    with pytest.raises(
        HookConnectionError, match=r'not calling .*: Secret ops/auth has no key "token"'
    ):
        await client.call(endpoint(f"{server.base}/ok", unresolved), b"{}")
    bad_ca = Connection(ca_bundle="-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----")
    with pytest.raises(HookConnectionError, match="caBundle: not a usable PEM"):
        await client.call(endpoint(f"{server.base}/ok", bad_ca), b"{}")
    wrong_key = Connection(
        ca_bundle=pki.ca.read_text(),
        client_cert=pki.client_cert.read_text(),
        client_key=pki.server_key.read_text(),
    )
    with pytest.raises(
        HookConnectionError, match="clientTLS: the certificate and private key"
    ) as info:
        await client.call(endpoint(f"{server.base}/ok", wrong_key), b"{}")
    assert "PRIVATE KEY" not in str(info.value)
    assert server.full_answers == 0


@pytest.mark.asyncio
async def test_credentials_stay_out_of_labels_and_messages(start: Start, http: HttpClient) -> None:
    server = await start()
    registry = CollectorRegistry()
    client = HookClient(http, metrics=PrometheusHookMetrics(registry))
    host = server.base.removeprefix("http://")
    secret_url = f"http://admin:hunter2@{host}/ok?token=abc123"
    await client.call(endpoint(secret_url, Connection(authorization="Bearer xyz789")), b"{}")
    with pytest.raises(HookStatusError) as info:
        await client.call(endpoint(f"http://admin:hunter2@{host}/missing?token=abc123"), b"{}")
    exposition = "\n".join(
        f"{s.name} {s.labels}" for family in registry.collect() for s in family.samples
    )
    for text in (exposition, str(info.value), info.value.url):
        assert "hunter2" not in text and "abc123" not in text and "xyz789" not in text
    assert f"http://{host}/ok" in exposition


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("authorization", "echoes"),
    [
        ("Bearer t0ken-s3cr3t", 2),
        ("Basic " + base64.b64encode(b"alice:pa55-s3cr3t").decode(), 4),
    ],
)
@pytest.mark.parametrize("pad", [0, BODY_EXCERPT_BYTES - 4])
async def test_credentials_echoed_by_an_error_answer_are_masked_in_the_excerpt(
    start: Start, http: HttpClient, authorization: str, echoes: int, pad: int
) -> None:
    server = await start()
    client = HookClient(http)
    with pytest.raises(HookStatusError) as info:
        url = f"{server.base}/denied?pad={pad}"
        await client.call(endpoint(url, Connection(authorization=authorization)), b"{}")
    assert info.value.status == 401
    expected = ("x" * pad + " | ".join([REDACTED] * echoes))[:BODY_EXCERPT_BYTES]
    assert info.value.body == expected
    assert str(info.value) == f"unsupported status code: 401 body: {expected}"


# --- body limit and timeouts ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_50_mb_answer_fails_at_the_limit_with_flat_memory(
    start: Start, http: HttpClient
) -> None:
    server = await start()
    client = HookClient(http, max_response_bytes=3 * MIB)
    tracemalloc.start()
    try:
        with pytest.raises(HookResponseTooLarge) as info:
            await client.call(endpoint(f"{server.base}/huge", timeout=30), b"{}")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (
        str(info.value)
        == f"the answer of {server.base}/huge is larger than the limit of {3 * MIB} bytes"
    )
    assert peak < 12 * MIB, f"peak {peak / MIB:.1f} MiB while refusing a 50 MB answer"


@pytest_asyncio.fixture
async def stall() -> AsyncIterator[Callable[[bytes, float], Awaitable[str]]]:
    servers: list[asyncio.Server] = []
    writers: list[asyncio.StreamWriter] = []

    async def serve(head: bytes, drip: float) -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            if not head:
                await asyncio.sleep(60)  # accepts, never speaks (a stuck TLS handshake)
                return
            await reader.readuntil(b"\r\n\r\n")
            writer.write(head)
            for _ in range(600):  # one byte every `drip` seconds: never finishes in time
                await asyncio.sleep(drip)
                writer.write(b"x")

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return f"127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield serve
    for writer in writers:
        writer.close()
    for server in servers:
        server.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("scheme", "head"),
    [
        ("https", b""),  # the TLS handshake never completes
        ("http", b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"),  # the body trickles
    ],
    ids=["tls-handshake", "slow-body"],
)
async def test_the_timeout_bounds_the_whole_call(
    stall: Callable[[bytes, float], Awaitable[str]], http: HttpClient, scheme: str, head: bytes
) -> None:
    authority = await stall(head, 0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(HookTransportError) as info:
        await HookClient(http).call(endpoint(f"{scheme}://{authority}/sync", timeout=0.5), b"{}")
    assert info.value.timed_out
    assert 0.4 < loop.time() - started < 3


# --- ETag ----------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [304, 412])
async def test_etag_answers_are_reused(start: Start, http: HttpClient, status: int) -> None:
    server = await start()
    client = HookClient(http)
    hook = endpoint(
        f"{server.base}/etag/{status}", etag=ETag(enabled=True, cache_timeout_seconds=60)
    )
    first = await client.call(hook, b"{}", cache_key="ns/a")
    assert first == b'{"n": 1}'
    for _ in range(3):
        assert await client.call(hook, b"{}", cache_key="ns/a") == first
    assert server.full_answers == 1
    assert await client.call(hook, b"{}", cache_key="ns/b") == b'{"n": 2}'  # per parent
    client.drop_cached(lambda key: key == "ns/a")  # the slot of ns/a moved away
    assert await client.call(hook, b"{}", cache_key="ns/a") == b'{"n": 3}'
    assert await client.call(hook, b"{}", cache_key="ns/b") == b'{"n": 2}'
    client.forget(controller_type="CompositeController", controller_name="cc")
    assert await client.call(hook, b"{}", cache_key="ns/b") == b'{"n": 4}'


@pytest.mark.asyncio
async def test_the_variants_of_one_parent_keep_their_own_etag_answers(
    start: Start, http: HttpClient
) -> None:
    """A rollout calls the hook for each revision of one parent in turn: with an entry per
    variant, each call after the first of its revision is a 304."""
    server = await start()
    client = HookClient(http)
    hook = endpoint(f"{server.base}/etag-by-body", etag=ETag(enabled=True))
    latest, older = b'{"image": "v2"}', b'{"image": "v1"}'
    for _ in range(3):
        assert await client.call(hook, latest, cache_key="ns/a") == b'{"n": 1}'
        assert await client.call(hook, older, cache_key="ns/a", cache_variant="r-1") == b'{"n": 2}'
    assert server.full_answers == 2
    client.drop_cached(lambda key: key == "ns/a")  # every variant of the parent goes
    await client.call(hook, latest, cache_key="ns/a")
    await client.call(hook, older, cache_key="ns/a", cache_variant="r-1")
    assert server.full_answers == 4


@pytest.mark.asyncio
async def test_without_etag_enabled_nothing_is_cached_and_304_is_an_error(
    start: Start, http: HttpClient
) -> None:
    server = await start()
    client = HookClient(http)
    plain = endpoint(f"{server.base}/etag/304")
    await client.call(plain, b"{}", cache_key="ns/a")
    await client.call(plain, b"{}", cache_key="ns/a")
    assert server.full_answers == 2
    disabled = endpoint(f"{server.base}/etag/304", etag=ETag(enabled=False))
    await client.call(disabled, b"{}", cache_key="ns/a")
    assert server.full_answers == 3
