"""Namespaces: defaults, the default ServiceAccount, deletion with content."""

from __future__ import annotations

from typing import Any

import pytest

from loadtest.apiserver import Settings
from proto.runtime.clock import FakeClock
from tests.integration.apiserver_client import Api, running

WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


async def widgets(api: Api) -> None:
    reply = await api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", WIDGETS)
    assert reply.status == 201, reply.body


def conditions(namespace: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c["message"]) for c in namespace["status"].get("conditions", [])
    }


@pytest.mark.asyncio
async def test_system_namespaces_and_default_service_accounts_exist() -> None:
    async with running() as (_, api):
        names = [n["metadata"]["name"] for n in (await api.get("/api/v1/namespaces")).body["items"]]
        assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
        accounts = await api.get("/api/v1/serviceaccounts")
        assert {
            (a["metadata"]["namespace"], a["metadata"]["name"]) for a in accounts.body["items"]
        } == {(n, "default") for n in names}
        service = await api.get("/api/v1/namespaces/default/services/kubernetes")
        assert service.body["spec"]["clusterIP"] == "10.96.0.1"


@pytest.mark.asyncio
async def test_a_deleted_default_service_account_comes_back() -> None:
    async with running() as (_, api):
        await api.namespace("sa")
        path = "/api/v1/namespaces/sa/serviceaccounts/default"
        first = (await api.get(path)).meta["uid"]
        await api.delete(path)
        again = await api.get(path)
        assert again.status == 200 and again.meta["uid"] != first


@pytest.mark.asyncio
async def test_deletion_removes_content_then_the_namespace() -> None:
    async with running() as (_, api):
        await widgets(api)
        await api.namespace("doomed")
        await api.configmap("doomed", "plain")
        await api.configmap("doomed", "held", finalizers=["example.com/hold"])
        widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
        assert (
            await api.post("/apis/example.com/v1/namespaces/doomed/widgets", widget)
        ).status == 201
        reply = await api.delete("/api/v1/namespaces/doomed")
        assert reply.status == 200 and reply.body["status"]["phase"] == "Terminating"
        refused = await api.post(
            "/api/v1/namespaces/doomed/configmaps", {"metadata": {"name": "late"}}
        )
        assert refused.status == 403
        assert refused.body["details"]["causes"][0]["reason"] == "NamespaceTerminating"
        await api.wait_gone("/api/v1/namespaces/doomed/configmaps/plain")
        await api.wait_gone("/apis/example.com/v1/namespaces/doomed/widgets/w")
        await api.wait_gone("/api/v1/namespaces/doomed/serviceaccounts/default")
        namespace = (await api.get("/api/v1/namespaces/doomed")).body
        found = conditions(namespace)
        assert found["NamespaceContentRemaining"] == (
            "True",
            "Some resources are remaining: configmaps. has 1 resource instances",
        )
        assert found["NamespaceFinalizersRemaining"][0] == "True"
        await api.patch(
            "/api/v1/namespaces/doomed/configmaps/held", {"metadata": {"finalizers": None}}
        )
        await api.wait_gone("/api/v1/namespaces/doomed")
        gone = await api.post(
            "/api/v1/namespaces/doomed/configmaps", {"metadata": {"name": "after"}}
        )
        assert gone.status == 404
        assert (await api.get("/api/v1/namespaces/doomed/configmaps")).body["items"] == []


@pytest.mark.asyncio
async def test_the_namespace_controller_waits_its_grace_period() -> None:
    clock = FakeClock()
    async with running(clock=clock, settings=Settings(namespace_deletion_delay=5.0)) as (_, api):
        await api.namespace("slow")
        await api.configmap("slow", "c")
        await api.delete("/api/v1/namespaces/slow")
        await api.get("/version")
        assert (await api.get("/api/v1/namespaces/slow/configmaps/c")).status == 200
        clock.advance(5.0)
        await api.wait_gone("/api/v1/namespaces/slow")


@pytest.mark.asyncio
async def test_system_namespaces_cannot_be_deleted() -> None:
    async with running() as (_, api):
        for name in ("default", "kube-system", "kube-public"):
            reply = await api.delete(f"/api/v1/namespaces/{name}")
            assert reply.status == 403
            assert reply.body["message"] == (
                f'namespaces "{name}" is forbidden: this namespace may not be deleted'
            )


@pytest.mark.asyncio
async def test_namespace_spec_finalizers_change_only_through_finalize() -> None:
    async with running() as (_, api):
        await api.namespace("fin")
        put = await api.put(
            "/api/v1/namespaces/fin", {"metadata": {"name": "fin"}, "spec": {"finalizers": []}}
        )
        assert put.body["spec"]["finalizers"] == ["kubernetes"]
        assert put.meta["labels"] == {"kubernetes.io/metadata.name": "fin"}
        final = await api.put(
            "/api/v1/namespaces/fin/finalize",
            {"metadata": {"name": "fin"}, "spec": {"finalizers": []}},
        )
        assert final.status == 200 and final.body["spec"].get("finalizers", []) == []
