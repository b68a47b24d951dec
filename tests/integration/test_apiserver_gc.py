"""Garbage collection by ownerReferences, end to end over HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.apiserver_client import Api, running

NS = "gc"
CM = f"/api/v1/namespaces/{NS}/configmaps"


def ref(
    owner: dict[str, Any], *, block: bool = True, controller: bool | None = None
) -> dict[str, Any]:
    meta = owner["metadata"]
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"], "uid": meta["uid"]}
    if controller is not None:
        reference["controller"] = controller
    reference["blockOwnerDeletion"] = block
    return reference


async def family(api: Api, owner: str, *dependents: str) -> dict[str, Any]:
    parent: dict[str, Any] = (await api.configmap(NS, owner)).body
    for name in dependents:
        await api.configmap(NS, name, ownerReferences=[ref(parent)])
    return parent


@pytest.mark.asyncio
async def test_background_deletes_the_owner_at_once_and_the_dependents_after() -> None:
    async with running() as (_, api):
        await api.namespace(NS)
        await family(api, "owner", "dep-a", "dep-b")
        reply = await api.delete(f"{CM}/owner", {"propagationPolicy": "Background"})
        assert reply.status == 200 and reply.body["kind"] == "Status"
        assert (await api.get(f"{CM}/owner")).status == 404
        await api.wait_gone(f"{CM}/dep-a")
        await api.wait_gone(f"{CM}/dep-b")


@pytest.mark.asyncio
async def test_default_policy_is_background() -> None:
    async with running() as (_, api):
        await api.namespace(NS)
        await family(api, "owner", "dep")
        assert (await api.delete(f"{CM}/owner")).body["status"] == "Success"
        await api.wait_gone(f"{CM}/dep")


@pytest.mark.asyncio
async def test_foreground_waits_for_blocking_dependents_then_removes_the_owner() -> None:
    async with running() as (_, api):
        await api.namespace(NS)
        parent = await family(api, "owner", "dep")
        held = {"finalizers": ["example.com/hold"], "ownerReferences": [ref(parent)]}
        await api.configmap(NS, "held", **held)
        reply = await api.delete(f"{CM}/owner", {"propagationPolicy": "Foreground"})
        assert reply.status == 200
        assert reply.meta["finalizers"] == ["foregroundDeletion"]
        assert reply.meta["deletionGracePeriodSeconds"] == 0
        await api.wait_gone(f"{CM}/dep")
        held_now = await api.get(f"{CM}/held")
        assert held_now.meta["deletionTimestamp"]
        owner = await api.get(f"{CM}/owner")
        assert owner.status == 200, "a blocking dependent with a finalizer keeps the owner"
        await api.patch(f"{CM}/held", {"metadata": {"finalizers": None}})
        await api.wait_gone(f"{CM}/held")
        await api.wait_gone(f"{CM}/owner")


@pytest.mark.asyncio
async def test_foreground_does_not_wait_for_non_blocking_dependents() -> None:
    async with running() as (_, api):
        await api.namespace(NS)
        parent = (await api.configmap(NS, "owner")).body
        await api.configmap(
            NS, "loose", finalizers=["example.com/hold"], ownerReferences=[ref(parent, block=False)]
        )
        await api.delete(f"{CM}/owner", propagationPolicy="Foreground")
        await api.wait_gone(f"{CM}/owner")
        assert (await api.get(f"{CM}/loose")).meta["deletionTimestamp"]


@pytest.mark.asyncio
async def test_foreground_cascades_through_grandchildren() -> None:
    async with running() as (_, api):
        await api.namespace(NS)
        parent = (await api.configmap(NS, "grand")).body
        child = (await api.configmap(NS, "child", ownerReferences=[ref(parent)])).body
        await api.configmap(NS, "leaf", ownerReferences=[ref(child)])
        await api.delete(f"{CM}/grand", propagationPolicy="Foreground")
        for name in ("leaf", "child", "grand"):
            await api.wait_gone(f"{CM}/{name}")


@pytest.mark.asyncio
async def test_orphan_strips_owner_references_and_keeps_dependents() -> None:
    async with running() as (_, api):
        await api.namespace(NS)
        parent = await family(api, "owner", "dep")
        other = (await api.configmap(NS, "other")).body
        both = [ref(parent), ref(other)]
        await api.configmap(NS, "shared", ownerReferences=both)
        reply = await api.delete(f"{CM}/owner", {"propagationPolicy": "Orphan"})
        assert reply.meta["finalizers"] == ["orphan"]
        await api.wait_gone(f"{CM}/owner")
        dep = await api.get(f"{CM}/dep")
        assert dep.status == 200 and "ownerReferences" not in dep.meta
        shared = await api.get(f"{CM}/shared")
        assert [r["name"] for r in shared.meta["ownerReferences"]] == ["other"]


@pytest.mark.asyncio
async def test_orphan_dependents_true_means_orphan() -> None:
    async with running() as (_, api):
        await api.namespace(NS)
        await family(api, "owner", "dep")
        await api.delete(f"{CM}/owner", {"orphanDependents": True})
        await api.wait_gone(f"{CM}/owner")
        assert (await api.get(f"{CM}/dep")).status == 200


@pytest.mark.asyncio
async def test_a_dependent_of_a_missing_owner_is_collected() -> None:
    async with running() as (_, api):
        await api.namespace(NS)
        ghost = {"metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-00000000dead"}}
        await api.configmap(NS, "stray", ownerReferences=[ref(ghost)])
        await api.wait_gone(f"{CM}/stray")


@pytest.mark.asyncio
async def test_a_dependent_with_a_live_owner_only_loses_the_dangling_reference() -> None:
    async with running() as (_, api):
        await api.namespace(NS)
        alive = (await api.configmap(NS, "alive")).body
        ghost = {"metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-00000000dead"}}
        await api.configmap(NS, "kept", ownerReferences=[ref(alive), ref(ghost)])
        for _ in range(100):
            refs = (await api.get(f"{CM}/kept")).meta["ownerReferences"]
            if len(refs) == 1:
                break
        assert [r["name"] for r in refs] == ["alive"]


@pytest.mark.asyncio
async def test_references_to_unserved_kinds_are_left_alone() -> None:
    async with running() as (_, api):
        await api.namespace(NS)
        unknown = {"apiVersion": "nowhere.example/v1", "kind": "Thing", "name": "t", "uid": "u-1"}
        await api.configmap(NS, "odd", ownerReferences=[unknown])
        await api.get("/version")
        assert (await api.get(f"{CM}/odd")).status == 200


@pytest.mark.asyncio
async def test_cluster_scoped_owner_of_a_namespaced_dependent() -> None:
    async with running() as (_, api):
        owner = (await api.namespace("owner-ns")).body
        await api.namespace(NS)
        reference = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "name": "owner-ns",
            "uid": owner["metadata"]["uid"],
        }
        await api.configmap(NS, "tied", ownerReferences=[reference])
        await api.delete("/api/v1/namespaces/owner-ns")
        await api.wait_gone("/api/v1/namespaces/owner-ns")
        await api.wait_gone(f"{CM}/tied")
