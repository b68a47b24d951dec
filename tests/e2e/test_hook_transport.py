"""Hook transport end to end: private CAs, client certificates, tokens, rotation, ETag reuse,
and hook outages counted in the workers' hook metrics.

Real processes (the module's coordinator and two workers) call hook servers run by this test
process. TLS material and credentials live in Secrets and ConfigMaps of the test's namespace;
the coordinator reads them and hands them to the workers, and the tests change them in place
(a rotated token, a new CA) without touching the CompositeController. Certificates come from
a private CA made at test time (``tests.unit.proto.pki``).
"""

from __future__ import annotations

import base64
import contextlib
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.e2e.harness import Processes, eventually
from tests.e2e.hookserver import HookServer, Reply
from tests.e2e.test_composite import CCS, CONFIGMAPS, EVENTS, SELECTED_BY, fanout, get, thing
from tests.unit.proto.pki import Pki, make_pki, server_tls

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
SYNC_WITHIN = 20.0


def b64(data: str) -> str:
    return base64.b64encode(data.encode()).decode()


@pytest.fixture
def pkis(tmp_path: Path) -> Iterator[tuple[Pki, Pki]]:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    yield make_pki(tmp_path / "a"), make_pki(tmp_path / "b")


@pytest.fixture
def tls_servers() -> Iterator[Callable[..., HookServer]]:
    started: list[HookServer] = []

    def start(pki: Pki, *, require_client_cert: bool) -> HookServer:
        server = HookServer(tls=server_tls(pki, require_client_cert=require_client_cert)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest_asyncio.fixture
async def controllers(kube: Client, stack: Processes) -> AsyncIterator[Callable[..., Any]]:
    """``await make(webhook, **spec)``: a CompositeController named ``e2e-<hex>`` whose sync
    hook (and customize hook, with ``customize=True``) is ``webhook(name, hook)``; ``spec``
    adds to its spec."""
    made: list[str] = []

    async def make(
        webhook: Callable[[str, str], dict[str, Any]], *, customize: bool = False, **spec: Any
    ) -> str:
        name = f"e2e-{secrets.token_hex(3)}"
        hooks = {"sync": {"webhook": webhook(name, "sync")}}
        if customize:
            hooks["customize"] = {"webhook": webhook(name, "customize")}
        await kube.create(
            CCS,
            {
                "apiVersion": "metacontroller.k8s.io/v1alpha1",
                "kind": "CompositeController",
                "metadata": {"name": name},
                "spec": {
                    "generateSelector": True,
                    "parentResource": {
                        "apiVersion": "e2e.metashard.io/v1",
                        "resource": "things",
                        "labelSelector": {"matchLabels": {SELECTED_BY: name}},
                    },
                    "childResources": [
                        {
                            "apiVersion": "v1",
                            "resource": "configmaps",
                            "updateStrategy": {"method": "InPlace"},
                        }
                    ],
                    "hooks": hooks,
                    **spec,
                },
            },
        )
        made.append(name)
        return name

    yield make
    for name in made:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CCS, name)


async def put_secret(kube: Client, namespace: str, name: str, data: dict[str, str]) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {k: b64(v) for k, v in data.items()},
    }
    await _put(kube, SECRETS, namespace, name, body)


async def put_config_map(kube: Client, namespace: str, name: str, data: dict[str, str]) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }
    await _put(kube, CONFIGMAPS, namespace, name, body)


async def _put(
    kube: Client, resource: Resource, namespace: str, name: str, body: dict[str, Any]
) -> None:
    try:
        current = await kube.get(resource, name, namespace=namespace)
    except errors.NotFound:
        await kube.create(resource, body, namespace=namespace)
        return
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    await kube.replace(resource, body, namespace=namespace)


async def child_data(kube: Client, namespace: str, parent: str) -> str | None:
    child = await get(kube, CONFIGMAPS, namespace, f"{parent}-0")
    return None if child is None else str(child["data"]["value"])


async def events_about(
    kube: Client, name: str, reason: str, namespace: str | None = None
) -> list[dict[str, Any]]:
    """Events of ``reason`` whose involved object is named ``name`` (in ``namespace``, else
    in every namespace: those of cluster-scoped objects land in ``default``)."""
    listed = await kube.list(EVENTS, namespace=namespace)
    return [
        e for e in listed.items if e.get("reason") == reason and e["involvedObject"]["name"] == name
    ]


