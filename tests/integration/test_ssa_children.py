"""workers.sync.ssa_writes on a cluster through the real client: creates, the cache, field
managers, the upgrade from dynamic apply, Recreate's dry run and conflicts without force."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from proto.api.controllers import UpdateMethod
from proto.api.hooks import DesiredChild
from proto.api.names import LAST_APPLIED_ANNOTATION, REASON_APPLY_CONFLICT
from proto.api.objectmap import TypeKey
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from proto.wire import ParentKey
from tests.integration.conftest import Kube
from workers.apply import ControllerRef, create_body
from workers.sync import children
from workers.sync.apply_metrics import ApplyResult
from workers.sync.observed import Observed
from workers.sync.ssa_writes import ChildApplier, ServerSideApply

pytestmark = pytest.mark.asyncio

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
CM = TypeKey("v1", "ConfigMap")
POD = TypeKey("v1", "Pod")
TARGETS = {
    CM: children.Target(CONFIGMAPS, "configmaps"),
    POD: children.Target(PODS, "pods"),
}
KEY = ParentKey("CompositeController", "c", "things.example.com", "ns", "p")


class Events:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str]] = []

    def emit(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        self.emitted.append((type, reason, message))


class Metrics:
    def __init__(self) -> None:
        self.counts: Counter[ApplyResult] = Counter()

    def count(self, controller: str, result: ApplyResult) -> None:
        self.counts[result] += 1

    def forget_controller(self, controller: str) -> None:
        pass


class World:
    """One parent (a ConfigMap stands in: it only needs a uid) and an applier."""

    def __init__(self, client: Client, namespace: str, parent: dict[str, Any], force: bool):
        self.client = client
        self.namespace = namespace
        self.parent = parent
        self.owner = ControllerRef(
            "v1", "ConfigMap", parent["metadata"]["name"], parent["metadata"]["uid"]
        )
        self.events = Events()
        self.metrics = Metrics()
        self.ssa = ServerSideApply(
            client, field_manager="metacontroller", events=self.events, metrics=self.metrics
        )
        annotations = {} if force else {"metashard.io/apply-force": "false"}
        self.controller = {"metadata": {"name": "c", "annotations": annotations}}
        self.writes: list[str] = []

    def applier(self, type_key: TypeKey, method: UpdateMethod) -> ChildApplier:
        """The controller's applier, with ``method`` for ``type_key`` (the cache is shared)."""
        types = children.ChildTypes(TARGETS, {type_key: method}, ())
        return self.ssa.for_controller(
            controller=self.controller, queue="CompositeController-c", types=types
        )

    def wrote(self, group_resource: str, obj: Mapping[str, Any], *, action: str = "") -> None:
        self.writes.append(action)

    async def observed(self, type_key: TypeKey, *names: str) -> dict[TypeKey, list[Observed]]:
        found: list[Observed] = []
        for name in names:
            try:
                obj = await self.client.get(
                    TARGETS[type_key].resource, name, namespace=self.namespace
                )
            except errors.NotFound:
                continue
            found.append(Observed.of(orjson.dumps(obj), obj))
        return {type_key: found}

    async def sync(
        self,
        type_key: TypeKey,
        method: UpdateMethod,
        *objects: dict[str, Any],
        observe: tuple[str, ...] = (),
    ) -> list[str]:
        """Run the applier with these desired children; observed are those of the same
        names, and of ``observe``."""
        names = [o["metadata"]["name"] for o in objects] + list(observe)
        desired = [
            DesiredChild(
                type_key,
                self.namespace,
                o["metadata"]["name"],
                {**o, "metadata": {**o["metadata"], "namespace": self.namespace}},
            )
            for o in objects
        ]
        observed = await self.observed(type_key, *names)
        wanted = children.Wanted(KEY, self.parent, self.owner, observed, desired)
        return await self.applier(type_key, method).run(wanted, self.wrote)


async def _world(kube: Kube, namespace: str, *, force: bool = True) -> World:
    parent = await kube.client.create(
        CONFIGMAPS, {"metadata": {"name": "parent"}}, namespace=namespace
    )
    return World(kube.client, namespace, parent, force)


