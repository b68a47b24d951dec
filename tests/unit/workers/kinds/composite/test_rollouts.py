"""Rolling updates through the composite reconciler, on the in-memory cluster.

A StatefulSet-like hook: ``spec.replicas`` ConfigMaps ``p-<i>`` returned highest ordinal
first, ``data.image = spec.image``; a ``Ready`` status check gates each move.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from proto.api.revisions import REVISION_HASH_LABEL, make_patch, revision_hash
from proto.kube import errors
from proto.wire import ParentKey
from tests.unit.workers.composite_world import CONFIGMAPS, NS, THINGS, World, definition
from workers.kinds.composite.revisions import revision_name
from workers.kinds.composite.rollouts import REVISIONS
from workers.reconcile import Reconciler, ReconcileRequest
from workers.sync.errors import SyncFailure

pytestmark = pytest.mark.asyncio


def statefulset(request: dict[str, Any]) -> dict[str, Any]:
    parent = request["parent"]
    spec = parent["spec"]
    children = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"p-{i}"},
            "data": {"image": spec["image"]},
        }
        for i in reversed(range(spec["replicas"]))
    ]
    return {"status": {"replicas": spec["replicas"]}, "children": children}


def rolling_world(
    method: str = "RollingRecreate",
    *,
    checks: bool = True,
    history: str | None = None,
    answer: Any = statefulset,
    default_history: int = 5,
) -> World:
    world = World(method=method)
    strategy = world.cc["spec"]["childResources"][0]["updateStrategy"]
    if checks:
        strategy["statusChecks"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    if history is not None:
        world.cc["metadata"]["annotations"] = {"metashard.io/revision-history-limit": history}
    world.reconciler = world.built(definition(world.cc), revision_history_limit=default_history)
    world.answer = answer
    return world


def ready(world: World, *names: str, value: str = "True") -> None:
    for name in names:
        key = ("configmaps", NS, name)
        world.cluster.objects[key] = {
            **world.cluster.objects[key],
            "status": {"conditions": [{"type": "Ready", "status": value}]},
        }


def images(world: World) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["data"]["image"]
        for o in world.cluster.of(CONFIGMAPS, NS)
        if o["metadata"]["name"].startswith("p-")
    }


def updated(world: World) -> dict[str, Any]:
    parent = world.cluster.get(THINGS, NS, "p")
    assert parent is not None
    found = [c for c in parent["status"]["conditions"] if c["type"] == "Updated"]
    assert len(found) == 1
    return dict(found[0])


def existing(world: World, name: str) -> dict[str, Any]:
    """The child ``name``, which must exist."""
    found = world.get(name)
    assert found is not None, f"no child {name}"
    return found


def revisions(world: World) -> list[dict[str, Any]]:
    return world.cluster.of(REVISIONS, NS)


def child_writes(world: World) -> list[tuple[str, str]]:
    return [
        (verb, name) for verb, resource, _, _, name in world.writes() if resource == "configmaps"
    ]


async def start(world: World, replicas: int = 3) -> None:
    await world.parent(spec={"replicas": replicas, "image": "v1"})
    await world.sync()
    ready(world, *(f"p-{i}" for i in range(replicas)))
    await world.sync()


async def change_image(world: World, image: str) -> None:
    await world.cluster.patch(THINGS, "p", {"spec": {"image": image}}, namespace=NS)


async def test_first_sync_writes_a_revision_before_the_children() -> None:
    world = rolling_world()
    await world.parent(spec={"replicas": 2, "image": "v1"})
    await world.sync()
    verbs = [(verb, resource) for verb, resource, _, _, _ in world.writes()]
    assert verbs == [
        ("POST", "controllerrevisions"),
        ("POST", "configmaps"),
        ("POST", "configmaps"),
        ("PUT", "things"),
    ]
    (revision,) = revisions(world)
    parent = world.cluster.get(THINGS, NS, "p")
    assert parent is not None
    assert revision["parentPatch"] == {"spec": {"replicas": 2, "image": "v1"}}
    assert revision["children"] == [{"apiGroup": "", "kind": "ConfigMap", "names": ["p-1", "p-0"]}]
    assert revision["metadata"]["ownerReferences"][0]["uid"] == parent["metadata"]["uid"]
    assert revision["metadata"]["labels"] == {
        "controller-uid": parent["metadata"]["uid"],
        "metacontroller.k8s.io/apiGroup": "e2e.metashard.io",
        "metacontroller.k8s.io/resource": "things",
    }
    hash_value = revision_hash(revision["metadata"]["name"])
    for name in ("p-0", "p-1"):
        assert existing(world, name)["metadata"]["labels"][REVISION_HASH_LABEL] == hash_value
    assert updated(world) == {
        "type": "Updated",
        "status": "True",
        "reason": "OnLatestRevision",
        "message": f"latest ControllerRevision: {revision['metadata']['name']}",
    }
    assert parent["status"]["replicas"] == 2


async def test_a_template_change_rolls_one_child_at_a_time_behind_the_status_check() -> None:
    world = rolling_world()
    await start(world)
    await change_image(world, "v2")

    await world.sync()
    assert child_writes(world) == [("DELETE", "p-2")]
    assert [c[0] for c in world.writes()][:2] == ["PUT", "POST"]  # revisions first
    assert updated(world)["message"] == "updating ConfigMap p-2"

    await world.sync()  # p-2 comes back at v2, not ready yet: the rollout waits
    assert child_writes(world) == [("POST", "p-2")]
    assert updated(world) == {
        "type": "Updated",
        "status": "False",
        "reason": "RolloutWaiting",
        "message": "missing child ConfigMap p-2",
    }
    await world.sync()
    assert child_writes(world) == []
    assert updated(world)["message"] == (
        'child ConfigMap p-2 failed status check: required condition type missing: "Ready"'
    )
    ready(world, "p-2", value="False")
    await world.sync()
    assert updated(world)["message"].endswith('"Ready" condition status is "False" (want "True")')
    assert images(world) == {"p-2": "v2", "p-1": "v1", "p-0": "v1"}

    ready(world, "p-2")
    await world.sync()
    assert child_writes(world) == [("DELETE", "p-1")]
    for name in ("p-1", "p-0"):
        await world.sync()
        ready(world, name)
        await world.sync()
    assert images(world) == {"p-2": "v2", "p-1": "v2", "p-0": "v2"}
    await world.sync()
    assert updated(world)["reason"] == "OnLatestRevision"
    latest = [r for r in revisions(world) if r.get("children")]
    assert len(latest) == 1 and latest[0]["parentPatch"]["spec"]["image"] == "v2"
    hash_value = revision_hash(latest[0]["metadata"]["name"])
    assert {
        existing(world, f"p-{i}")["metadata"]["labels"][REVISION_HASH_LABEL] for i in range(3)
    } == {hash_value}
    await world.sync()
    assert world.writes() == []
    events = [(reason, message) for _, _, reason, message in world.events.emitted]
    assert ("RolloutProgressing", "updating ConfigMap p-2") in events
    assert events[-1][0] == "OnLatestRevision"


async def test_a_parent_change_that_changes_no_child_moves_them_all_at_once() -> None:
    # Metacontroller's syncRollingUpdate: a child whose update would be a no-op moves to the
    # latest revision at once. Here that update still rewrites the revision hash label, in
    # place, so a scale-up writes the new child and relabels the others in one sync.
    world = rolling_world()
    await start(world, replicas=3)
    await world.cluster.patch(THINGS, "p", {"spec": {"replicas": 4}}, namespace=NS)
    await world.sync()
    owning = [r for r in revisions(world) if r.get("children")]
    assert len(owning) == 1, [r["metadata"]["name"] for r in owning]
    assert updated(world)["reason"] == "OnLatestRevision"
    assert sorted(child_writes(world)) == [
        ("POST", "p-3"),
        ("PUT", "p-0"),
        ("PUT", "p-1"),
        ("PUT", "p-2"),
    ]
    assert (
        len(
            {existing(world, f"p-{i}")["metadata"]["labels"][REVISION_HASH_LABEL] for i in range(4)}
        )
        == 1
    )


async def test_a_parent_change_that_changes_no_child_completes_behind_an_unready_child() -> None:
    world = rolling_world()
    await start(world, replicas=3)
    ready(world, "p-2", value="False")
    await world.cluster.patch(THINGS, "p", {"spec": {"note": "x"}}, namespace=NS)
    await world.sync()
    assert updated(world)["reason"] == "OnLatestRevision"
    assert [r for r in revisions(world) if r.get("children")] == [
        r for r in revisions(world) if r["parentPatch"]["spec"].get("note") == "x"
    ]


async def test_rolling_in_place_waits_for_the_observed_generation() -> None:
    world = rolling_world("RollingInPlace", checks=False)
    await start(world, replicas=2)
    await change_image(world, "v2")
    await world.sync()
    assert child_writes(world) == [("PUT", "p-1")]
    child = world.get("p-1")
    assert child is not None and child["metadata"]["generation"] == 2
    world.cluster.objects[("configmaps", NS, "p-1")] = {
        **child,
        "status": {"observedGeneration": 1},
    }
    await world.sync()
    assert updated(world)["message"] == (
        "child ConfigMap p-1 with RollingInPlace update strategy hasn't observed latest spec"
    )
    world.cluster.objects[("configmaps", NS, "p-1")]["status"] = {"observedGeneration": 2}
    await world.sync()
    assert child_writes(world) == [("PUT", "p-0")]


async def test_the_hash_label_is_added_in_place_never_by_recreating() -> None:
    world = rolling_world()
    await start(world, replicas=2)
    for name in ("p-0", "p-1"):  # as Metacontroller left them: no hash label
        obj = world.cluster.objects[("configmaps", NS, name)]
        obj["metadata"]["labels"].pop(REVISION_HASH_LABEL)
        annotation = "metacontroller.k8s.io/last-applied-configuration"
        recorded = orjson.loads(obj["metadata"]["annotations"][annotation])
        recorded["metadata"]["labels"].pop(REVISION_HASH_LABEL)
        obj["metadata"]["annotations"][annotation] = orjson.dumps(recorded).decode()
    await world.sync()
    assert child_writes(world) == [("PUT", "p-1"), ("PUT", "p-0")]
    assert all(
        REVISION_HASH_LABEL in existing(world, n)["metadata"]["labels"] for n in ("p-0", "p-1")
    )


async def test_a_hook_without_status_and_with_its_own_updated_condition() -> None:
    def no_status(request: dict[str, Any]) -> dict[str, Any]:
        return {"children": statefulset(request)["children"]}

    world = rolling_world(answer=no_status)
    await start(world, replicas=1)
    assert updated(world)["reason"] == "OnLatestRevision"

    def own_condition(request: dict[str, Any]) -> dict[str, Any]:
        answer = statefulset(request)
        answer["status"]["conditions"] = [{"type": "Updated", "status": "Unknown"}]
        return answer

    world.answer = own_condition
    await world.sync()
    assert updated(world)["reason"] == "OnLatestRevision"


async def test_the_latest_answers_events_and_conditions_apply_but_not_its_updated() -> None:
    def reporting(request: dict[str, Any]) -> dict[str, Any]:
        answer = statefulset(request)
        image = request["parent"]["spec"]["image"]
        answer["events"] = [{"type": "Normal", "reason": "Seen", "message": image}]
        answer["conditions"] = [
            {"type": "Updated", "status": "False", "reason": "Mine"},
            {"type": "Ready", "status": "True", "reason": image.upper()},
        ]
        return answer

    world = rolling_world(answer=reporting)
    await start(world, replicas=2)
    await change_image(world, "v2")
    world.events.emitted.clear()
    calls = len(world.requests)
    await world.sync()  # v1's revision still owns children: the hook answers for both
    asked = {r["parent"]["spec"]["image"] for _, r in world.requests[calls:]}
    assert asked == {"v1", "v2"}
    assert [e for e in world.events.emitted if e[2] == "Seen"] == [("p", "Normal", "Seen", "v2")]
    parent = world.cluster.get(THINGS, NS, "p")
    assert parent is not None
    conditions = {c["type"]: c for c in parent["status"]["conditions"]}
    assert conditions["Ready"]["reason"] == "V2"
    assert conditions["Updated"]["reason"] != "Mine"


async def test_history_keeps_the_limit_of_childless_revisions() -> None:
    world = rolling_world(checks=False, history="1")
    await start(world, replicas=1)
    for image in ("v2", "v3", "v4"):
        await change_image(world, image)
        for _ in range(3):
            await world.sync()
    kept = sorted(
        (r["metadata"]["annotations"]["metashard.io/revision"], r["parentPatch"]["spec"]["image"])
        for r in revisions(world)
    )
    assert kept == [("3", "v3"), ("4", "v4")]


@pytest.mark.parametrize(
    ("annotation", "flag", "kept"),
    [
        (None, 5, ["v1", "v2", "v3", "v4"]),
        (None, 2, ["v2", "v3", "v4"]),
        (None, 0, ["v4"]),
        ("1", 0, ["v3", "v4"]),  # the controller's annotation wins over the flag
        ("0", 5, ["v4"]),
        ("many", 2, ["v2", "v3", "v4"]),  # a malformed annotation: the flag's limit
    ],
)
async def test_the_history_limit_is_the_annotation_else_the_flag(
    annotation: str | None, flag: int, kept: list[str]
) -> None:
    world = rolling_world(checks=False, history=annotation, default_history=flag)
    await start(world, replicas=1)
    for image in ("v2", "v3", "v4"):
        await change_image(world, image)
        for _ in range(3):
            await world.sync()
    assert sorted(r["parentPatch"]["spec"]["image"] for r in revisions(world)) == kept


def selector_world(image: Callable[[dict[str, Any]], str]) -> World:
    """A parent with ``spec.selector`` ``app=x``; one child ``p-0`` running ``image(spec)``."""
    world = World(method="RollingRecreate", generate_selector=False)
    world.answer = lambda request: {
        "children": [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "p-0", "labels": {"app": "x"}},
                "data": {"image": image(request["parent"]["spec"])},
            }
        ]
    }
    return world


async def test_a_parent_whose_template_labels_miss_its_selector_keeps_rolling() -> None:
    """Metacontroller #194: the revision is released right after it is created."""
    world = selector_world(lambda spec: spec["image"])
    spec = {
        "image": "v1",
        "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"other": "y"}}},
    }
    await world.parent(spec=spec)
    for _ in range(2):
        await world.sync()
    await change_image(world, "v2")
    for _ in range(3):
        await world.sync()
    assert existing(world, "p-0")["data"]["image"] == "v2"
    assert len(revisions(world)) == 2