async def test_a_private_ca_from_a_config_map_and_its_replacement(
    kube: Client,
    namespace: str,
    controllers: Callable[..., Any],
    pkis: tuple[Pki, Pki],
    tls_servers: Callable[..., HookServer],
) -> None:
    first, second = pkis
    server = tls_servers(first, require_client_cert=False)
    await put_config_map(kube, namespace, "hook-ca", {"ca.crt": first.ca.read_text()})
    ca_ref = {"configMapRef": {"name": "hook-ca", "namespace": namespace}}
    name = await controllers(lambda cc, hook: {"url": server.url(cc, hook), "caBundle": ca_ref})
    server.program(name, fanout)
    await thing(kube, namespace, "p", name, {"children": 1, "data": "one"})
    await eventually(
        lambda: _is(child_data(kube, namespace, "p"), "one"),
        within=SYNC_WITHIN,
        message="no child: the hook over TLS with the private CA was not reached",
    )

    # the server now presents a certificate from another CA: calls fail, nothing is written
    server_context = server._tls
    assert server_context is not None
    server_context.load_cert_chain(second.server_cert, second.server_key)
    cc_version = (await kube.get(CCS, name))["metadata"]["resourceVersion"]
    await kube.patch(THINGS_OF, "p", {"spec": {"data": "two"}}, namespace=namespace)
    await eventually(
        lambda: _has_sync_error(kube, namespace, "p", "CERTIFICATE_VERIFY_FAILED"),
        within=SYNC_WITHIN,
        message="no SyncError naming the certificate failure",
    )
    assert await child_data(kube, namespace, "p") == "one"

    # the CA ConfigMap is replaced: the next syncs trust the new CA, the controller untouched
    await put_config_map(kube, namespace, "hook-ca", {"ca.crt": second.ca.read_text()})
    await eventually(
        lambda: _is(child_data(kube, namespace, "p"), "two"),
        within=SYNC_WITHIN,
        message="the replaced CA was not picked up",
    )
    assert (await kube.get(CCS, name))["metadata"]["resourceVersion"] == cc_version


async def test_customize_calls_from_the_coordinator_use_an_inline_ca(
    kube: Client,
    namespace: str,
    controllers: Callable[..., Any],
    pkis: tuple[Pki, Pki],
    tls_servers: Callable[..., HookServer],
) -> None:
    pki, _ = pkis
    server = tls_servers(pki, require_client_cert=False)
    ca = {"inline": pki.ca.read_text()}
    name = await controllers(
        lambda cc, hook: {"url": server.url(cc, hook), "caBundle": ca}, customize=True
    )

    def answer(hook: str, request: dict[str, Any]) -> dict[str, Any]:
        return {"relatedResources": []} if hook == "customize" else fanout(hook, request)

    server.program(name, answer)
    await thing(kube, namespace, "p", name, {"children": 1, "data": "one"})
    await eventually(lambda: _is(child_data(kube, namespace, "p"), "one"), within=SYNC_WITHIN)
    assert {hook for _, hook, _ in server.calls(name)} == {"customize", "sync"}


async def test_client_certificate_and_bearer_token_rotated_in_place(
    kube: Client,
    namespace: str,
    controllers: Callable[..., Any],
    pkis: tuple[Pki, Pki],
    tls_servers: Callable[..., HookServer],
    stack: Processes,
) -> None:
    pki, _ = pkis
    server = tls_servers(pki, require_client_cert=True)
    wrong, right = f"wrong-{secrets.token_hex(8)}", f"right-{secrets.token_hex(8)}"
    await put_config_map(kube, namespace, "hook-ca", {"ca.crt": pki.ca.read_text()})
    await put_secret(
        kube,
        namespace,
        "hook-client",
        {"tls.crt": pki.client_cert.read_text(), "tls.key": pki.client_key.read_text()},
    )
    await put_secret(kube, namespace, "hook-token", {"token": wrong})
    host = server.url("x").split("/")[2]
    endpoint_config = {
        "host": host,
        "caBundle": {"configMapRef": {"name": "hook-ca", "namespace": namespace}},
        "clientTLS": {"secretRef": {"name": "hook-client", "namespace": namespace}},
        "authorization": {
            "type": "Bearer",
            "secretRef": {"name": "hook-token", "namespace": namespace, "key": "token"},
        },
    }
    name = await controllers(
        lambda cc, hook: {"url": server.url(cc, hook)}, endpointConfigs=[endpoint_config]
    )
    server.program(name, fanout, authorization=f"Bearer {right}")
    cc_version = (await kube.get(CCS, name))["metadata"]["resourceVersion"]
    await thing(kube, namespace, "p", name, {"children": 1, "data": "one"})

    # a wrong token: the hook refuses it, the parent gets SyncError events and no writes
    await eventually(
        lambda: _has_sync_error(kube, namespace, "p", "401"),
        within=SYNC_WITHIN,
        message="no SyncError for the refused token",
    )
    assert server.refused(name) >= 1 and server.calls(name) == []
    assert await child_data(kube, namespace, "p") is None
    parent = await get(kube, THINGS_OF, namespace, "p")
    assert parent is not None and "status" not in parent

    # the Secret is rotated: the next sync uses the new token, the controller is not touched
    await put_secret(kube, namespace, "hook-token", {"token": right})
    await eventually(
        lambda: _is(child_data(kube, namespace, "p"), "one"),
        within=SYNC_WITHIN,
        message="the rotated token was not used",
    )
    assert server.calls(name)
    assert (await kube.get(CCS, name))["metadata"]["resourceVersion"] == cc_version

    # no credential anywhere: events, process logs
    texts = [e.get("message", "") for e in (await kube.list(EVENTS)).items]
    logs = stack.logs()
    for secret in (wrong, right, pki.client_key.read_text().splitlines()[1]):
        assert not any(secret in text for text in texts)
        assert secret not in logs


