"""Informers on a cluster: sync, live events, resume, relist with a diff, readiness, wait_for."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry

from manager.informers.gcguard import GcGuard
from manager.informers.informer import Informer, InformerOptions
from manager.informers.metrics import PrometheusInformerMetrics
from manager.informers.shared import Informers
from manager.informers.store import Cached
from proto.kube.client import Client
from proto.kube.cluster import ClusterConfig
from proto.kube.session import Session
from tests.integration.conftest import Kube
from tests.integration.kube_helpers import CLUSTER_OWNED, CONFIGMAPS, SECRETS, configmap

FAST = InformerOptions(backoff_initial=0.05, backoff_cap=0.5)
CM_WATCH = r"/configmaps\?.*watch=true"

Seen = tuple[str, str, bool]  # (type, name, initial)


class Recorder:
    """Records the events of the test's own objects."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []

    def __call__(self, type: str, old: Cached | None, new: Cached | None, initial: bool) -> None:
        obj = new if new is not None else old
        assert obj is not None
        if obj.name not in CLUSTER_OWNED:
            self.seen.append((type, obj.name, initial))

    def take(self) -> list[Seen]:
        seen, self.seen = self.seen, []
        return seen


@dataclass
class Running:
    informer: Informer
    recorder: Recorder
    registry: CollectorRegistry

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, {"resource": "configmaps.v1", **labels})
        return value or 0.0


@contextlib.asynccontextmanager
async def informing(
    client: Client, namespace: str, *, options: InformerOptions = FAST
) -> AsyncIterator[Running]:
    registry = CollectorRegistry()
    informer = Informer(
        client,
        CONFIGMAPS,
        namespace=namespace,
        options=options,
        metrics=PrometheusInformerMetrics(registry).for_resource("configmaps.v1"),
        gc_guard=GcGuard(),
        rng=random.Random(3),
    )
    recorder = Recorder()
    informer.add_handler(recorder)
    task = asyncio.create_task(informer.run())
    try:
        yield Running(informer, recorder, registry)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def seen_rv(informer: Informer, rv: str) -> None:
    assert await informer.wait_for(rv, timeout=10), f"never saw {rv}"


async def until(condition: Callable[[], bool], limit: float = 10.0) -> None:
    """Poll ``condition`` (a plain read: there is nothing to wait on) for ``limit`` seconds."""
    for _ in range(int(limit / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the condition did not come true in time")


def _names(informer: Informer) -> list[str]:
    return sorted(o.name for o in informer.store if o.name not in CLUSTER_OWNED)


@pytest.mark.asyncio
async def test_initial_sync_then_live_events_in_order(kube: Kube, namespace: str) -> None:
    client = kube.client
    for name in ("a", "b"):
        await client.create(CONFIGMAPS, configmap(name), namespace=namespace)
    async with informing(client, namespace) as run:
        await asyncio.wait_for(run.informer.wait_synced(), 10)
        assert sorted(run.recorder.take()) == [("ADDED", "a", True), ("ADDED", "b", True)]
        await client.create(CONFIGMAPS, configmap("c"), namespace=namespace)
        await client.patch(CONFIGMAPS, "a", {"data": {"x": "1"}}, namespace=namespace)
        deleted = await client.delete(CONFIGMAPS, "b", namespace=namespace)
        assert deleted["status"] == "Success"
        last = await client.patch(CONFIGMAPS, "c", {"data": {"y": "2"}}, namespace=namespace)
        await seen_rv(run.informer, last["metadata"]["resourceVersion"])
        assert run.recorder.take() == [
            ("ADDED", "c", False),
            ("MODIFIED", "a", False),
            ("DELETED", "b", False),
            ("MODIFIED", "c", False),
        ]
        assert _names(run.informer) == ["a", "c"]
        cached = run.informer.store.get(namespace, "c")
        assert cached is not None and b'"y":"2"' in cached.raw
        assert run.metric("metashard_informer_synced") == 1
        assert run.metric("metashard_informer_objects") == len(run.informer.store)
        assert run.metric("metashard_informer_last_resource_version") == int(
            last["metadata"]["resourceVersion"]
        )


@pytest.mark.asyncio
async def test_dropped_watches_resume_without_a_relist(kube: Kube, namespace: str) -> None:
    faults = kube.faults()
    client = kube.client
    await client.create(CONFIGMAPS, configmap("a"), namespace=namespace)
    async with informing(client, namespace) as run:
        await asyncio.wait_for(run.informer.wait_synced(), 10)
        run.recorder.take()
        for i in range(3):
            assert faults.drop_watches() >= 1
            written = await client.create(CONFIGMAPS, configmap(f"n{i}"), namespace=namespace)
            await seen_rv(run.informer, written["metadata"]["resourceVersion"])
        assert run.recorder.take() == [("ADDED", f"n{i}", False) for i in range(3)]
        assert run.metric("metashard_informer_relists_total", reason="initial") == 1
        assert run.metric("metashard_informer_relists_total", reason="expired") == 0
        assert run.metric("metashard_informer_watch_errors_total", reason="TransportError") >= 1
        await until(lambda: run.informer.healthy)


@pytest.mark.asyncio
@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "paginated"])
async def test_relist_after_410_diffs_with_synthetic_deletes(
    kube: Kube, namespace: str, streaming: bool
) -> None:
    faults = kube.faults()
    client = kube.client
    for name in ("a", "b", "c"):
        await client.create(CONFIGMAPS, configmap(name), namespace=namespace)
    options = InformerOptions(backoff_initial=0.05, backoff_cap=0.5, streaming_list=streaming)
    async with informing(client, namespace, options=options) as run:
        await asyncio.wait_for(run.informer.wait_synced(), 10)
        run.recorder.take()
        # Hold the re-watch back while the cluster changes and its history expires.
        faults.delay(1.5, method="GET", path=CM_WATCH, count=1)
        faults.drop_watches()
        await client.delete(CONFIGMAPS, "c", namespace=namespace)
        await client.create(CONFIGMAPS, configmap("d"), namespace=namespace)
        changed = await client.patch(CONFIGMAPS, "b", {"data": {"v": "2"}}, namespace=namespace)
        faults.expire_history()
        await seen_rv(run.informer, changed["metadata"]["resourceVersion"])
        await until(lambda: run.metric("metashard_informer_relists_total", reason="expired") == 1)
        await until(lambda: _names(run.informer) == ["a", "b", "d"])
        assert sorted(run.recorder.take()) == [
            ("ADDED", "d", True),
            ("DELETED", "c", True),  # vanished while the watch was down: a synthetic delete
            ("MODIFIED", "b", True),
        ]
        # Back to watching: live events again.
        live = await client.create(CONFIGMAPS, configmap("e"), namespace=namespace)
        await seen_rv(run.informer, live["metadata"]["resourceVersion"])
        assert run.recorder.take() == [("ADDED", "e", False)]


