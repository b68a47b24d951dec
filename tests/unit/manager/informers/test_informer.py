"""The informer against a scripted API server: what it asks, what it applies, how it recovers."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from manager.informers.gcguard import GcGuard
from manager.informers.informer import (
    NO_REFUSALS,
    Informer,
    InformerOptions,
    RefusalSink,
    resource_label,
)
from manager.informers.metrics import PrometheusInformerMetrics
from manager.informers.store import Cached
from proto.kube.client import Client
from proto.kube.cluster import ClusterConfig
from proto.kube.resources import Resource
from proto.kube.session import Session
from proto.runtime.clock import FakeClock
from tests.unit.manager.informers.fakes import (
    CONFIGMAPS,
    Recorder,
    bookmark,
    configmap,
    eventually,
    sample,
)
from tests.unit.proto.kube_fake import FakeApiServer, Reply, serve, watch_line

PATH = "/api/v1/configmaps"
STREAM = {"watch": "true", "sendInitialEvents": "true"}
LIST = {"limit": "500"}
HANG = 30.0  # a watch that stays open (and silent) until the test ends


def watch_from(rv: str) -> dict[str, str]:
    return {"watch": "true", "resourceVersion": rv}


def initial(*objects: dict[str, object], rv: str) -> list[tuple[str, dict[str, object]]]:
    """A streaming list's initial events."""
    return [*(("ADDED", o) for o in objects), ("BOOKMARK", bookmark(rv, initial_end=True))]


def silent() -> Reply:
    return Reply(chunks=[], stall=HANG)


def api(*replies: Reply) -> FakeApiServer:
    """A server answering streaming lists with ``replies``, in order (the last repeats)."""
    server = FakeApiServer()
    server.route("GET", PATH, *replies, query=STREAM)
    return server


def streaming_list(
    *objects: dict[str, object],
    rv: str,
    then: list[tuple[str, dict[str, object]]] | None = None,
    raw: bytes = b"",
    hold: bool = True,
) -> Reply:
    """A streaming list's reply: ``objects`` up to the bookmark at ``rv``, then the live
    events ``then`` and the ``raw`` bytes; then it stays open (``hold``) or ends."""
    lines = [watch_line(t, o) for t, o in [*initial(*objects, rv=rv), *(then or [])]]
    return Reply(chunks=[*lines, raw] if raw else lines, stall=HANG if hold else 0.0)