async def test_a_missing_reference_is_reported_on_the_controller_and_the_hook_not_called(
    kube: Client, namespace: str, controllers: Callable[..., Any], hooks: HookServer
) -> None:
    auth = {"secretRef": {"name": "absent", "namespace": namespace, "key": "token"}}
    name = await controllers(lambda cc, hook: {"url": hooks.url(cc, hook), "authorization": auth})
    hooks.program(name, fanout)
    await thing(kube, namespace, "p", name, {"children": 1, "data": "one"})
    expected = f"Secret {namespace}/absent not found"
    await eventually(
        lambda: _has_event(kube, name, "CreateError", expected),
        within=SYNC_WITHIN,
        message="no Warning event on the controller naming the missing Secret",
    )
    await eventually(
        lambda: _has_sync_error(kube, namespace, "p", expected),
        within=SYNC_WITHIN,
        message="no SyncError on the parent",
    )
    assert hooks.calls(name) == []
    # the Secret appears with the key: the hook is called, without editing the controller
    await put_secret(kube, namespace, "absent", {"token": "t0k3n"})
    await eventually(
        lambda: _is(child_data(kube, namespace, "p"), "one"),
        within=SYNC_WITHIN,
        message="the created Secret was not picked up",
    )


async def test_etag_answers_are_reused(
    kube: Client, namespace: str, controllers: Callable[..., Any], hooks: HookServer
) -> None:
    etag = {"enabled": True, "cacheTimeoutSeconds": 60, "cacheCleanupSeconds": 30}
    name = await controllers(
        lambda cc, hook: {"url": hooks.url(cc, hook), "etag": etag}, resyncPeriodSeconds=1
    )
    hooks.program(name, fanout, etag=True)
    await thing(kube, namespace, "p", name, {"children": 1, "data": "one"})
    await eventually(lambda: _is(child_data(kube, namespace, "p"), "one"), within=SYNC_WITHIN)

    async def reused() -> bool:
        return hooks.not_modified(name) >= 4

    await eventually(reused, within=SYNC_WITHIN, message="no 304 answers were reused")
    full, not_modified = hooks.full_answers(name), hooks.not_modified(name)
    print(f"ETag: {full} full answers, {not_modified} answered 304 and served from the cache")
    # the answer changes only when the parent's spec does, after the status was written
    assert full <= 2, (full, not_modified)
    await kube.patch(THINGS_OF, "p", {"spec": {"data": "two"}}, namespace=namespace)
    await eventually(lambda: _is(child_data(kube, namespace, "p"), "two"), within=SYNC_WITHIN)
    assert hooks.full_answers(name) > full


