"""Fault hooks, through the library object and through the admin HTTP endpoints."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from tests.integration.apiserver_client import running

CM = "/api/v1/namespaces/f/configmaps"


@pytest.mark.asyncio
async def test_drop_watches_cuts_open_streams() -> None:
    async with running() as (cluster, api):
        await api.namespace("f")
        async with (
            api.watch(CM, resourceVersion="1") as one,
            api.watch("/api/v1/namespaces") as two,
        ):
            await api.configmap("f", "a")
            assert (await one.next())["type"] == "ADDED"
            assert cluster.faults.drop_watches() == 2
            assert await one.ended()
            assert await two.ended()


@pytest.mark.asyncio
async def test_expire_history_makes_old_watches_410() -> None:
    async with running() as (cluster, api):
        await api.namespace("f")
        rv = (await api.configmap("f", "a")).meta["resourceVersion"]
        await api.configmap("f", "b")
        cluster.faults.expire_history()
        async with api.watch(CM, resourceVersion=rv) as watch:
            event = await watch.next()
            assert (event["type"], event["object"]["code"]) == ("ERROR", 410)
            assert await watch.ended()
        current = (await api.get(CM)).body["metadata"]["resourceVersion"]
        async with api.watch(CM, resourceVersion=current) as watch:
            await api.configmap("f", "c")
            assert (await watch.next())["object"]["metadata"]["name"] == "c"


@pytest.mark.asyncio
async def test_compaction_expires_exact_lists_and_continue_tokens() -> None:
    async with running() as (cluster, api):
        await api.namespace("f")
        old = (await api.configmap("f", "a")).meta["resourceVersion"]
        await api.configmap("f", "b")
        page = await api.get(CM, limit="1")
        token = page.body["metadata"]["continue"]
        exact = await api.get(CM, resourceVersion=old, resourceVersionMatch="Exact")
        assert [i["metadata"]["name"] for i in exact.body["items"]] == ["a"]
        await api.configmap("f", "c")
        cluster.faults.compact()
        expired = await api.get(CM, resourceVersion=old, resourceVersionMatch="Exact")
        assert (expired.status, expired.body["reason"]) == (410, "Expired")
        stale = await api.get(CM, limit="1", **{"continue": token})
        assert stale.status == 410 and stale.body["metadata"]["continue"]
        inconsistent = await api.get(
            CM, limit="5", **{"continue": stale.body["metadata"]["continue"]}
        )
        assert [i["metadata"]["name"] for i in inconsistent.body["items"]] == ["b", "c"]


@pytest.mark.asyncio
async def test_fail_answers_the_next_matching_requests_then_stops() -> None:
    async with running() as (cluster, api):
        await api.namespace("f")
        cluster.faults.fail(2, status=429, method="POST", path=r"/configmaps$", retry_after=7)
        for _ in range(2):
            reply = await api.post(CM, {"metadata": {"name": "x"}})
            assert reply.status == 429
            assert reply.headers["Retry-After"] == "7"
            assert reply.body["details"]["retryAfterSeconds"] == 7
        assert (await api.get(CM)).status == 200
        assert (await api.post(CM, {"metadata": {"name": "x"}})).status == 201
        cluster.faults.fail(status=500, path="x$")
        reply = await api.get(f"{CM}/x")
        assert (reply.status, reply.body["reason"]) == (500, "InternalError")
        assert (await api.get(f"{CM}/x")).status == 200


@pytest.mark.asyncio
async def test_timeout_with_seconds_answers_504() -> None:
    async with running() as (cluster, api):
        cluster.faults.fail(status="timeout", path="/api/v1/namespaces$", seconds=0.1)
        reply = await api.get("/api/v1/namespaces")
        assert (reply.status, reply.body["reason"]) == (504, "Timeout")
        cluster.faults.fail(status=504, path="/api/v1/namespaces$")
        assert (await api.get("/api/v1/namespaces")).status == 504


@pytest.mark.asyncio
async def test_timeout_without_seconds_hangs_until_the_client_gives_up() -> None:
    async with running() as (cluster, api):
        cluster.faults.fail(status="timeout", path="/api/v1/namespaces$")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(api.get("/api/v1/namespaces"), 0.3)
        assert (await api.get("/api/v1/namespaces")).status == 200


@pytest.mark.asyncio
async def test_delay_adds_latency_to_matching_requests() -> None:
    async with running() as (cluster, api):
        cluster.faults.delay(0.5, method="GET", path="/version", count=1)
        started = time.perf_counter()
        await api.get("/version")
        assert time.perf_counter() - started >= 0.5
        started = time.perf_counter()
        await api.get("/version")
        assert time.perf_counter() - started < 0.5, "the rule was for one request"


@pytest.mark.asyncio
async def test_invalid_fault_rules_are_refused() -> None:
    async with running() as (cluster, _):
        with pytest.raises(ValueError, match="status"):
            cluster.faults.fail(status=418)
        with pytest.raises(ValueError, match="count"):
            cluster.faults.fail(0)


@pytest.mark.asyncio
async def test_the_admin_endpoints_steer_the_same_hooks() -> None:
    async with running(token="t0k") as (_, api):
        await api.namespace("f")
        base = "/_emulator/faults"
        assert (
            await api.request("POST", f"{base}/errors", {"status": 429, "path": "configmaps"})
        ).status == 200
        assert (await api.get(CM)).status == 429
        assert (await api.request("POST", f"{base}/errors", {"status": 418})).status == 400
        assert (
            await api.request("POST", f"{base}/latency", {"seconds": 0.05, "path": "version"})
        ).status == 200
        described = (await api.get(base)).body
        assert described["latencies"][0]["latency"] == 0.05
        assert (await api.request("DELETE", base)).body == {"errors": [], "latencies": []}
        async with api.watch(CM, resourceVersion="1") as watch:
            dropped = await api.request("POST", f"{base}/drop-watches")
            assert dropped.body == {"dropped": 1}
            assert await watch.ended()
        assert (await api.request("POST", f"{base}/expire-history")).status == 200
        assert (await api.request("POST", f"{base}/compact")).status == 200
        async with (
            aiohttp.ClientSession() as anonymous,
            anonymous.post(api.url + f"{base}/compact") as response,
        ):
            assert response.status == 401
