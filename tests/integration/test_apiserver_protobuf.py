"""Protobuf request bodies over HTTP: create, update, delete options, and what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.apiserver_client import Api, running
from tests.protobuf_wire import encode, envelope

PROTOBUF = {"Content-Type": "application/vnd.kubernetes.protobuf"}


async def send(api: Api, method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    async with api.session.request(method, api.url + path, data=body, headers=PROTOBUF) as r:
        return r.status, await r.json()


def configmap(name: str, data: dict[str, str]) -> bytes:
    return envelope(
        "v1", "ConfigMap", encode("ConfigMap", {"metadata": {"name": name}, "data": data})
    )


@pytest.mark.asyncio
async def test_create_update_and_delete_with_protobuf_bodies() -> None:
    async with running() as (_, api):
        await api.namespace("pb")
        base = "/api/v1/namespaces/pb/configmaps"
        status, created = await send(api, "POST", base, configmap("c", {"a": "1"}))
        assert status == 201 and created["data"] == {"a": "1"}
        status, updated = await send(api, "PUT", f"{base}/c", configmap("c", {"a": "2"}))
        assert status == 200 and updated["data"] == {"a": "2"}

        wrong_uid = envelope(
            "v1", "DeleteOptions", encode("DeleteOptions", {"preconditions": {"uid": "nope"}})
        )
        status, conflict = await send(api, "DELETE", f"{base}/c", wrong_uid)
        assert status == 409 and conflict["reason"] == "Conflict"
        orphan = envelope(
            "apps/v1", "DeleteOptions", encode("DeleteOptions", {"propagationPolicy": "Orphan"})
        )
        status, _ = await send(api, "DELETE", f"{base}/c", orphan)
        assert status == 200
        assert (await api.get(f"{base}/c")).status == 404


@pytest.mark.asyncio
async def test_deployments_arrive_whole_and_bad_bodies_are_refused() -> None:
    async with running() as (_, api):
        await api.namespace("pb")
        deployment = {
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]},
                },
            },
        }
        raw = envelope("apps/v1", "Deployment", encode("Deployment", deployment))
        status, body = await send(api, "POST", "/apis/apps/v1/namespaces/pb/deployments", raw)
        assert status == 201, body
        assert body["spec"]["replicas"] == 0
        assert body["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx"

        node = envelope("v1", "Node", b"")
        status, body = await send(api, "POST", "/api/v1/namespaces/pb/configmaps", node)
        assert status == 415 and "not v1, Kind=Node" in body["message"]
        status, body = await send(api, "POST", "/api/v1/namespaces/pb/configmaps", b"k8s\x00\x0a")
        assert status == 400 and body["message"].startswith(
            "the object provided is unrecognized (must be of type ConfigMap)"
        )
        no_image = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "p"}]}}
        raw = envelope("v1", "Pod", encode("Pod", no_image))
        status, body = await send(api, "POST", "/api/v1/namespaces/pb/pods", raw)
        assert status == 422
        assert body["message"] == 'Pod "p" is invalid: spec.containers[0].image: Required value'
