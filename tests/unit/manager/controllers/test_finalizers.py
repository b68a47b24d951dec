"""manager.controllers.finalizers: a deleted controller's finalizer leaves the objects that carry
it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from loadtest.apiserver.inprocess import MemoryCluster
from manager.controllers.finalizers import Held, Removal, holding, remove
from manager.informers.store import Cached, Store
from manager.kinds.decorator import DecoratorView
from proto.api.decorator import parse_decorator_controller
from proto.kube import errors
from proto.kube.refusal import Refusal
from proto.kube.resources import Resource
from tests.unit.manager.informers.fakes import Stores

PODS = Resource("", "v1", "pods", "Pod", True)
OURS = "metacontroller.io/decoratorcontroller-dc"
OTHER = "example.com/keep"


class Cluster(MemoryCluster):
    """The in-memory cluster, plus the ``FinalizerWriter`` view of it (``writer``)."""

    @property
    def writer(self) -> Writer:
        return Writer(self)


class Writer:
    def __init__(self, cluster: MemoryCluster) -> None:
        self._cluster = cluster

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None, **_: Any
    ) -> dict[str, Any]:
        found = self._cluster.get(resource, namespace or "", name)
        if found is None:
            raise errors.NotFound(404, {"message": "not found"})
        return found

    async def patch(
        self, resource: Resource, name: str, patch: Any, *, namespace: str | None = None
    ) -> dict[str, Any]:
        return await self._cluster.patch(resource, name, patch, namespace=namespace)


async def pod(cluster: Cluster, name: str, finalizers: list[str]) -> dict[str, Any]:
    body = {"metadata": {"name": name, "finalizers": finalizers}}
    return await cluster.create(PODS, body, namespace="ns")


def held(obj: dict[str, Any]) -> Held:
    meta = obj["metadata"]
    return Held(PODS, "ns", meta["name"], tuple(meta["finalizers"]), meta["resourceVersion"])


@pytest.mark.asyncio
async def test_our_finalizer_goes_the_others_stay_even_after_a_conflict() -> None:
    cluster = Cluster()
    a = await pod(cluster, "a", [OTHER, OURS])
    b = await pod(cluster, "b", [OURS])
    stale = held(b)
    await cluster.patch(PODS, "b", {"metadata": {"labels": {"x": "y"}}}, namespace="ns")
    gone = Held(PODS, "ns", "gone", (OURS,), "1")
    assert await remove(cluster.writer, [held(a), stale, gone], OURS) == Removal(2)
    assert cluster.objects[("pods", "ns", "a")]["metadata"]["finalizers"] == [OTHER]
    assert not cluster.objects[("pods", "ns", "b")]["metadata"].get("finalizers")


@pytest.mark.asyncio
async def test_an_error_on_one_object_does_not_stop_the_others() -> None:
    cluster = Cluster()
    a = await pod(cluster, "a", [OURS])
    b = await pod(cluster, "b", [OURS])
    cluster.fail("PATCH", "a", errors.ServerError(500, {"message": "etcd"}))
    assert await remove(cluster.writer, [held(a), held(b)], OURS) == Removal(1)
    assert not cluster.objects[("pods", "ns", "b")]["metadata"].get("finalizers")


@pytest.mark.asyncio
async def test_what_a_403_refused_is_returned_once_and_the_others_go_on() -> None:
    cluster = Cluster()
    a = await pod(cluster, "a", [OURS])
    b = await pod(cluster, "b", [OURS])
    c = await pod(cluster, "c", [OURS])
    user = "system:serviceaccount:ms:metashard"
    for name in ("a", "c"):
        message = (
            f'pods "{name}" is forbidden: User "{user}" cannot patch resource "pods" in API '
            'group "" in the namespace "ns"'
        )
        forbidden = errors.Forbidden(403, {"message": message}, method="PATCH")
        cluster.fail("PATCH", name, forbidden)
    removal = await remove(cluster.writer, [held(a), held(b), held(c)], OURS)
    assert removal == Removal(1, (Refusal("patch", "pods", "", "ns", user),), left=2)
    assert not cluster.objects[("pods", "ns", "b")]["metadata"].get("finalizers")


def test_holding_lists_the_handled_resources_objects_with_the_finalizer() -> None:
    obj = {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "DecoratorController",
        "metadata": {"name": "dc"},
        "spec": {
            "resources": [{"apiVersion": "v1", "resource": "pods"}],
            "hooks": {"sync": {"webhook": {"url": "http://h/sync"}}},
        },
    }
    view = DecoratorView(parse_decorator_controller(obj), orjson.dumps(obj), "1", (PODS,), ())
    store = Store()
    for name, finalizers in (("a", [OURS]), ("b", [OTHER])):
        body = {"metadata": {"name": name, "namespace": "ns", "finalizers": finalizers}}
        store.upsert(Cached.from_object(body, orjson.dumps(body)))
    assert [h.name for h in holding(view, Stores(pods=store))] == ["a"]