def _cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _managers(obj: Mapping[str, Any]) -> set[tuple[str, str]]:
    return {(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields", [])}


async def test_create_then_skip_by_the_cache_then_update(kube: Kube, namespace: str) -> None:
    world = await _world(kube, namespace)
    assert await world.sync(CM, UpdateMethod.IN_PLACE, _cm("a", x="1")) == []
    child = await kube.client.get(CONFIGMAPS, "a", namespace=namespace)
    assert child["data"] == {"x": "1"}
    assert child["metadata"]["ownerReferences"] == [world.owner.as_owner_reference()]
    assert LAST_APPLIED_ANNOTATION not in (child["metadata"].get("annotations") or {})
    assert ("metacontroller", "Apply") in _managers(child)

    assert await world.sync(CM, UpdateMethod.IN_PLACE, _cm("a", x="1")) == []
    assert world.metrics.counts == {ApplyResult.SENT: 1, ApplyResult.SKIPPED: 1}
    assert world.writes == ["apply"]

    assert await world.sync(CM, UpdateMethod.IN_PLACE, _cm("a", x="2")) == []
    child = await kube.client.get(CONFIGMAPS, "a", namespace=namespace)
    assert child["data"] == {"x": "2"}
    assert world.metrics.counts[ApplyResult.SENT] == 2

    world.ssa.discard(lambda key: key == KEY)  # the slot moved away and back: cold
    assert await world.sync(CM, UpdateMethod.IN_PLACE, _cm("a", x="2")) == []
    assert world.metrics.counts[ApplyResult.SENT] == 3


async def test_on_delete_never_patches_and_undesired_children_go(
    kube: Kube, namespace: str
) -> None:
    world = await _world(kube, namespace)
    await world.sync(CM, UpdateMethod.ON_DELETE, _cm("a", x="1"), _cm("b", x="1"))
    await world.sync(CM, UpdateMethod.ON_DELETE, _cm("a", x="2"), observe=("b",))
    child = await kube.client.get(CONFIGMAPS, "a", namespace=namespace)
    assert child["data"] == {"x": "1"}
    with pytest.raises(errors.NotFound):
        await kube.client.get(CONFIGMAPS, "b", namespace=namespace)


async def test_another_managers_field_survives_and_a_dropped_field_goes(
    kube: Kube, namespace: str
) -> None:
    world = await _world(kube, namespace)
    await world.sync(CM, UpdateMethod.IN_PLACE, _cm("a", x="1", y="1"))
    other = {**_cm("a", theirs="t"), "metadata": {"name": "a", "namespace": namespace}}
    await kube.client.apply(CONFIGMAPS, other, field_manager="someone-else")
    await world.sync(CM, UpdateMethod.IN_PLACE, _cm("a", x="1"))
    child = await kube.client.get(CONFIGMAPS, "a", namespace=namespace)
    assert child["data"] == {"x": "1", "theirs": "t"}


async def test_a_child_written_by_dynamic_apply_is_migrated(kube: Kube, namespace: str) -> None:
    world = await _world(kube, namespace)
    old = _cm("a", x="1", stale="s")
    old["metadata"]["namespace"] = namespace
    body = create_body(old, world.owner)  # as dynamic apply creates it
    await kube.client.create(CONFIGMAPS, body, namespace=namespace)
    created = await kube.client.get(CONFIGMAPS, "a", namespace=namespace)
    assert ("metashard", "Update") in _managers(created)

    assert await world.sync(CM, UpdateMethod.IN_PLACE, _cm("a", x="2")) == []
    child = await kube.client.get(CONFIGMAPS, "a", namespace=namespace)
    assert child["data"] == {"x": "2"}  # "stale" really went
    assert LAST_APPLIED_ANNOTATION not in (child["metadata"].get("annotations") or {})
    assert ("metashard", "Update") not in _managers(child)
    assert world.writes == ["migrate", "apply"]


async def test_a_recreate_child_of_dynamic_apply_is_migrated_without_a_recreate(
    kube: Kube, namespace: str
) -> None:
    world = await _world(kube, namespace)
    old = _cm("a", x="1")
    old["metadata"]["namespace"] = namespace
    created = await kube.client.create(CONFIGMAPS, create_body(old, world.owner))
    assert await world.sync(CM, UpdateMethod.RECREATE, _cm("a", x="1")) == []
    child = await kube.client.get(CONFIGMAPS, "a", namespace=namespace)
    assert child["metadata"]["uid"] == created["metadata"]["uid"]
    assert LAST_APPLIED_ANNOTATION not in (child["metadata"].get("annotations") or {})
    assert world.writes == ["migrate"]  # the dry run found nothing else to change


def _pod(name: str, image: str) -> dict[str, Any]:
    env = [{"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": image, "env": env}]},
    }


async def test_recreate_dry_runs_and_deletes_only_on_a_real_change(
    kube: Kube, namespace: str
) -> None:
    world = await _world(kube, namespace)
    await world.sync(POD, UpdateMethod.RECREATE, _pod("p", "img:1"))
    first = await kube.client.get(PODS, "p", namespace=namespace)
    assert await world.sync(POD, UpdateMethod.RECREATE, _pod("p", "img:1")) == []
    assert world.metrics.counts == {ApplyResult.SENT: 1, ApplyResult.SKIPPED: 1}
    world.ssa.discard(lambda key: True)  # cold: the dry run decides
    for _ in range(2):  # a server-defaulted fieldRef.apiVersion is no difference
        assert await world.sync(POD, UpdateMethod.RECREATE, _pod("p", "img:1")) == []
    same = await kube.client.get(PODS, "p", namespace=namespace)
    assert same["metadata"]["uid"] == first["metadata"]["uid"]
    assert world.metrics.counts[ApplyResult.DRY_RUN] == 1  # then the cache knows
    assert world.metrics.counts[ApplyResult.SKIPPED] == 2

    assert await world.sync(POD, UpdateMethod.RECREATE, _pod("p", "img:2")) == []
    assert world.writes[-1] == "recreate"


async def test_without_force_a_conflict_is_an_event_and_the_others_proceed(
    kube: Kube, namespace: str
) -> None:
    world = await _world(kube, namespace, force=False)
    taken = {**_cm("a", x="theirs"), "metadata": {"name": "a", "namespace": namespace}}
    await kube.client.apply(CONFIGMAPS, taken, field_manager="someone-else")
    problems = await world.sync(CM, UpdateMethod.IN_PLACE, _cm("a", x="ours"), _cm("b", x="1"))
    assert problems == []
    assert (await kube.client.get(CONFIGMAPS, "a", namespace=namespace))["data"] == {"x": "theirs"}
    assert (await kube.client.get(CONFIGMAPS, "b", namespace=namespace))["data"] == {"x": "1"}
    [(kind, reason, message)] = world.events.emitted
    assert (kind, reason) == ("Warning", REASON_APPLY_CONFLICT)
    assert "ConfigMap" in message and ".data.x" in message and "someone-else" in message
