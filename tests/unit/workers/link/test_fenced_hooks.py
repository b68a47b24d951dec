"""The worker's hook path, ``HookCaller`` over a ``HookClient`` gated by the worker's
``Fence``, against a local HTTP hook: answers are decoded inside the client's
``call_decoded``, so a 200 the decoder refuses counts as ``invalid-response`` (and no
``"200"``); out of contact, nothing is sent or counted."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web
from prometheus_client import CollectorRegistry

from proto.api.controllers import Hook, HookName, HookVersion, ResponseMode, Webhook
from proto.api.hooks import decode_sync_response
from proto.hooks.client import HookClient, HookEndpoint
from proto.hooks.metrics import PrometheusHookMetrics
from proto.runtime.http1 import HttpClient
from proto.wire import ParentKey, Snapshot
from workers.link.fencing import Fence
from workers.reconcile import ReconcileRequest
from workers.runner.runner import OutOfContact
from workers.sync.errors import SyncFailure
from workers.sync.hookcall import HookCaller

pytestmark = pytest.mark.asyncio

KEY = ParentKey("CompositeController", "cc", "things.example.com", "ns", "p")
ANSWERS = {"ok": b'{"status": {}, "children": []}', "garbage": b"<html>oops</html>"}


class Contact:
    """In contact, with no deadline in sight, until ``on`` is cleared."""

    def __init__(self) -> None:
        self.on = True

    def may_start(self) -> bool:
        return self.on

    def in_contact(self) -> bool:
        return self.on

    def deadline(self) -> float:
        return float("inf")


@pytest_asyncio.fixture
async def base() -> AsyncIterator[str]:
    """A hook server answering 200 with ``ANSWERS[<path>]``."""

    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=ANSWERS[request.match_info["answer"]])

    app = web.Application()
    app.router.add_post("/{answer}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


def caller(client: HookClient, url: str) -> HookCaller:
    hook = Hook(HookVersion.V1, Webhook(url=url, timeout_seconds=5.0), ResponseMode.LOOSE)
    return HookCaller(
        client,
        controller_type="CompositeController",
        controller_name="cc",
        defined={HookName.SYNC: hook},
    )


def request() -> ReconcileRequest:
    return ReconcileRequest(KEY, Snapshot(1, 1, KEY, None, {}, (), {}))


def count(registry: CollectorRegistry, url: str, code: str) -> float | None:
    labels = {
        "code": code,
        "method": "post",
        "url": url,
        "controller_name": "cc",
        "controller_type": "CompositeController",
    }
    return registry.get_sample_value("metacontroller_sync_requests_total", labels)


async def test_a_200_the_decoder_refuses_counts_as_invalid_response(base: str) -> None:
    registry = CollectorRegistry()
    async with HttpClient() as http:
        client = HookClient(http, metrics=PrometheusHookMetrics(registry), gate=Fence(Contact()))
        ok, garbage = f"{base}/ok", f"{base}/garbage"
        answer = await caller(client, ok).call(
            HookName.SYNC, b"{}", request=request(), decode=decode_sync_response, failed="sync"
        )
        assert answer.children == ()
        with pytest.raises(SyncFailure, match="sync: "):
            await caller(client, garbage).call(
                HookName.SYNC,
                b"{}",
                request=request(),
                decode=decode_sync_response,
                failed="sync",
            )
    assert count(registry, ok, "200") == 1
    assert count(registry, garbage, "invalid-response") == 1
    assert count(registry, garbage, "200") is None


async def test_out_of_contact_nothing_is_sent_or_counted(base: str) -> None:
    registry = CollectorRegistry()
    contact = Contact()
    contact.on = False
    async with HttpClient() as http:
        client = HookClient(http, metrics=PrometheusHookMetrics(registry), gate=Fence(contact))
        url = f"{base}/ok"
        endpoint = HookEndpoint(
            HookName.SYNC, Webhook(url=url, timeout_seconds=5.0), "CompositeController", "cc"
        )
        with pytest.raises(OutOfContact):
            await caller(client, url).call(
                HookName.SYNC, b"{}", request=request(), decode=decode_sync_response, failed="x"
            )
        with pytest.raises(OutOfContact):
            await client.call(endpoint, b"{}")
    assert count(registry, url, "200") is None