@pytest.mark.asyncio
@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "paginated"])
async def test_objects_deleted_during_a_relist_end_up_deleted_once(
    kube: Kube, namespace: str, streaming: bool
) -> None:
    faults = kube.faults()
    client = kube.client
    names = [f"o{i:02d}" for i in range(40)]
    for name in names:
        await client.create(CONFIGMAPS, configmap(name), namespace=namespace)
    options = InformerOptions(
        backoff_initial=0.05, backoff_cap=0.5, streaming_list=streaming, page_size=5
    )
    async with informing(client, namespace, options=options) as run:
        await asyncio.wait_for(run.informer.wait_synced(), 10)
        run.recorder.take()
        # The re-watch waits while the cluster moves on and forgets: it gets 410, a relist.
        faults.delay(0.3, method="GET", path=CM_WATCH, count=1)
        faults.drop_watches()
        await client.create(CONFIGMAPS, configmap("trigger"), namespace=namespace)
        faults.expire_history()
        # Deletes race the relist (and, paginated, its pages).
        faults.delay(0.2, method="GET", path=r"/configmaps\?.*continue=", count=3)
        await until(lambda: run.metric("metashard_informer_relists_total", reason="expired") == 1)
        doomed = names[::7]
        for name in doomed:
            await client.delete(CONFIGMAPS, name, namespace=namespace)
        marker = await client.create(CONFIGMAPS, configmap("marker"), namespace=namespace)
        await seen_rv(run.informer, marker["metadata"]["resourceVersion"])
        await until(lambda: run.metric("metashard_informer_relists_total", reason="expired") == 1)
        listed = await client.list(CONFIGMAPS, namespace=namespace)
        names_listed = (i["metadata"]["name"] for i in listed.items)
        assert _names(run.informer) == sorted(n for n in names_listed if n not in CLUSTER_OWNED)
        seen = run.recorder.take()
        for name in doomed:
            assert [s[0] for s in seen if s[1] == name and s[0] != "MODIFIED"][-1:] == ["DELETED"]
            assert sum(1 for s in seen if s == ("DELETED", name, s[2])) == 1


@pytest.mark.asyncio
@pytest.mark.embedded_settings(bookmark_interval=0.2)
async def test_bookmarks_advance_the_resource_version(kube: Kube, namespace: str) -> None:
    kube.require_embedded("bookmarks come once a minute on a real server")
    client = kube.client
    async with informing(client, namespace) as run:
        await asyncio.wait_for(run.informer.wait_synced(), 10)
        # A write to another resource moves the cluster's revision; only a bookmark tells.
        secret = await client.create(
            SECRETS, {"metadata": {"name": "s"}, "data": {}}, namespace=namespace
        )
        await seen_rv(run.informer, secret["metadata"]["resourceVersion"])
        assert run.recorder.take() == [] and _names(run.informer) == []
        assert run.metric("metashard_informer_events_total", type="BOOKMARK") >= 1