def expired_after(*objects: dict[str, object], rv: str) -> Reply:
    """A streaming list of ``objects`` whose watch then ends in 410 Gone (a relist follows)."""
    gone = {"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410}
    return streaming_list(*objects, rv=rv, then=[("ERROR", gone)], hold=False)


class Harness:
    def __init__(self, server: FakeApiServer, informer: Informer, registry: CollectorRegistry):
        self.server = server
        self.informer = informer
        self.registry = registry
        self.recorder = Recorder()
        informer.add_handler(self.recorder)

    def metric(self, name: str, **labels: str) -> float | None:
        return sample(self.registry, name, resource="configmaps.v1", **labels)

    def requests(self) -> list[dict[str, str]]:
        return [r.query for r in self.server.requests_to(PATH)]


@contextlib.asynccontextmanager
async def running(
    server: FakeApiServer,
    *,
    clock: FakeClock | None = None,
    options: InformerOptions | None = None,
    resource: Resource = CONFIGMAPS,
    refusals: RefusalSink = NO_REFUSALS,
) -> AsyncIterator[Harness]:
    registry = CollectorRegistry()
    async with serve(server) as session:
        informer = Informer(
            Client(session),
            resource,
            options=options,
            clock=clock or FakeClock(),
            metrics=PrometheusInformerMetrics(registry).for_resource(resource_label(resource)),
            gc_guard=GcGuard(),
            rng=random.Random(1),
            refusals=refusals,
        )
        harness = Harness(server, informer, registry)
        task = asyncio.create_task(informer.run())
        try:
            yield harness
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            # The fake server keeps silent watches open; let it go.
            for transport in list(_open_transports(server)):
                transport.close()


def _open_transports(server: FakeApiServer) -> list[asyncio.Transport]:
    runner = server._server.runner
    assert runner is not None and runner.server is not None
    return [conn.transport for conn in runner.server.connections if conn.transport is not None]


@pytest.mark.asyncio
async def test_streaming_list_fills_the_store_and_continues_as_the_watch() -> None:
    a, b = configmap("a", "5"), configmap("b", "7")
    server = api(streaming_list(a, b, rv="10", then=[("MODIFIED", configmap("a", "11", k="v"))]))
    async with running(server) as h:
        await h.informer.wait_synced()
        await eventually(lambda: h.informer.last_resource_version == "11")
        assert h.recorder.take() == [
            ("ADDED", None, "a@5", True),
            ("ADDED", None, "b@7", True),
            ("MODIFIED", "a@5", "a@11", False),
        ]
        cached = h.informer.store.get("ns", "a")
        assert cached is not None and b'"k":"v"' in cached.raw
        [query] = h.requests()  # one request: the list and the watch
        assert query["resourceVersionMatch"] == "NotOlderThan"
        assert query["allowWatchBookmarks"] == "true"
        assert "resourceVersion" not in query
        assert 300 <= int(query["timeoutSeconds"]) <= 600
        assert h.metric("metashard_informer_synced") == 1
        assert h.metric("metashard_informer_objects") == 2
        assert h.metric("metashard_informer_last_resource_version") == 11
        assert h.metric("metashard_informer_relists_total", reason="initial") == 1
        assert h.metric("metashard_informer_events_total", type="ADDED") == 2
        assert h.metric("metashard_informer_events_total", type="MODIFIED") == 1


@pytest.mark.asyncio
async def test_a_refused_streaming_list_falls_back_to_paginated_lists_for_good() -> None:
    server = FakeApiServer()
    refusal = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Invalid",
        "code": 422,
        "message": "sendInitialEvents is forbidden",
    }
    server.route("GET", PATH, Reply.json(422, refusal), query=STREAM)
    listed = {
        "kind": "ConfigMapList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "20"},
        "items": [{k: v for k, v in configmap("a", "5").items() if k != "kind"}],
    }
    relisted = {**listed, "metadata": {"resourceVersion": "40"}, "items": []}
    server.route("GET", PATH, Reply.json(200, listed), Reply.json(200, relisted), query=LIST)
    gone = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
        "message": "too old resource version: 20 (30)",
    }
    server.route("GET", PATH, Reply.events(("ERROR", gone)), query=watch_from("20"))
    server.route("GET", PATH, silent(), query=watch_from("40"))
    clock = FakeClock()
    async with running(server, clock=clock) as h:
        await h.informer.wait_synced()
        await eventually(lambda: h.informer.last_resource_version == "40", clock=clock)
        assert h.recorder.take() == [
            ("ADDED", None, "a@5", True),
            ("DELETED", "a@5", None, True),  # gone from the relist: a synthetic delete
        ]
        kinds = [
            "stream" if "sendInitialEvents" in q else q.get("resourceVersion", "list")
            for q in h.requests()
        ]
        assert kinds == ["stream", "list", "20", "list", "40"]
        assert h.metric("metashard_informer_relists_total", reason="expired") == 1
        assert len(h.informer.store) == 0


@pytest.mark.asyncio
async def test_relist_after_410_diffs_against_the_store() -> None:
    a, b, c = configmap("a", "5"), configmap("b", "6"), configmap("c", "7")
    first = expired_after(a, b, c, rv="10")
    second = streaming_list(
        a,
        configmap("b", "12", x="1"),
        configmap("d", "13"),
        rv="15",
        then=[("MODIFIED", configmap("d", "16"))],
    )
    server = api(first, second)
    clock = FakeClock()
    async with running(server, clock=clock) as h:
        await eventually(lambda: h.informer.last_resource_version == "16", clock=clock)
        assert h.recorder.take() == [
            ("ADDED", None, "a@5", True),
            ("ADDED", None, "b@6", True),
            ("ADDED", None, "c@7", True),
            # the relist: a unchanged (nothing), b changed, d new, c vanished
            ("MODIFIED", "b@6", "b@12", True),
            ("ADDED", None, "d@13", True),
            ("DELETED", "c@7", None, True),
            ("MODIFIED", "d@13", "d@16", False),
        ]
        assert sorted(o.name for o in h.informer.store) == ["a", "b", "d"]
        assert h.metric("metashard_informer_relists_total", reason="expired") == 1
        assert h.metric("metashard_informer_events_total", type="DELETED") == 1


