"""A kind defined outside workers/ (``tests.unit.workers.kinds.minimal``) plugs into the
workers' registry and reconciles parents through the shared sync template."""

from __future__ import annotations

from typing import Any, cast

import orjson
import pytest
from prometheus_client import CollectorRegistry

from loadtest.apiserver.inprocess import MemoryCluster, ScriptedHooks
from proto.api.names import REASON_SYNC_ERROR
from proto.kube.resources import Resource
from proto.wire import ControllerDef, ControllerKind, ParentKey, ResourceInfo
from tests.unit.workers.composite_world import Events
from tests.unit.workers.kinds import minimal
from workers.kinds import registry
from workers.kinds.plugins import Reconcilers, UnsupportedController, WorkerContext, load
from workers.reconcile import Reconciler, ReconcileRequest
from workers.sync.errors import SyncFailure
from workers.sync.template import SyncTemplate

pytestmark = pytest.mark.asyncio

THINGS = Resource("test.metashard.io", "v1", "things", "Thing", True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
NS = "ns"
DEFINITION = ControllerDef(
    cast(ControllerKind, minimal.KIND),  # a kind proto.wire does not know: a plain name
    "m",
    "m-uid",
    "1",
    orjson.dumps(
        {"kind": minimal.KIND, "metadata": {"name": "m"}, "spec": {"hook": "http://hook/sync"}}
    ),
    (
        ResourceInfo("test.metashard.io/v1", "things", "Thing", True, ()),
        ResourceInfo("v1", "configmaps", "ConfigMap", True, ()),
    ),
)


class World:
    def __init__(self) -> None:
        self.cluster = MemoryCluster()
        self.events = Events()
        self.wanted: list[str] = ["a", "b"]
        self.hooks = ScriptedHooks(self._respond)
        client: Any = self.cluster
        context = WorkerContext(
            worker_id="w",
            client=client,
            writer=client,
            http=cast(Any, None),
            registry=CollectorRegistry(),
            hooks=cast(Any, self.hooks),
            events=cast(Any, self.events),
        )
        self.factory = Reconcilers(context, registry(minimal))
        self.reconciler: Reconciler = self.factory(DEFINITION)

    def _respond(self, request: dict[str, Any]) -> bytes:
        name = request["parent"]["metadata"]["name"]
        children = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{name}-{suffix}"},
                "data": {"from": name},
            }
            for suffix in self.wanted
        ]
        return orjson.dumps({"children": children})

    async def sync(self, name: str = "p") -> None:
        key = ParentKey(minimal.KIND, "m", "things.test.metashard.io", NS, name)
        snapshot = self.cluster.snapshot(key, THINGS, [CONFIGMAPS])
        self.cluster.calls.clear()
        await self.reconciler.reconcile(ReconcileRequest(key, snapshot))


async def parent(world: World, name: str = "p") -> dict[str, Any]:
    body = {"apiVersion": "test.metashard.io/v1", "kind": "Thing", "metadata": {"name": name}}
    return await world.cluster.create(THINGS, body, namespace=NS)


async def test_the_registry_takes_a_kind_package_from_elsewhere() -> None:
    kinds = registry(minimal)
    assert set(kinds) == {*ControllerKind, minimal.KIND}
    assert kinds[minimal.KIND] is minimal.steps
    assert minimal.KIND not in registry()  # the built-in registry is left as it was
    with pytest.raises(RuntimeError, match="two packages implement MinimalController"):
        registry(minimal, minimal)


async def test_a_test_kind_reconciles_a_parent_through_the_sync_template() -> None:
    world = World()
    assert isinstance(world.reconciler, SyncTemplate)
    owner = await parent(world)
    await world.sync()
    assert world.cluster.writes() == [
        ("POST", "configmaps", "", NS, "p-a"),
        ("POST", "configmaps", "", NS, "p-b"),
    ]
    child = world.cluster.get(CONFIGMAPS, NS, "p-a")
    assert child is not None and child["data"] == {"from": "p"}
    reference = child["metadata"]["ownerReferences"][0]
    assert (reference["kind"], reference["uid"], reference["controller"]) == (
        "Thing",
        owner["metadata"]["uid"],
        True,
    )
    endpoint, request = world.hooks.requests[0]
    assert endpoint.controller_type == minimal.KIND and endpoint.webhook.url == "http://hook/sync"
    assert request["children"] == {"ConfigMap.v1": {}} and request["finalizing"] is False

    await world.sync()  # level-based: the same answer again writes nothing
    assert world.cluster.writes() == []
    assert set(world.hooks.requests[1][1]["children"]["ConfigMap.v1"]) == {"ns/p-a", "ns/p-b"}

    world.wanted = ["b"]
    await world.sync()
    assert world.cluster.writes() == [("DELETE", "configmaps", "", NS, "p-a")]


async def test_a_bad_answer_fails_the_sync_with_the_template_s_event() -> None:
    world = World()
    await parent(world)
    world.hooks.respond = lambda request: orjson.dumps(
        {"children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}]}
    )
    with pytest.raises(SyncFailure, match="not one of the controller's childResources"):
        await world.sync()
    assert world.cluster.writes() == []
    assert [(e[0], e[2]) for e in world.events.emitted] == [("p", REASON_SYNC_ERROR)]


async def test_the_kind_runs_under_a_worker_through_reconciler_flag() -> None:
    world = World()
    builder = load("tests.unit.workers.kinds.minimal:builder")
    factory = builder(world.factory.context)
    assert isinstance(factory(DEFINITION), SyncTemplate)
    unknown = ControllerDef(cast(ControllerKind, "OtherController"), "o", "u", "1", b"{}", ())
    with pytest.raises(UnsupportedController, match="OtherController"):
        factory(unknown)