async def test_a_taken_revision_name_gets_a_collision_count() -> None:
    world = rolling_world(checks=False)
    await world.parent(spec={"replicas": 1, "image": "v1"})
    world.cluster.fail("POST", _any_revision(world), errors.AlreadyExists(409, {}))
    await world.sync()
    (revision,) = revisions(world)
    assert existing(world, "p-0")["metadata"]["labels"][REVISION_HASH_LABEL] == revision_hash(
        revision["metadata"]["name"]
    )
    assert revision["metadata"]["name"] != _any_revision(world)
    assert updated(world)["message"] == f"latest ControllerRevision: {revision['metadata']['name']}"


def _any_revision(world: World) -> str:
    parent = world.cluster.get(THINGS, NS, "p")
    assert parent is not None
    return revision_name(
        "things", "e2e.metashard.io", parent["metadata"]["uid"], make_patch(parent, ["spec"])
    )


async def test_a_failed_revision_write_touches_no_child() -> None:
    world = rolling_world(checks=False, history="0")
    await start(world, replicas=2)
    await change_image(world, "v2")
    (old,) = revisions(world)
    world.cluster.fail("PUT", old["metadata"]["name"], errors.ApiError(500, {}))
    with pytest.raises(Exception, match="ControllerRevisions"):
        await world.sync()
    assert child_writes(world) == []


