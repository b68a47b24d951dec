"""The Kubernetes client against a cluster (the embedded one, or a real one given a kubeconfig)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import pytest_asyncio

from proto.kube import errors
from proto.kube.client import PatchType
from proto.kube.resources import Discovery, Resource
from proto.kube.session import Session
from proto.kube.watch import ADDED, BOOKMARK, DELETED, MODIFIED
from tests.integration.conftest import Kube
from tests.integration.kube_helpers import CONFIGMAPS, CRDS, configmap, eventually, widget_crd


@pytest_asyncio.fixture
async def widgets(kube: Kube) -> AsyncIterator[Resource]:
    """A fresh Widget CRD in a group of its own, established and discoverable."""
    group = f"t{uuid.uuid4().hex[:8]}.example.com"
    await kube.client.create(CRDS, widget_crd(group))
    discovery = Discovery(kube.session, min_refresh_interval=0)

    async def resolved() -> Resource | None:
        with contextlib.suppress(errors.ResourceNotFound):
            return await discovery.resolve(f"{group}/v1", resource="widgets")
        return None

    try:
        yield await eventually(resolved)
    finally:
        await kube.client.delete(CRDS, f"widgets.{group}")


@pytest.mark.asyncio
async def test_discovery_resolves_built_ins_and_a_crd_that_appears(kube: Kube) -> None:
    configmaps = await kube.client.resource("v1", resource="configmaps")
    assert (configmaps.kind, configmaps.namespaced) == ("ConfigMap", True)
    deployments = await kube.client.resource("apps/v1", kind="Deployment")
    assert deployments.name == "deployments" and "status" in deployments.subresources
    namespaces = await kube.client.resource("v1", resource="ns")  # a short name
    assert namespaces.name == "namespaces" and not namespaces.namespaced

    group = f"t{uuid.uuid4().hex[:8]}.example.com"
    discovery = Discovery(kube.session, min_refresh_interval=0)
    with pytest.raises(errors.ResourceNotFound):
        await discovery.resolve(f"{group}/v1", resource="widgets")
    await kube.client.create(CRDS, widget_crd(group))
    try:

        async def resolved() -> Resource | None:
            with contextlib.suppress(errors.ResourceNotFound):
                return await discovery.resolve(f"{group}/v1", kind="Widget")
            return None

        found = await eventually(resolved)
        assert found.name == "widgets" and found.namespaced
        assert found.subresources == ("status",)
        assert "wdg" in found.short_names
        assert {"create", "get", "list", "watch", "patch"} <= set(found.verbs)
    finally:
        await kube.client.delete(CRDS, f"widgets.{group}")


@pytest.mark.asyncio
async def test_create_get_replace_with_optimistic_concurrency(kube: Kube, namespace: str) -> None:
    client = kube.client
    created = await client.create(CONFIGMAPS, configmap("c1", a="1"), namespace=namespace)
    assert created["metadata"]["namespace"] == namespace and created["data"] == {"a": "1"}
    with pytest.raises(errors.AlreadyExists):
        await client.create(CONFIGMAPS, configmap("c1"), namespace=namespace)
    got = await client.get(CONFIGMAPS, "c1", namespace=namespace)
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    got["data"]["b"] = "2"
    replaced = await client.replace(CONFIGMAPS, got)
    assert replaced["data"] == {"a": "1", "b": "2"}
    assert int(replaced["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"])
    with pytest.raises(errors.Conflict):
        await client.replace(CONFIGMAPS, got)  # the resourceVersion it carries is stale now
    unconditional = {**replaced, "metadata": {"name": "c1", "namespace": namespace}}
    unconditional["data"] = {"c": "3"}
    assert (await client.replace(CONFIGMAPS, unconditional))["data"] == {"c": "3"}
    with pytest.raises(errors.NotFound):
        await client.get(CONFIGMAPS, "missing", namespace=namespace)


@pytest.mark.asyncio
async def test_merge_json_and_strategic_patches(
    kube: Kube, namespace: str, widgets: Resource
) -> None:
    client = kube.client
    await client.create(
        CONFIGMAPS, configmap("p1", labels={"x": "1"}, a="1", b="2"), namespace=namespace
    )
    merged = await client.patch(
        CONFIGMAPS, "p1", {"data": {"a": None, "c": "3"}}, namespace=namespace
    )
    assert merged["data"] == {"b": "2", "c": "3"}
    patched = await client.patch(
        CONFIGMAPS,
        "p1",
        [
            {"op": "test", "path": "/data/b", "value": "2"},
            {"op": "replace", "path": "/data/b", "value": "20"},
            {"op": "add", "path": "/data/d", "value": "4"},
            {"op": "remove", "path": "/data/c"},
        ],
        namespace=namespace,
        patch_type=PatchType.JSON,
    )
    assert patched["data"] == {"b": "20", "d": "4"}
    with pytest.raises(errors.Invalid):
        await client.patch(
            CONFIGMAPS,
            "p1",
            [{"op": "test", "path": "/data/b", "value": "nope"}],
            namespace=namespace,
            patch_type=PatchType.JSON,
        )
    strategic = await client.patch(
        CONFIGMAPS,
        "p1",
        {"metadata": {"labels": {"y": "2"}}, "data": {"e": "5"}},
        namespace=namespace,
        patch_type=PatchType.STRATEGIC,
    )
    assert strategic["metadata"]["labels"] == {"x": "1", "y": "2"}
    assert strategic["data"] == {"b": "20", "d": "4", "e": "5"}
    stale = patched["metadata"]["resourceVersion"]
    with pytest.raises(errors.Conflict):  # optimistic concurrency through a patch
        await client.patch(
            CONFIGMAPS,
            "p1",
            {"metadata": {"resourceVersion": stale}, "data": {"f": "6"}},
            namespace=namespace,
        )
    await client.create(
        widgets,
        {"apiVersion": widgets.api_version, "kind": "Widget", "metadata": {"name": "w"}},
        namespace=namespace,
    )
    with pytest.raises(errors.UnsupportedMediaType):
        await client.patch(
            widgets, "w", {"spec": {"a": 1}}, namespace=namespace, patch_type=PatchType.STRATEGIC
        )


@pytest.mark.asyncio
async def test_status_subresource_is_separate_from_the_spec(
    kube: Kube, namespace: str, widgets: Resource
) -> None:
    client = kube.client
    body = {
        "apiVersion": widgets.api_version,
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 1},
    }
    created = await client.create(widgets, body, namespace=namespace)
    assert created["metadata"]["generation"] == 1
    status = await client.patch(
        widgets,
        "w1",
        {"status": {"ready": True}, "spec": {"size": 99}},
        namespace=namespace,
        subresource="status",
    )
    assert status["status"] == {"ready": True}
    assert status["spec"] == {"size": 1}  # spec in a status write is ignored
    assert status["metadata"]["generation"] == 1
    main = await client.patch(
        widgets, "w1", {"spec": {"size": 2}, "status": {"ready": False}}, namespace=namespace
    )
    assert main["status"] == {"ready": True}  # status in a main-resource write is ignored
    assert main["metadata"]["generation"] == 2
    main["status"] = {"ready": False, "phase": "Done"}
    replaced = await client.replace(widgets, main, subresource="status")
    assert replaced["status"] == {"ready": False, "phase": "Done"}
    assert replaced["metadata"]["generation"] == 2


@pytest.mark.asyncio
async def test_delete_preconditions(kube: Kube, namespace: str) -> None:
    client = kube.client
    created = await client.create(CONFIGMAPS, configmap("d1"), namespace=namespace)
    uid, rv = created["metadata"]["uid"], created["metadata"]["resourceVersion"]
    await client.patch(CONFIGMAPS, "d1", {"data": {"x": "1"}}, namespace=namespace)
    with pytest.raises(errors.Conflict):
        await client.delete(CONFIGMAPS, "d1", namespace=namespace, uid=str(uuid.uuid4()))
    with pytest.raises(errors.Conflict):
        await client.delete(CONFIGMAPS, "d1", namespace=namespace, resource_version=rv)
    status = await client.delete(CONFIGMAPS, "d1", namespace=namespace, uid=uid)
    assert status["kind"] == "Status" and status["status"] == "Success"
    with pytest.raises(errors.NotFound):
        await client.delete(CONFIGMAPS, "d1", namespace=namespace)


async def _owner_and_dependent(kube: Kube, namespace: str, prefix: str) -> tuple[str, str]:
    owner = await kube.client.create(CONFIGMAPS, configmap(f"{prefix}-owner"), namespace=namespace)
    dependent = configmap(f"{prefix}-dep")
    dependent["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "blockOwnerDeletion": True,
        }
    ]
    await kube.client.create(CONFIGMAPS, dependent, namespace=namespace)
    return f"{prefix}-owner", f"{prefix}-dep"


async def _gone(kube: Kube, namespace: str, name: str) -> bool | None:
    try:
        await kube.client.get(CONFIGMAPS, name, namespace=namespace)
    except errors.NotFound:
        return True
    return None


@pytest.mark.asyncio
async def test_delete_propagation_policies(kube: Kube, namespace: str) -> None:
    client = kube.client
    owner, dep = await _owner_and_dependent(kube, namespace, "fg")
    deleting = await client.delete(
        CONFIGMAPS, owner, namespace=namespace, propagation_policy="Foreground"
    )
    assert deleting["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in deleting["metadata"]["finalizers"]
    await eventually(lambda: _gone(kube, namespace, dep))
    await eventually(lambda: _gone(kube, namespace, owner))

    owner, dep = await _owner_and_dependent(kube, namespace, "bg")
    status = await client.delete(
        CONFIGMAPS, owner, namespace=namespace, propagation_policy="Background"
    )
    assert status["status"] == "Success"
    assert await _gone(kube, namespace, owner)
    await eventually(lambda: _gone(kube, namespace, dep))

    owner, dep = await _owner_and_dependent(kube, namespace, "or")
    orphaning = await client.delete(
        CONFIGMAPS, owner, namespace=namespace, propagation_policy="Orphan"
    )
    assert "orphan" in orphaning["metadata"]["finalizers"]
    await eventually(lambda: _gone(kube, namespace, owner))
    survivor = await client.get(CONFIGMAPS, dep, namespace=namespace)
    assert not survivor["metadata"].get("ownerReferences")


@pytest.mark.asyncio
async def test_list_with_selectors_and_pagination(kube: Kube, namespace: str) -> None:
    labels = {"a": "web", "b": "web", "c": "db", "d": "db", "e": "cache"}
    for name, app in labels.items():
        tier = {"tier": "front"} if app == "web" else {}
        await kube.client.create(
            CONFIGMAPS, configmap(name, labels={"app": app, **tier}), namespace=namespace
        )
    gets: list[int | None] = []

    class Count:
        def attempted(self, *, host: str, method: str, status: int | None, seconds: float) -> None:
            if method == "GET":
                gets.append(status)

        def throttled(self, *, host: str, method: str, seconds: float) -> None:
            pass

    async with Session(kube.config, qps=0, metrics=Count()) as session:
        from proto.kube.client import Client

        client = Client(session)

        async def names(**kwargs: Any) -> list[str]:
            listed = await client.list(CONFIGMAPS, namespace=namespace, **kwargs)
            return [item["metadata"]["name"] for item in listed.items]

        assert await names(label_selector="app=web") == ["a", "b"]
        assert await names(label_selector="app in (db,cache)") == ["c", "d", "e"]
        assert await names(label_selector="app,!tier") == ["c", "d", "e"]
        assert await names(label_selector="app,app!=web,app!=db") == ["e"]
        assert await names(field_selector="metadata.name=c") == ["c"]
        assert await names(label_selector="app=db", field_selector="metadata.name!=c") == ["d"]
        with pytest.raises(errors.BadRequest):
            await names(label_selector="app in (web")
        gets.clear()
        everything = await client.list(CONFIGMAPS, namespace=namespace, limit=2)
        names_paged = [item["metadata"]["name"] for item in everything.items]
        assert [n for n in names_paged if n in labels] == ["a", "b", "c", "d", "e"]
        assert len(gets) >= 3  # followed the continue tokens page by page
        assert all(item["kind"] == "ConfigMap" for item in everything.items)
        assert [orjson.loads(raw) for raw in everything.raws] == everything.items
        assert int(everything.resource_version) > 0


@pytest.mark.asyncio
@pytest.mark.embedded_settings(bookmark_interval=0.3)
async def test_watch_delivers_changes_in_order_then_bookmarks(kube: Kube, namespace: str) -> None:
    client = kube.client
    start = await client.list(CONFIGMAPS, namespace=namespace)
    events = client.watch(CONFIGMAPS, namespace=namespace, resource_version=start.resource_version)
    seen: list[tuple[str, str]] = []
    last_rv = 0
    bookmark_wait = 5.0 if kube.embedded else 75.0  # a real server: about once a minute

    async def writes() -> None:
        await client.create(CONFIGMAPS, configmap("w1", v="1"), namespace=namespace)
        await client.patch(CONFIGMAPS, "w1", {"data": {"v": "2"}}, namespace=namespace)
        await client.delete(CONFIGMAPS, "w1", namespace=namespace)

    writer = asyncio.create_task(writes())
    async with contextlib.aclosing(events):
        async with asyncio.timeout(bookmark_wait + 10):
            async for event in events:
                if event.type == BOOKMARK:
                    if len(seen) == 3:
                        assert int(event.resource_version) >= last_rv
                        break
                    continue
                seen.append((event.type, event.object["metadata"]["name"]))
                assert int(event.resource_version) > last_rv
                last_rv = int(event.resource_version)
    await writer
    assert seen == [(ADDED, "w1"), (MODIFIED, "w1"), (DELETED, "w1")]


@pytest.mark.asyncio
async def test_watch_from_expired_history_raises_gone(kube: Kube, namespace: str) -> None:
    faults = kube.faults()
    client = kube.client
    old = (await client.list(CONFIGMAPS, namespace=namespace)).resource_version
    await client.create(CONFIGMAPS, configmap("g1"), namespace=namespace)
    await client.patch(CONFIGMAPS, "g1", {"data": {"x": "1"}}, namespace=namespace)
    faults.expire_history()
    with pytest.raises(errors.Gone):
        async for _ in client.watch(CONFIGMAPS, namespace=namespace, resource_version=old):
            pass


@pytest.mark.asyncio
async def test_429_is_retried_after_retry_after_and_500_is_raised(
    kube: Kube, namespace: str
) -> None:
    faults = kube.faults()
    client = kube.client
    await client.create(CONFIGMAPS, configmap("r1"), namespace=namespace)
    path = f"/namespaces/{namespace}/configmaps/r1"
    faults.fail(2, status=429, method="GET", path=path, retry_after=1)
    started = time.monotonic()
    got = await client.get(CONFIGMAPS, "r1", namespace=namespace)
    assert got["metadata"]["name"] == "r1"
    assert time.monotonic() - started >= 2.0  # waited Retry-After twice
    assert not kube.cluster.faults.errors  # type: ignore[union-attr]

    async with Session(kube.config, qps=0, max_retries=1) as impatient:
        from proto.kube.client import Client

        faults.fail(3, status=429, method="GET", path=path, retry_after=1)
        with pytest.raises(errors.TooManyRequests) as raised:
            await Client(impatient).get(CONFIGMAPS, "r1", namespace=namespace)
        assert raised.value.retry_after == 1.0
        faults.clear()

    faults.fail(1, status=500, method="GET", path=path)
    with pytest.raises(errors.ServerError):
        await client.get(CONFIGMAPS, "r1", namespace=namespace)
    assert (await client.get(CONFIGMAPS, "r1", namespace=namespace))["metadata"]["name"] == "r1"
