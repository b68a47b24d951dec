"""The fake kubelet."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.apiserver_client import Api, running

PODS = "/api/v1/namespaces/k/pods"
POD = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "app:1"}]}}


async def pod(api: Api) -> None:
    await api.namespace("k")
    for _ in range(50):
        reply = await api.post(PODS, POD)
        if reply.status != 403:  # the default ServiceAccount is created just after the namespace
            break
    assert reply.status == 201, reply.body


def ready(status: dict[str, Any]) -> bool:
    conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
    return status.get("phase") == "Running" and conditions.get("Ready") == "True"


@pytest.mark.asyncio
async def test_off_by_default_pods_stay_pending() -> None:
    async with running() as (_, api):
        await pod(api)
        await api.get("/version")
        assert (await api.get(f"{PODS}/p")).body["status"] == {
            "phase": "Pending",
            "qosClass": "BestEffort",
        }


@pytest.mark.asyncio
async def test_enabled_kubelet_marks_pods_running_and_ready() -> None:
    async with running(kubelet=True) as (_, api):
        await pod(api)
        for _ in range(100):
            status = (await api.get(f"{PODS}/p")).body["status"]
            if ready(status):
                break
        assert ready(status)
        assert status["podIP"].startswith("10.244.")
        (container,) = status["containerStatuses"]
        assert container["name"] == "app" and container["ready"] and "running" in container["state"]
        assert status["qosClass"] == "BestEffort"


@pytest.mark.asyncio
async def test_mark_ready_on_demand_and_enable_later() -> None:
    async with running() as (cluster, api):
        await pod(api)
        marked = cluster.kubelet.mark_ready("k", "p")
        assert ready(marked["status"])
        await api.post(PODS, {**POD, "metadata": {"name": "q"}})
        cluster.kubelet.enable()
        for _ in range(100):
            if ready((await api.get(f"{PODS}/q")).body["status"]):
                break
        assert ready((await api.get(f"{PODS}/q")).body["status"])
        cluster.kubelet.disable()
        await api.post(PODS, {**POD, "metadata": {"name": "r"}})
        await api.get("/version")
        assert (await api.get(f"{PODS}/r")).body["status"]["phase"] == "Pending"
