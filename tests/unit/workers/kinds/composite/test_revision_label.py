"""A disturbed ``controller-revision-hash`` label during a rollout.

The planner (``rollout_plan.plan``, under either apply strategy's "already updated") must
not count a child as not updated for its label alone: the write that repairs it goes out in
the same sync. On the in-memory cluster (dynamic apply), the reconciler repairs a removed or
changed label in place, under both rolling methods, and deletes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from proto.api.controllers import StatusCheck, UpdateMethod
from proto.api.revisions import REVISION_HASH_LABEL, Revision, revision_hash
from tests.unit.workers.composite_world import CONFIGMAPS, NS, World
from tests.unit.workers.kinds.composite.test_rollouts import (
    change_image,
    child_writes,
    ready,
    revisions,
    rolling_world,
    start,
    updated,
)
from workers.apply import ControllerRef, create_body, ssa
from workers.kinds.composite.rollout_plan import (
    Desired,
    Rollout,
    Strategy,
    Updated,
    arrange,
    labelled,
    plan,
)

POD = ("", "Pod")
OWNER = ControllerRef("x/v1", "Set", "s", "uid")
READY = (StatusCheck(type="Ready", status="True"),)
STRATEGIES: list[Updated | None] = [None, ssa.up_to_date]
"""Dynamic apply's "already updated" (the default), server-side apply's."""


def pod_wanted(name: str, image: str, revision: str) -> dict[str, Any]:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"image": image},
    }
    return labelled(obj, revision)


def live(name: str, image: str, revision: str, label: str | None) -> dict[str, Any]:
    """A Ready pod written for ``revision``, whose label someone then set to ``label`` (or
    removed); its last-applied annotation (dynamic apply's) still records ``revision``."""
    body = create_body(pod_wanted(name, image, revision), OWNER)
    labels = {k: v for k, v in body["metadata"]["labels"].items() if k != REVISION_HASH_LABEL}
    if label is not None:
        labels[REVISION_HASH_LABEL] = label
    metadata = {**body["metadata"], "labels": labels}
    return {
        **body,
        "metadata": metadata,
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def rev(name: str, image: str, children: list[str], number: int) -> Revision:
    kids = (("", "Pod", tuple(children)),) if children else ()
    return Revision(
        name, {"spec": {"image": image}}, kids, number, obj={"metadata": {"name": name}}
    )


def second_move(p1: dict[str, Any], method: UpdateMethod, updated_check: Updated | None) -> Rollout:
    """The pass after p-1 moved to r2 (image v2, label h2), p-0 still on r1 (v1, h1), each
    answer's children labelled with their revision's hash (as ``Rollouts`` does); p-1 as
    given, p-0 as written."""
    latest, old = rev("r2", "v2", ["p-1"], 2), rev("r1", "v1", ["p-0"], 1)
    arrangement = arrange([old, latest], {"spec": {"image": "v2"}}, "new")
    desired = {
        r.name: [
            Desired(("", "Pod", n), pod_wanted(n, r.patch["spec"]["image"], f"h{r.number}"))
            for n in ("p-1", "p-0")
        ]
        for r in arrangement.hooked
    }
    observed = {("", "Pod", "p-1"): p1, ("", "Pod", "p-0"): live("p-0", "v1", "h1", "h1")}
    return plan(
        arrangement,
        desired=desired,
        observed=observed,
        strategies={POD: Strategy(method, READY)},
        history_limit=5,
        updated=updated_check,
    )


@pytest.mark.parametrize("updated_check", STRATEGIES)
@pytest.mark.parametrize("label", [None, "wrong", "h1"])
@pytest.mark.parametrize("method", [UpdateMethod.ROLLING_RECREATE, UpdateMethod.ROLLING_IN_PLACE])
def test_a_child_on_the_latest_revision_with_a_disturbed_label_counts_as_updated(
    updated_check: Updated | None, label: str | None, method: UpdateMethod
) -> None:
    """p-1 is Ready on r2; its label was then removed or changed (to r1's too). The rollout
    moves p-0 in this pass, as it would with the label intact, and p-1's desired state
    carries its label back."""
    rollout = second_move(live("p-1", "v2", "h2", label), method, updated_check)
    assert rollout.waiting is None
    assert rollout.condition["message"] == "updating Pod p-0"
    assert rollout.moved == ("", "Pod", "p-0")
    by_name = {d.id[2]: (d.obj["metadata"]["labels"], owner) for d, owner in rollout.children}
    assert by_name["p-1"] == ({"app": "web", REVISION_HASH_LABEL: "h2"}, "r2")


@pytest.mark.parametrize("updated_check", STRATEGIES)
def test_a_disturbed_label_does_not_hide_another_difference(updated_check: Updated | None) -> None:
    p1 = live("p-1", "v1", "h2", None)  # the old image
    rollout = second_move(p1, UpdateMethod.ROLLING_RECREATE, updated_check)
    assert rollout.waiting == "child Pod p-1 is not updated yet"
    assert rollout.moved is None


# --- the reconciler, dynamic apply, on the in-memory cluster --------------------------------


def disturb(world: World, name: str, label: str | None) -> None:
    """Someone removes (None) or changes the revision label of child ``name``."""
    key = ("configmaps", NS, name)
    obj = world.cluster.objects[key]
    labels = {k: v for k, v in obj["metadata"]["labels"].items() if k != REVISION_HASH_LABEL}
    if label is not None:
        labels[REVISION_HASH_LABEL] = label
    world.cluster.objects[key] = {**obj, "metadata": {**obj["metadata"], "labels": labels}}


def hashes(world: World) -> dict[str, str | None]:
    return {
        o["metadata"]["name"]: o["metadata"]["labels"].get(REVISION_HASH_LABEL)
        for o in world.cluster.of(CONFIGMAPS, NS)
    }


def uids(world: World) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["uid"] for o in world.cluster.of(CONFIGMAPS, NS)}


@pytest.mark.asyncio
@pytest.mark.parametrize("method", ["RollingRecreate", "RollingInPlace"])
async def test_disturbed_labels_are_repaired_in_place_on_a_rolled_out_parent(method: str) -> None:
    world = rolling_world(method)
    await start(world, replicas=2)
    (revision,) = revisions(world)
    want = revision_hash(revision["metadata"]["name"])
    before = uids(world)
    disturb(world, "p-1", None)
    disturb(world, "p-0", "wrong")
    await world.sync()
    assert sorted(child_writes(world)) == [("PUT", "p-0"), ("PUT", "p-1")]
    assert hashes(world) == {"p-0": want, "p-1": want}
    assert uids(world) == before
    assert updated(world)["reason"] == "OnLatestRevision"
    await world.sync()
    assert child_writes(world) == []


async def moved(world: World, name: str) -> None:
    """One sync moves ``name`` to the latest revision (a RollingRecreate deletes it, and the
    next sync creates it again); then it turns Ready."""
    await world.sync()
    if world.get(name) is None:
        await world.sync()
    ready(world, name)


@pytest.mark.asyncio
@pytest.mark.parametrize("method", ["RollingRecreate", "RollingInPlace"])
async def test_disturbed_labels_mid_rollout_are_repaired_and_the_rollout_goes_on(
    method: str,
) -> None:
    """p-2 and p-1 moved to the latest revision and are Ready; p-0 is on the first. Their
    labels are removed or changed (to the other revision's): the next sync repairs p-2 and
    p-1 in place and moves p-0, as it would with the labels intact."""
    world = rolling_world(method)
    await start(world, replicas=3)
    await change_image(world, "v2")
    await moved(world, "p-2")
    await moved(world, "p-1")
    by_image = {r["parentPatch"]["spec"]["image"]: r["metadata"]["name"] for r in revisions(world)}
    old, new = (revision_hash(by_image[image]) for image in ("v1", "v2"))
    assert hashes(world) == {"p-0": old, "p-1": new, "p-2": new}
    before = uids(world)
    disturb(world, "p-2", None)
    disturb(world, "p-1", old)
    disturb(world, "p-0", new)
    world.cluster.calls.clear()
    await world.sync()
    assert updated(world)["message"] == "updating ConfigMap p-0"
    writes = sorted(child_writes(world))
    if method == "RollingRecreate":  # p-0 moves: recreated; p-1 and p-2 repaired in place
        assert writes == [("DELETE", "p-0"), ("PUT", "p-1"), ("PUT", "p-2")]
        assert hashes(world) == {"p-1": new, "p-2": new}
        assert uids(world) == {n: u for n, u in before.items() if n != "p-0"}
    else:  # p-0 moves in place, with its new label
        assert writes == [("PUT", "p-0"), ("PUT", "p-1"), ("PUT", "p-2")]
        assert hashes(world) == {"p-0": new, "p-1": new, "p-2": new}
        assert uids(world) == before