@pytest.mark.asyncio
async def test_an_object_deleted_during_a_relist_is_deleted_once() -> None:
    a, b, c = configmap("a", "5"), configmap("b", "6"), configmap("c", "7")
    first = expired_after(a, b, c, rv="10")
    # The relist: b deleted before it is listed, c listed then deleted, a not listed at all.
    second = Reply(
        chunks=[
            watch_line("DELETED", configmap("b", "11")),
            watch_line("ADDED", configmap("c", "7")),
            watch_line("DELETED", configmap("c", "12")),
            watch_line("BOOKMARK", bookmark("15", initial_end=True)),
        ],
        stall=HANG,
    )
    server = api(first, second)
    clock = FakeClock()
    async with running(server, clock=clock) as h:
        await eventually(lambda: h.informer.last_resource_version == "15", clock=clock)
        assert h.recorder.take() == [
            ("ADDED", None, "a@5", True),
            ("ADDED", None, "b@6", True),
            ("ADDED", None, "c@7", True),
            ("DELETED", "b@6", None, True),
            ("DELETED", "c@7", None, True),
            ("DELETED", "a@5", None, True),
        ]
        assert len(h.informer.store) == 0


@pytest.mark.asyncio
async def test_a_malformed_line_resumes_from_the_last_good_resource_version() -> None:
    server = api(
        streaming_list(
            configmap("a", "5"),
            rv="10",
            then=[("MODIFIED", configmap("a", "11"))],
            raw=b"{not json\n",
            hold=False,
        ),
    )
    server.route(
        "GET",
        PATH,
        Reply(chunks=[watch_line("DELETED", configmap("a", "12"))], stall=HANG),
        query=watch_from("11"),
    )
    clock = FakeClock()
    async with running(server, clock=clock) as h:
        await eventually(lambda: h.informer.last_resource_version == "12", clock=clock)
        assert [q.get("resourceVersion") for q in h.requests()] == [None, "11"]
        assert h.recorder.take()[-2:] == [
            ("MODIFIED", "a@5", "a@11", False),
            ("DELETED", "a@11", None, False),
        ]
        assert h.metric("metashard_informer_watch_errors_total", reason="StreamError") == 1
        assert h.metric("metashard_informer_relists_total", reason="expired") is None
        assert h.informer.healthy


@pytest.mark.asyncio
async def test_bookmarks_advance_the_resource_version_only() -> None:
    server = api(
        streaming_list(configmap("a", "5"), rv="10", then=[("BOOKMARK", bookmark("25"))]),
    )
    async with running(server) as h:
        await eventually(lambda: h.informer.last_resource_version == "25")
        assert h.recorder.take() == [("ADDED", None, "a@5", True)]
        assert h.metric("metashard_informer_events_total", type="BOOKMARK") == 1
        assert await h.informer.wait_for("25", timeout=0)


@pytest.mark.asyncio
async def test_a_normal_end_resumes_at_once_and_a_very_short_empty_watch_backs_off() -> None:
    server = api(
        Reply.events(*initial(configmap("a", "5"), rv="10")),
    )
    # The fake clock stands still: this empty watch "lasted" 0 s, so it counts as an error.
    server.route("GET", PATH, Reply.events(), silent(), query=watch_from("10"))
    clock = FakeClock()
    async with running(server, clock=clock) as h:
        await eventually(lambda: len(h.requests()) == 2)
        await asyncio.sleep(0.05)
        assert len(h.requests()) == 2  # waiting out the backoff, not looping
        assert h.metric("metashard_informer_watch_errors_total", reason="VeryShortWatch") == 1
        await eventually(lambda: len(h.requests()) == 3, clock=clock)


