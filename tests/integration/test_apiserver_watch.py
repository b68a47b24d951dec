"""Watches: bookmarks, the bounded history, selector transitions, stream endings."""

from __future__ import annotations

import asyncio

import pytest

from loadtest.apiserver import Settings
from loadtest.apiserver.watch import Watcher
from proto.runtime.clock import FakeClock
from tests.integration.apiserver_client import fast_settings, running

CM = "/api/v1/namespaces/w/configmaps"


@pytest.mark.asyncio
async def test_periodic_and_pre_timeout_bookmarks() -> None:
    clock = FakeClock()
    settings = fast_settings(bookmark_interval=60.0)
    async with running(clock=clock, settings=settings) as (cluster, api):
        await api.namespace("w")
        rv = (await api.configmap("w", "a")).meta["resourceVersion"]
        async with api.watch(
            CM, resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds="100"
        ) as watch:
            await api.configmap("w", "b")
            assert (await watch.next())["type"] == "ADDED"
            clock.advance(60)
            bookmark = await watch.next()
            assert bookmark["type"] == "BOOKMARK"
            assert bookmark["object"] == {
                "kind": "ConfigMap",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(cluster.storage.rv)},
            }
            clock.advance(38)
            assert (await watch.next())["type"] == "BOOKMARK"
            clock.advance(2)
            assert await watch.ended()


@pytest.mark.asyncio
async def test_no_bookmarks_unless_allowed() -> None:
    clock = FakeClock()
    async with running(clock=clock) as (_, api):
        await api.namespace("w")
        async with api.watch(CM, resourceVersion="1", timeoutSeconds="100") as watch:
            clock.advance(99)
            await api.configmap("w", "x")
            assert (await watch.next())["type"] == "ADDED"
            clock.advance(1)
            assert await watch.ended()


@pytest.mark.asyncio
async def test_a_watch_older_than_the_history_gets_410_as_an_error_event() -> None:
    async with running(settings=fast_settings(history_size=5)) as (_, api):
        await api.namespace("w")
        first = (await api.configmap("w", "c0")).meta["resourceVersion"]
        for i in range(1, 8):
            await api.configmap("w", f"c{i}")
        async with api.watch(CM, resourceVersion=first) as watch:
            event = await watch.next()
            assert event["type"] == "ERROR"
            assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
            assert event["object"]["message"].startswith(f"too old resource version: {first} (")
            assert await watch.ended()
        listed = await api.get(CM)
        recent = listed.body["items"][-3]["metadata"]["resourceVersion"]
        async with api.watch(CM, resourceVersion=recent) as watch:
            assert [(await watch.next())["object"]["metadata"]["name"] for _ in range(2)] == [
                "c6",
                "c7",
            ]


@pytest.mark.asyncio
async def test_watch_list_sends_the_state_then_the_end_bookmark_then_changes() -> None:
    async with running() as (_, api):
        await api.namespace("w")
        await api.configmap("w", "b")
        await api.configmap("w", "a")
        params = {
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": "true",
        }
        async with api.watch(CM, **params) as watch:
            names = [(await watch.next())["object"]["metadata"]["name"] for _ in range(2)]
            assert names == ["a", "b"]
            end = await watch.next()
            assert end["type"] == "BOOKMARK"
            assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
            await api.configmap("w", "c")
            assert (await watch.next())["object"]["metadata"]["name"] == "c"


@pytest.mark.asyncio
async def test_label_selector_watch_sees_objects_leave_and_enter() -> None:
    async with running() as (_, api):
        await api.namespace("w")
        rv = (await api.configmap("w", "s", labels={"app": "x"})).meta["resourceVersion"]
        async with api.watch(CM, resourceVersion=rv, labelSelector="app=x") as watch:
            out = await api.patch(f"{CM}/s", {"metadata": {"labels": {"app": "y"}}})
            left = await watch.next()
            assert left["type"] == "DELETED"
            assert left["object"]["metadata"]["labels"] == {"app": "x"}
            assert left["object"]["metadata"]["resourceVersion"] == out.meta["resourceVersion"]
            await api.patch(f"{CM}/s", {"data": {"k": "2"}})
            await api.patch(f"{CM}/s", {"metadata": {"labels": {"app": "x"}}})
            back = await watch.next()
            assert back["type"] == "ADDED" and back["object"]["data"] == {"k": "2"}


@pytest.mark.asyncio
async def test_watchers_share_the_encoded_event() -> None:
    async with running() as (cluster, api):
        await api.namespace("w")
        table = cluster.storage.table("/configmaps")
        async with (
            api.watch(CM, resourceVersion="1") as one,
            api.watch(CM, resourceVersion="1") as two,
        ):
            for _ in range(50):
                if len(table.subscribers) == 2:
                    break
                await asyncio.sleep(0.01)
            configmaps = cluster.registry.get("", "v1", "configmaps")
            assert configmaps is not None
            cluster.objects.create(configmaps, "w", {"metadata": {"name": "shared"}})
            first, second = (w.queue[0] for w in table.subscribers)  # type: ignore[attr-defined]
            assert first is second
            a, b = await one.next(), await two.next()
            assert a == b and a["object"]["metadata"]["name"] == "shared"


@pytest.mark.asyncio
async def test_a_watcher_that_falls_too_far_behind_is_cut() -> None:
    async with running(settings=Settings(watch_queue_limit=3, namespace_deletion_delay=0)) as (
        cluster,
        api,
    ):
        await api.namespace("w")
        table = cluster.storage.table("/configmaps")
        async with api.watch(CM, resourceVersion="1") as watch:
            for _ in range(50):
                if table.subscribers:
                    break
                await asyncio.sleep(0.01)
            (watcher,) = table.subscribers
            assert isinstance(watcher, Watcher)
            configmaps = cluster.registry.get("", "v1", "configmaps")
            assert configmaps is not None
            for i in range(5):  # one burst, before the stream can drain
                cluster.objects.create(configmaps, "w", {"metadata": {"name": f"flood-{i}"}})
            assert watcher.done
            assert await watch.ended()