@pytest.mark.asyncio
async def test_wait_for_sees_writes_and_times_out_on_a_future_version(
    kube: Kube, namespace: str
) -> None:
    client = kube.client
    async with informing(client, namespace) as run:
        await asyncio.wait_for(run.informer.wait_synced(), 10)
        written = await client.create(CONFIGMAPS, configmap("w"), namespace=namespace)
        rv = written["metadata"]["resourceVersion"]
        assert await run.informer.wait_for(rv, timeout=10)
        cached = run.informer.store.get(namespace, "w")
        assert cached is not None and cached.resource_version == rv
        future = str(int(rv) + 1_000_000)
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert not await run.informer.wait_for(future, timeout=0.5)
        assert 0.4 <= loop.time() - started < 5
        assert not await run.informer.wait_for("not-a-number", timeout=5)


@pytest.mark.asyncio
async def test_handler_exceptions_do_not_stop_the_informer(kube: Kube, namespace: str) -> None:
    client = kube.client
    calls: list[str] = []

    def broken(type: str, old: Cached | None, new: Cached | None, initial: bool) -> None:
        calls.append(type if (new or old).name not in CLUSTER_OWNED else "")  # type: ignore[union-attr]
        raise ValueError("a handler bug")

    async with informing(client, namespace) as run:
        run.informer.remove_handler(run.recorder)
        run.informer.add_handler(broken)
        run.informer.add_handler(run.recorder)
        await asyncio.wait_for(run.informer.wait_synced(), 10)
        first = await client.create(CONFIGMAPS, configmap("h1"), namespace=namespace)
        second = await client.create(CONFIGMAPS, configmap("h2"), namespace=namespace)
        await seen_rv(run.informer, second["metadata"]["resourceVersion"])
        assert first["metadata"]["resourceVersion"] < second["metadata"]["resourceVersion"]
        assert [c for c in calls if c] == ["ADDED", "ADDED"]
        assert run.recorder.take() == [("ADDED", "h1", False), ("ADDED", "h2", False)]
        assert run.metric("metashard_informer_handler_errors_total") == len(calls)
        assert run.informer.healthy


@pytest.mark.asyncio
async def test_shared_informers_are_reference_counted(kube: Kube, namespace: str) -> None:
    client = kube.client
    registry = CollectorRegistry()
    informers = Informers(
        client, options=FAST, metrics=PrometheusInformerMetrics(registry), gc_guard=GcGuard()
    )
    try:
        first = informers.acquire(CONFIGMAPS)
        second = informers.acquire(CONFIGMAPS)
        secrets = informers.acquire(SECRETS)
        assert first is second
        await asyncio.wait_for(informers.wait_synced(), 10)
        written = await client.create(CONFIGMAPS, configmap("shared"), namespace=namespace)
        await seen_rv(first, written["metadata"]["resourceVersion"])
        assert first.store.get(namespace, "shared") is not None
        await informers.release(CONFIGMAPS)
        assert informers.get(CONFIGMAPS) is first
        await informers.release(CONFIGMAPS)
        assert informers.get(CONFIGMAPS) is None
        if kube.cluster is not None:  # the stopped informer's watch is closed on the server
            await until(lambda: len(kube.cluster.watches.active) == 1)  # type: ignore[union-attr]
        # The other informer did not notice.
        secret = await client.create(
            SECRETS, {"metadata": {"name": "s"}, "data": {}}, namespace=namespace
        )
        await seen_rv(secrets, secret["metadata"]["resourceVersion"])
        assert secrets.store.get(namespace, "s") is not None
        assert (
            registry.get_sample_value("metashard_informer_synced", {"resource": "configmaps.v1"})
            is None
        )
    finally:
        await informers.close()


@pytest.mark.asyncio
async def test_a_bad_token_is_reported_as_unauthorized(kube: Kube, namespace: str) -> None:
    config = ClusterConfig(
        server=kube.config.server,
        ca_file=kube.config.ca_file,
        insecure_skip_tls_verify=kube.config.insecure_skip_tls_verify,
        tls_server_name=kube.config.tls_server_name,
        authorization="Bearer not-the-token",
    )
    async with Session(config, qps=0) as session, informing(Client(session), namespace) as run:
        await until(
            lambda: run.metric("metashard_informer_watch_errors_total", reason="Unauthorized") >= 2
        )
        assert not run.informer.healthy and not run.informer.synced
        assert run.metric("metashard_informer_watch_healthy") == 0
        assert run.metric("metashard_informer_synced") == 0


@pytest.mark.asyncio
async def test_connection_refused_is_reported(namespace: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = ClusterConfig(server=f"http://127.0.0.1:{port}")
    async with Session(config, qps=0) as session, informing(Client(session), namespace) as run:
        await until(
            lambda: (
                run.metric("metashard_informer_watch_errors_total", reason="TransportError") >= 2
            )
        )
        assert not run.informer.healthy
        assert run.metric("metashard_informer_watch_healthy") == 0