CLUSTER_THINGS = dataclasses.replace(THINGS, namespaced=False)


def cluster_reconciler(world: World, namespace: str) -> Reconciler:
    """``world``'s controller over a cluster-scoped Thing, revisions in ``namespace``."""
    info = definition(world.cc)
    parent_info = dataclasses.replace(info.resources[0], namespaced=False)
    return world.built(
        dataclasses.replace(info, resources=(parent_info, *info.resources[1:])),
        cluster_revision_namespace=namespace,
    )


async def test_a_cluster_scoped_parent_keeps_its_revisions_in_the_cluster_revision_namespace() -> (
    None
):
    def namespaced(request: dict[str, Any]) -> dict[str, Any]:
        answer = statefulset(request)
        for child in answer["children"]:
            child["metadata"]["namespace"] = NS
        return answer

    world = rolling_world(checks=False, answer=namespaced)
    reconciler = cluster_reconciler(world, "revs")
    await world.cluster.create(
        CLUSTER_THINGS,
        {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Thing",
            "metadata": {"name": "c"},
            "spec": {"replicas": 2, "image": "v1"},
        },
    )
    parent = world.cluster.get(CLUSTER_THINGS, "", "c")
    assert parent is not None
    key = ParentKey("CompositeController", "cc", "things.e2e.metashard.io", "", "c")

    async def sync() -> None:
        snapshot = world.cluster.snapshot(key, CLUSTER_THINGS, [CONFIGMAPS])
        await reconciler.reconcile(ReconcileRequest(key, snapshot))

    await sync()
    (first,) = world.cluster.of(REVISIONS)
    assert first["metadata"]["namespace"] == "revs"
    assert first["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Thing",
            "name": "c",
            "uid": parent["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert first["children"] == [
        {"apiGroup": "", "kind": "ConfigMap", "names": ["ns/p-1", "ns/p-0"]}
    ]

    await world.cluster.patch(CLUSTER_THINGS, "c", {"spec": {"image": "v2"}})
    for _ in range(4):  # one child per sync: deleted, then created at v2
        await sync()
    assert {o["metadata"]["name"]: o["data"]["image"] for o in world.cluster.of(CONFIGMAPS)} == {
        "p-0": "v2",
        "p-1": "v2",
    }
    assert {r["metadata"]["namespace"] for r in world.cluster.of(REVISIONS)} == {"revs"}
    latest = next(
        r for r in world.cluster.of(REVISIONS) if r["parentPatch"]["spec"]["image"] == "v2"
    )
    assert latest["children"] == [
        {"apiGroup": "", "kind": "ConfigMap", "names": ["ns/p-1", "ns/p-0"]}
    ]


async def test_a_worker_that_disagrees_on_the_revision_namespace_fails_loudly() -> None:
    world = rolling_world(checks=False)

    def reconciler(namespace: str) -> Reconciler:
        return cluster_reconciler(world, namespace)

    world.answer = lambda request: {"children": []}
    await world.cluster.create(
        CLUSTER_THINGS,
        {"apiVersion": "e2e.metashard.io/v1", "kind": "Thing", "metadata": {"name": "c"}},
    )
    key = ParentKey("CompositeController", "cc", "things.e2e.metashard.io", "", "c")
    snapshot = world.cluster.snapshot(key, CLUSTER_THINGS, [CONFIGMAPS])
    await reconciler("revs").reconcile(ReconcileRequest(key, snapshot))
    assert [r["metadata"]["namespace"] for r in world.cluster.of(REVISIONS)] == ["revs"]
    snapshot = world.cluster.snapshot(key, CLUSTER_THINGS, [CONFIGMAPS])
    with pytest.raises(SyncFailure, match="--cluster-revision-namespace is other"):
        await reconciler("other").reconcile(ReconcileRequest(key, snapshot))
    assert len(world.cluster.of(REVISIONS)) == 1


async def test_revisions_orphaned_with_their_parent_are_adopted_by_the_next_one() -> None:
    """``kubectl delete --cascade=orphan``, then a new parent with the same selector."""
    world = selector_world(lambda spec: spec["template"]["image"])
    spec = {
        "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "x"}}, "image": "v1"},
    }
    await world.parent("p", spec=spec)
    await world.sync("p")
    (before,) = revisions(world)
    del world.cluster.objects[("things", NS, "p")]
    for key, obj in list(world.cluster.objects.items()):
        if key[0] in ("configmaps", "controllerrevisions"):
            world.cluster.objects[key] = {
                **obj,
                "metadata": {k: v for k, v in obj["metadata"].items() if k != "ownerReferences"},
            }
    parent = await world.parent("q", spec=spec)
    await world.sync("q")
    uid = parent["metadata"]["uid"]
    assert sorted((verb, resource) for verb, resource, _, _, _ in world.writes()) == [
        ("PATCH", "configmaps"),
        ("PATCH", "controllerrevisions"),
        ("PUT", "things"),
    ]
    (after,) = revisions(world)
    assert after["metadata"]["name"] == before["metadata"]["name"]
    assert after["metadata"]["ownerReferences"][0]["uid"] == uid
    assert existing(world, "p-0")["metadata"]["ownerReferences"][0]["uid"] == uid
    assert updated_of(world, "q")["reason"] == "OnLatestRevision"


def updated_of(world: World, name: str) -> dict[str, Any]:
    parent = world.cluster.get(THINGS, NS, name)
    assert parent is not None
    return next(c for c in parent["status"]["conditions"] if c["type"] == "Updated")


async def test_each_revision_a_rollout_calls_the_hook_for_has_its_own_etag_entry() -> None:
    """The hook is called once per revision; each call names its revision as the ETag cache
    variant (the live parent: none), so their cached answers do not evict each other."""
    world = rolling_world()
    await start(world)
    await change_image(world, "v2")
    world.hooks.requests.clear()
    world.hooks.variants.clear()
    await world.sync()
    variants = {
        request["parent"]["spec"]["image"]: variant
        for (_, request), variant in zip(world.hooks.requests, world.hooks.variants, strict=True)
    }
    (old,) = [
        r["metadata"]["name"] for r in revisions(world) if r["parentPatch"]["spec"]["image"] == "v1"
    ]
    assert variants == {"v2": None, "v1": old}
