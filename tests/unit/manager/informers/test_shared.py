"""The shared-informer registry: one informer per resource, reference counts, readiness."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from manager.informers.gcguard import GcGuard
from manager.informers.metrics import PrometheusInformerMetrics
from manager.informers.shared import Informers
from proto.api.selectors import parse
from proto.kube.client import Client
from proto.kube.resources import Resource
from proto.runtime.clock import FakeClock
from tests.unit.manager.informers.fakes import (
    CONFIGMAPS,
    SECRETS,
    Recorder,
    bookmark,
    configmap,
    eventually,
    sample,
)
from tests.unit.proto.kube_fake import FakeApiServer, Reply, serve, watch_line

STREAM = {"watch": "true", "sendInitialEvents": "true"}


def _script(server: FakeApiServer, path: str, *, synced: bool) -> None:
    lines = [watch_line("ADDED", configmap("x", "3"))]
    if synced:
        lines.append(watch_line("BOOKMARK", bookmark("9", initial_end=True)))
    server.route("GET", path, Reply(chunks=lines, stall=30.0), query=STREAM)


def _close_connections(server: FakeApiServer) -> None:
    for conn in server._server.runner.server.connections:  # type: ignore[union-attr]
        if conn.transport is not None:
            conn.transport.close()


@pytest.mark.asyncio
async def test_one_informer_per_resource_stopped_by_the_last_release() -> None:
    server = FakeApiServer()
    _script(server, "/api/v1/configmaps", synced=True)
    _script(server, "/api/v1/secrets", synced=True)
    registry = CollectorRegistry()
    async with serve(server) as session:
        informers = Informers(
            Client(session),
            clock=FakeClock(),
            metrics=PrometheusInformerMetrics(registry),
            gc_guard=GcGuard(),
        )
        assert informers.synced  # nothing to wait for
        first = informers.acquire(CONFIGMAPS)
        same = informers.acquire(Resource("", "v1", "configmaps", "ConfigMap", True, ("get",)))
        secrets = informers.acquire(SECRETS)
        assert first is same and first is not secrets
        assert informers.users(CONFIGMAPS) == 2 and len(informers) == 2
        await asyncio.wait_for(informers.wait_synced(), 5)
        assert first.synced and secrets.synced
        assert len(server.requests_to("/api/v1/configmaps")) == 1  # shared, not per user

        await informers.release(CONFIGMAPS)
        assert informers.get(CONFIGMAPS) is first  # one user left
        await informers.release(CONFIGMAPS)
        assert informers.get(CONFIGMAPS) is None and len(informers) == 1
        assert (
            sample(registry, "metashard_informer_synced", resource="configmaps.v1") is None
        )  # series forgotten
        assert sample(registry, "metashard_informer_synced", resource="secrets.v1") == 1
        with pytest.raises(KeyError):
            await informers.release(CONFIGMAPS)

        # The other informer kept running: a re-acquire starts a fresh one beside it.
        again = informers.acquire(CONFIGMAPS)
        assert again is not first
        await asyncio.wait_for(again.wait_synced(), 5)
        assert informers.get(SECRETS) is secrets
        assert len(server.requests_to("/api/v1/secrets")) == 1
        await informers.close()
        assert len(informers) == 0
        _close_connections(server)


@pytest.mark.asyncio
async def test_wait_synced_follows_informers_acquired_and_released_meanwhile() -> None:
    server = FakeApiServer()
    _script(server, "/api/v1/configmaps", synced=True)
    _script(server, "/api/v1/secrets", synced=False)  # never syncs
    async with serve(server) as session:
        informers = Informers(Client(session), clock=FakeClock(), gc_guard=GcGuard())
        informers.acquire(SECRETS)
        waiting = asyncio.create_task(informers.wait_synced())
        await eventually(lambda: len(server.requests_to("/api/v1/secrets")) == 1)
        informers.acquire(CONFIGMAPS)
        await asyncio.wait_for(informers.get(CONFIGMAPS).wait_synced(), 5)  # type: ignore[union-attr]
        await asyncio.sleep(0.01)
        assert not waiting.done() and not informers.synced
        await informers.release(SECRETS)  # the unsynced one goes away
        await asyncio.wait_for(waiting, 5)
        synced: bool = informers.synced  # read anew: mypy keeps it narrowed (mypy#11969)
        assert synced
        await informers.close()
        _close_connections(server)


def _labelled(name: str, rv: str, app: str) -> dict[str, object]:
    obj = configmap(name, rv)
    obj["metadata"]["labels"] = {"app": app}
    return obj


@pytest.mark.asyncio
async def test_the_watch_carries_the_cover_of_its_users_selectors() -> None:
    a, b, c = _labelled("a", "5", "a"), _labelled("b", "6", "b"), _labelled("c", "7", "c")

    def listing(*objects: dict[str, object], rv: str) -> Reply:
        events = [*(watch_line("ADDED", o) for o in objects)]
        return Reply(
            chunks=[*events, watch_line("BOOKMARK", bookmark(rv, initial_end=True))], stall=30.0
        )

    server = FakeApiServer()
    path = "/api/v1/configmaps"
    server.route("GET", path, listing(a, b, c, rv="13"), query=STREAM)  # no selector
    for selector, objects, rv in (
        ("app in (a)", (a,), "10"),
        ("app in (a,b)", (a, b), "11"),
        ("app in (b)", (b,), "12"),
    ):
        server.route(
            "GET", path, listing(*objects, rv=rv), query={**STREAM, "labelSelector": selector}
        )
    registry = CollectorRegistry()
    recorder = Recorder()
    async with serve(server) as session:
        informers = Informers(
            Client(session),
            clock=FakeClock(),
            metrics=PrometheusInformerMetrics(registry),
            gc_guard=GcGuard(),
        )
        informer = informers.acquire(CONFIGMAPS, selector=parse("app=a"))
        informer.add_handler(recorder)
        await asyncio.wait_for(informer.wait_synced(), 5)
        assert recorder.take() == [("ADDED", None, "a@5", True)]

        informers.acquire(CONFIGMAPS, selector=parse("app=b"))  # a second user
        await eventually(lambda: informer.last_resource_version == "11")
        assert recorder.take() == [("ADDED", None, "b@6", True)]

        await informers.release(CONFIGMAPS, selector=parse("app=a"))
        await eventually(lambda: informer.last_resource_version == "12")
        assert recorder.take() == [("DELETED", "a@5", None, True)]  # no user selects it now

        informers.reselect(CONFIGMAPS, parse("app=b"), None)  # that user needs everything
        await eventually(lambda: informer.last_resource_version == "13")
        assert recorder.take() == [("ADDED", None, "a@5", True), ("ADDED", None, "c@7", True)]
        assert informers.users(CONFIGMAPS) == 1

        selectors = [r.query.get("labelSelector") for r in server.requests_to(path)]
        assert selectors == ["app in (a)", "app in (a,b)", "app in (b)", None]
        relists = sample(
            registry,
            "metashard_informer_relists_total",
            resource="configmaps.v1",
            reason="selector",
        )
        assert relists == 3
        with pytest.raises(KeyError):
            await informers.release(CONFIGMAPS, selector=parse("app=a"))  # no such user
        await informers.close()
