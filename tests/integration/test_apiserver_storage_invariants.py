"""Stored objects never change after they are written, whatever writes follow."""

from __future__ import annotations

from typing import Any

import pytest

from loadtest.apiserver.storage import encode
from tests.integration.apiserver_client import Api, running

STS = "/apis/apps/v1/namespaces/inv/statefulsets"
BODY: dict[str, Any] = {
    "metadata": {"name": "s"},
    "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        },
    },
}


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def crd(status_schema: dict[str, Any]) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": status_schema,
        },
    }
    version = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "subresources": {"status": {}},
    }
    return {
        "metadata": {"name": "things.example.net"},
        "spec": {
            "group": "example.net",
            "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [version],
        },
    }


async def defaults_added_to_a_crd_later(api: Api) -> None:
    """A default that appears after an object was stored must not leak into the old version."""
    status = {"type": "object", "properties": {"phase": {"type": "string"}}}
    assert (await api.post(CRDS, crd(status))).status == 201
    things = "/apis/example.net/v1/namespaces/inv/things"
    for _ in range(50):
        if (await api.post(things, {"metadata": {"name": "t"}, "spec": {"a": 1}})).status == 201:
            break
    await api.patch(f"{things}/t/status", {"status": {"other": 1}})
    current = (await api.get(f"{CRDS}/things.example.net")).body
    current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"phase": {"type": "string", "default": "New"}},
    }
    assert (await api.put(f"{CRDS}/things.example.net", current)).status == 200
    await api.get("/version")
    patched = await api.patch(f"{things}/t", {"spec": {"a": 2}})
    assert patched.status == 200


@pytest.mark.asyncio
async def test_every_stored_version_still_encodes_to_its_bytes() -> None:
    async with running(kubelet=True) as (cluster, api):
        await api.namespace("inv")
        assert (await api.post(STS, BODY)).status == 201
        await api.request(
            "PUT",
            f"{STS}/s/status",
            {"metadata": {"name": "s"}, "status": {"observedGeneration": 1}},
        )
        await api.patch(f"{STS}/s", {"spec": {"replicas": 3}})
        await api.patch(f"{STS}/s/status", {"status": {"replicas": 2}})
        await api.patch(f"{STS}/s", {"metadata": {"labels": {"x": "y"}}}, kind="strategic-merge")
        for _ in range(50):
            if (
                await api.post(
                    "/api/v1/namespaces/inv/pods",
                    {"metadata": {"name": "p"}, "spec": BODY["spec"]["template"]["spec"]},
                )
            ).status == 201:
                break
        await defaults_added_to_a_crd_later(api)
        await api.delete("/api/v1/namespaces/inv")
        await api.get("/version")
        checked = 0
        for table in cluster.storage.tables.values():
            for change in table.mvcc:
                for entry in (change.entry, change.prev):
                    if entry is not None:
                        assert encode(entry.obj, table.sort_keys) == entry.raw, entry.key
                        checked += 1
        assert checked > 20