@pytest.mark.asyncio
async def test_unauthorized_is_reported_once_per_state_change_until_it_recovers() -> None:
    denied = Reply.json(
        401, {"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401}
    )
    server = api(denied, denied, denied, streaming_list(configmap("a", "5"), rv="10"))
    clock = FakeClock()
    with capture_logs() as logs:
        async with running(server, clock=clock) as h:
            await eventually(lambda: len(h.requests()) == 1)
            await eventually(lambda: h.metric("metashard_informer_watch_healthy") == 0)
            assert not h.informer.synced and not h.informer.healthy
            await eventually(lambda: h.informer.synced, clock=clock)
            healthy: bool = h.informer.healthy  # read anew: mypy keeps it narrowed (mypy#11969)
            assert healthy
            assert h.metric("metashard_informer_watch_healthy") == 1
            assert h.metric("metashard_informer_watch_errors_total", reason="Unauthorized") == 3
    failing = [e for e in logs if e["event"] == "list/watch failing; retrying"]
    recovered = [e for e in logs if e["event"] == "list/watch recovered"]
    assert len(failing) == 1 and failing[0]["reason"] == "Unauthorized"
    assert len(recovered) == 1 and recovered[0]["failed_attempts"] == 3


@pytest.mark.asyncio
async def test_connection_refused_is_a_transport_failure() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    registry = CollectorRegistry()
    clock = FakeClock()
    async with Session(ClusterConfig(server=f"http://127.0.0.1:{port}"), qps=0) as session:
        informer = Informer(
            Client(session),
            CONFIGMAPS,
            clock=clock,
            metrics=PrometheusInformerMetrics(registry).for_resource("configmaps.v1"),
            gc_guard=GcGuard(),
        )
        task = asyncio.create_task(informer.run())
        await eventually(
            lambda: (
                (
                    sample(
                        registry,
                        "metashard_informer_watch_errors_total",
                        resource="configmaps.v1",
                        reason="TransportError",
                    )
                    or 0
                )
                >= 2
            ),
            clock=clock,
        )
        assert not informer.healthy and not informer.synced
        assert sample(registry, "metashard_informer_watch_healthy", resource="configmaps.v1") == 0
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.asyncio
async def test_handler_exceptions_are_isolated_and_counted() -> None:
    server = api(
        streaming_list(
            configmap("a", "5"),
            configmap("b", "6"),
            rv="10",
            then=[("MODIFIED", configmap("a", "11"))],
        ),
    )

    def broken(type: str, old: Cached | None, new: Cached | None, initial: bool) -> None:
        raise RuntimeError("handler bug")

    async with running(server) as h:
        h.informer.remove_handler(h.recorder)
        h.informer.add_handler(broken)
        h.informer.add_handler(h.recorder)
        await eventually(lambda: h.informer.last_resource_version == "11")
        assert [s[0] for s in h.recorder.take()] == ["ADDED", "ADDED", "MODIFIED"]
        assert h.metric("metashard_informer_handler_errors_total") == 3
        assert h.informer.healthy


@pytest.mark.asyncio
async def test_a_late_handler_gets_the_cache_as_initial_adds() -> None:
    server = api(
        streaming_list(configmap("a", "5"), configmap("b", "6"), rv="10"),
    )
    async with running(server) as h:
        await h.informer.wait_synced()
        late = Recorder()
        h.informer.add_handler(late)
        assert sorted(late.take()) == [("ADDED", None, "a@5", True), ("ADDED", None, "b@6", True)]


@pytest.mark.asyncio
async def test_wait_for_returns_once_the_version_is_seen_and_times_out_otherwise() -> None:
    server = api(
        streaming_list(configmap("a", "5"), rv="10", then=[("MODIFIED", configmap("a", "12"))]),
    )
    clock = FakeClock()
    async with running(server, clock=clock) as h:
        # Registered while the informer is still connecting.
        later = asyncio.create_task(h.informer.wait_for("12", timeout=5))
        never = asyncio.create_task(h.informer.wait_for("99", timeout=5))
        assert await later
        assert not never.done()
        assert await h.informer.wait_for("10", timeout=0)
        assert await h.informer.wait_for("3", timeout=0)
        assert not await h.informer.wait_for("abc", timeout=60)  # cannot tell: at once
        assert not await h.informer.wait_for("", timeout=60)
        assert not await h.informer.wait_for("13", timeout=0)
        clock.advance(5)
        assert not await never


@pytest.mark.asyncio
async def test_waiters_get_false_when_the_informer_stops() -> None:
    server = api(silent())
    async with running(server) as h:
        waiting = asyncio.create_task(h.informer.wait_for("99", timeout=60))
        await eventually(lambda: len(h.requests()) == 1)
    assert not await waiting


def test_resource_labels() -> None:
    assert resource_label(CONFIGMAPS) == "configmaps.v1"
    apps = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
    assert resource_label(apps) == "deployments.v1.apps"


def test_options_are_validated() -> None:
    with pytest.raises(ValueError, match="informer options"):
        InformerOptions(min_watch_timeout=0)