async def test_hook_outages_are_counted_by_why_in_the_hook_metrics(
    kube: Client,
    namespace: str,
    controllers: Callable[..., Any],
    hooks: HookServer,
    pkis: tuple[Pki, Pki],
    tls_servers: Callable[..., HookServer],
    stack: Processes,
) -> None:
    """A hook that is down, misnamed, too slow or behind an untrusted certificate leaves a
    ``metacontroller_sync_requests_total`` series with a code that says why, on the worker
    that owns the parent, besides the ``SyncError`` event."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    untrusted = tls_servers(pkis[0], require_client_cert=False)
    outages = {
        "connect": await controllers(lambda cc, hook: {"url": f"http://127.0.0.1:{closed}/{cc}"}),
        "dns": await controllers(lambda cc, hook: {"url": f"http://{cc}.metashard-e2e.invalid/"}),
        "timeout": await controllers(lambda cc, hook: {"url": hooks.url(cc), "timeout": "300ms"}),
        "tls": await controllers(lambda cc, hook: {"url": untrusted.url(cc, hook)}),
    }
    hooks.program(outages["timeout"], lambda hook, request: Reply.json({}, delay=3))
    for code, name in outages.items():
        await thing(kube, namespace, f"p-{code}", name, {"children": 1, "data": "one"})
    workers = [p for p in stack.procs if p.name.startswith("worker")]

    async def counted(code: str) -> float:
        labels = {"controller_name": outages[code], "code": code, "method": "post"}
        samples = [await w.metric("metacontroller_sync_requests_total", labels) for w in workers]
        return sum(sample or 0.0 for sample in samples)

    for code in outages:

        async def seen(code: str = code) -> bool:
            return await counted(code) >= 1

        async def reported(code: str = code) -> bool:
            return await _has_sync_error(kube, namespace, f"p-{code}", "http error")

        await eventually(seen, within=SYNC_WITHIN, message=f"no sync call counted as {code}")
        await eventually(reported, within=SYNC_WITHIN, message=f"no SyncError for p-{code}")
    print({code: await counted(code) for code in outages})


# --- helpers ----------------------------------------------------------------------------------

THINGS_OF = Resource(
    "e2e.metashard.io", "v1", "things", "Thing", namespaced=True, subresources=("status",)
)


async def _is(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


async def _has_event(kube: Client, name: str, reason: str, text: str) -> bool:
    return any(text in e.get("message", "") for e in await events_about(kube, name, reason))


async def _has_sync_error(kube: Client, namespace: str, parent: str, text: str) -> bool:
    return any(
        e["type"] == "Warning" and text in e.get("message", "")
        for e in await events_about(kube, parent, "SyncError", namespace)
    )


def _peak_rss(pid: int) -> int | None:
    """The most resident memory a process has had, in bytes (Linux ``VmHWM``), else None."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


async def test_a_50_mb_answer_fails_the_sync_and_worker_memory_stays_flat(
    kube: Client,
    namespace: str,
    controllers: Callable[..., Any],
    hooks: HookServer,
    stack: Processes,
) -> None:
    # warm up: both workers joined and have reconciled (imports done, buffers grown)
    warm = await controllers(lambda cc, hook: {"url": hooks.url(cc, hook)})
    hooks.program(warm, fanout)
    for i in range(4):
        await thing(kube, namespace, f"warm-{i}", warm, {"children": 1, "data": "w"})
    for i in range(4):

        async def warmed(parent: str = f"warm-{i}") -> bool:
            return await _is(child_data(kube, namespace, parent), "w")

        await eventually(warmed, within=SYNC_WITHIN)
    workers = [p for p in stack.procs if p.name.startswith("worker")]
    before = {p.name: _peak_rss(p.popen.pid) for p in workers}
    if None in before.values():
        pytest.skip("no /proc here to read a worker's memory")
    huge = b'{"status": {"pad": "' + b"x" * (50 * 1024 * 1024) + b'"}, "children": []}'
    name = await controllers(lambda cc, hook: {"url": hooks.url(cc, hook)})
    hooks.program(name, lambda hook, request: Reply(body=huge, chunked=True))
    await thing(kube, namespace, "p", name, {"children": 1, "data": "one"})
    limit = f"larger than the limit of {3 * 1024 * 1024} bytes"
    await eventually(
        lambda: _has_sync_error(kube, namespace, "p", limit),
        within=SYNC_WITHIN,
        message="no SyncError naming the size limit",
    )
    await eventually(lambda: _more_calls(hooks, name, 3), within=SYNC_WITHIN)  # a few retries
    growth = max((_peak_rss(p.popen.pid) or 0) - (before[p.name] or 0) for p in workers)
    calls = len(hooks.calls(name))
    print(f"50 MB answers x{calls}: the workers' peak RSS grew by {growth / 2**20:.1f} MiB at most")
    assert growth < 40 * 1024 * 1024
    parent = await get(kube, THINGS_OF, namespace, "p")
    assert parent is not None and "status" not in parent


async def _more_calls(hooks: HookServer, name: str, count: int) -> bool:
    return len(hooks.calls(name)) >= count
