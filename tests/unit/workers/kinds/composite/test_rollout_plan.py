"""workers.kinds.composite.rollout_plan: tables of single passes, then Hypothesis over many
passes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proto.api.controllers import StatusCheck, UpdateMethod
from proto.api.revisions import Revision
from workers.apply import ControllerRef, create_body
from workers.kinds.composite.rollout_plan import (
    Arrangement,
    Desired,
    Rollout,
    Strategy,
    arrange,
    check_status,
    plan,
    with_condition,
)

POD = ("", "Pod")
OWNER = ControllerRef("x/v1", "Set", "s", "uid")
READY = (StatusCheck(type="Ready", status="True"),)


def pod_wanted(name: str, image: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"image": image}}


def pod(name: str, image: str, *, ready: bool = True, **status: Any) -> dict[str, Any]:
    """A live pod created from the hook's desired ``image``."""
    body = create_body(pod_wanted(name, image), OWNER)
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {**body, "status": {"conditions": conditions, **status}}


def answer(names: list[str], image: str) -> list[Desired]:
    return [Desired(("", "Pod", n), pod_wanted(n, image)) for n in names]


def rev(name: str, image: str, children: list[str], number: int) -> Revision:
    kids = (("", "Pod", tuple(children)),) if children else ()
    return Revision(
        name, {"spec": {"image": image}}, kids, number, obj={"metadata": {"name": name}}
    )


def one_pass(
    revisions: list[Revision],
    image: str,
    observed: dict[str, dict[str, Any]],
    names: list[str],
    *,
    method: UpdateMethod = UpdateMethod.ROLLING_RECREATE,
    checks: tuple[StatusCheck, ...] = READY,
    history: int = 5,
) -> Rollout:
    arrangement = arrange(revisions, {"spec": {"image": image}}, f"new-{image}")
    desired = {r.name: answer(names, r.patch["spec"]["image"]) for r in arrangement.hooked}
    return plan(
        arrangement,
        desired=desired,
        observed={("", "Pod", n): o for n, o in observed.items()},
        strategies={POD: Strategy(method, checks)},
        history_limit=history,
    )


def owners(rollout: Rollout) -> dict[str, str | None]:
    return {d.id[2]: owner for d, owner in rollout.children}


def test_first_sync_puts_every_child_on_a_new_latest_revision() -> None:
    rollout = one_pass([], "v1", {}, ["p-1", "p-0"])
    assert rollout.latest.name == "new-v1"
    assert rollout.latest.obj is None and rollout.latest.number == 1
    assert rollout.latest.children == (("", "Pod", ("p-1", "p-0")),)
    assert owners(rollout) == {"p-1": "new-v1", "p-0": "new-v1"}
    assert rollout.condition == {
        "type": "Updated",
        "status": "True",
        "reason": "OnLatestRevision",
        "message": "latest ControllerRevision: new-v1",
    }
    assert rollout.moved is None and rollout.deletes == ()


def test_a_template_change_moves_the_first_child_in_hook_order() -> None:
    old = rev("r1", "v1", ["p-1", "p-0"], 1)
    observed = {"p-1": pod("p-1", "v1"), "p-0": pod("p-0", "v1")}
    rollout = one_pass([old], "v2", observed, ["p-1", "p-0"])
    assert rollout.moved == ("", "Pod", "p-1")
    assert rollout.condition["reason"] == "RolloutProgressing"
    assert rollout.condition["message"] == "updating Pod p-1"
    assert [r.name for r in rollout.revisions] == ["new-v2", "r1"]
    assert rollout.latest.number == 2
    assert rollout.revisions[1].children == (("", "Pod", ("p-0",)),)
    by_id = {d.id[2]: d.obj["spec"]["image"] for d, _ in rollout.children}
    assert by_id == {"p-1": "v2", "p-0": "v1"}


@pytest.mark.parametrize(
    ("p1", "message"),
    [
        (None, "missing child Pod p-1"),
        (pod("p-1", "v1"), "child Pod p-1 is not updated yet"),
        (
            pod("p-1", "v2", ready=False),
            'child Pod p-1 failed status check: "Ready" condition status is "False" (want "True")',
        ),
        (
            {**pod("p-1", "v2"), "status": {}},
            'child Pod p-1 failed status check: required condition type missing: "Ready"',
        ),
    ],
)
def test_the_rollout_waits_for_every_child_on_the_latest_revision(
    p1: dict[str, Any] | None, message: str
) -> None:
    latest = rev("r2", "v2", ["p-1"], 2)
    old = rev("r1", "v1", ["p-0"], 1)
    observed = {"p-0": pod("p-0", "v1")}
    if p1 is not None:
        observed["p-1"] = p1
    rollout = one_pass([old, latest], "v2", observed, ["p-1", "p-0"])
    assert rollout.moved is None
    assert rollout.condition == {
        "type": "Updated",
        "status": "False",
        "reason": "RolloutWaiting",
        "message": message,
    }
    assert owners(rollout) == {"p-1": "r2", "p-0": "r1"}


def test_rolling_in_place_waits_for_the_observed_generation() -> None:
    latest = rev("r2", "v2", ["p-1"], 2)
    old = rev("r1", "v1", ["p-0"], 1)
    p1 = pod("p-1", "v2", observedGeneration=1)
    p1["metadata"]["generation"] = 2
    observed = {"p-1": p1, "p-0": pod("p-0", "v1")}
    inplace = UpdateMethod.ROLLING_IN_PLACE
    rollout = one_pass([old, latest], "v2", observed, ["p-1", "p-0"], method=inplace)
    assert rollout.condition["message"] == (
        "child Pod p-1 with RollingInPlace update strategy hasn't observed latest spec"
    )
    p1["status"]["observedGeneration"] = 2
    rollout = one_pass([old, latest], "v2", observed, ["p-1", "p-0"], method=inplace)
    assert rollout.moved == ("", "Pod", "p-0")
    # RollingRecreate does not look at observedGeneration.
    p1["status"]["observedGeneration"] = 1
    assert one_pass([old, latest], "v2", observed, ["p-1", "p-0"]).moved == ("", "Pod", "p-0")


def test_the_last_move_empties_the_old_revision_which_becomes_history() -> None:
    latest = rev("r2", "v2", ["p-1"], 2)
    old = rev("r1", "v1", ["p-0"], 1)
    observed = {"p-1": pod("p-1", "v2"), "p-0": pod("p-0", "v1")}
    rollout = one_pass([old, latest], "v2", observed, ["p-1", "p-0"])
    assert rollout.moved == ("", "Pod", "p-0")
    assert [(r.name, r.child_count()) for r in rollout.revisions] == [("r2", 2), ("r1", 0)]
    observed["p-0"] = pod("p-0", "v2")
    done = one_pass(list(rollout.revisions), "v2", observed, ["p-1", "p-0"])
    assert done.condition["reason"] == "OnLatestRevision"
    assert done.condition["message"] == "latest ControllerRevision: r2"


def test_a_child_that_already_matches_the_latest_moves_for_free() -> None:
    latest = rev("r2", "v2", [], 2)
    old = rev("r1", "v1", ["p-1", "p-0"], 1)
    # p-1 already runs v2 (e.g. recreated by hand): it moves without counting as the move.
    observed = {"p-1": pod("p-1", "v2"), "p-0": pod("p-0", "v1")}
    rollout = one_pass([old, latest], "v2", observed, ["p-1", "p-0"])
    assert owners(rollout) == {"p-1": "r2", "p-0": "r2"}
    assert rollout.moved == ("", "Pod", "p-0")


def test_history_keeps_the_latest_n_childless_revisions_by_number() -> None:
    history = [rev(f"r{i}", f"v{i}", [], i) for i in range(1, 5)]
    latest = rev("r9", "v9", ["p-0"], 9)
    observed = {"p-0": pod("p-0", "v9")}
    rollout = one_pass([*history, latest], "v9", observed, ["p-0"], history=2)
    assert [r.name for r in rollout.revisions] == ["r9", "r4", "r3"]
    assert sorted(r.name for r in rollout.deletes) == ["r1", "r2"]
    assert [
        r.name for r in one_pass([*history, latest], "v9", observed, ["p-0"], history=0).revisions
    ] == ["r9"]


def test_going_back_to_an_old_patch_reuses_its_revision_with_a_new_number() -> None:
    r1 = rev("r1", "v1", [], 1)
    r2 = rev("r2", "v2", ["p-0"], 2)
    observed = {"p-0": pod("p-0", "v2")}
    rollout = one_pass([r1, r2], "v1", observed, ["p-0"])
    assert rollout.latest.name == "r1" and rollout.latest.number == 3
    assert rollout.moved == ("", "Pod", "p-0")


def test_duplicates_of_the_latest_patch_are_deleted() -> None:
    a = rev("a", "v1", ["p-0"], 1)
    b = rev("b", "v1", [], 2)
    rollout = one_pass([a, b], "v1", {"p-0": pod("p-0", "v1")}, ["p-0"])
    assert rollout.latest.name == "b"
    assert [r.name for r in rollout.deletes] == ["a"]
    assert owners(rollout) == {"p-0": "b"}


def test_claims_of_children_no_longer_desired_or_no_longer_rolling_are_dropped() -> None:
    old = Revision(
        "r1", {"spec": {"image": "v1"}}, (("", "Pod", ("p-0", "p-9")), ("", "Other", ("x",))), 1
    )
    rollout = one_pass([old], "v1", {"p-0": pod("p-0", "v1")}, ["p-0"])
    assert rollout.latest.name == "r1"
    assert rollout.latest.children == (("", "Pod", ("p-0",)),)


def test_non_rolling_kinds_come_from_the_latest_answer_without_an_owner() -> None:
    arrangement = arrange([], {"spec": {}}, "new")
    cm = Desired(("", "ConfigMap", "c"), {"apiVersion": "v1", "kind": "ConfigMap"})
    rollout = plan(
        arrangement,
        desired={"new": [cm]},
        observed={},
        strategies={("", "ConfigMap"): Strategy(UpdateMethod.IN_PLACE)},
        history_limit=5,
    )
    assert rollout.children == ((cm, None),)
    assert rollout.latest.children == ()


def test_check_status_reason() -> None:
    child = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Up"}]}}
    assert check_status([StatusCheck("Ready", reason="Up")], child) is None
    assert check_status([StatusCheck("Ready", reason="Down")], child) == (
        '"Ready" condition reason is "Up" (want "Down")'
    )


def test_with_condition_replaces_a_hook_condition_and_tolerates_no_status() -> None:
    condition = {"type": "Updated", "status": "True"}
    assert with_condition(None, condition) == ({"conditions": [condition]}, False)
    hook: dict[str, Any] = {
        "x": 1,
        "conditions": [{"type": "A"}, {"type": "Updated", "status": "False"}],
    }
    status, replaced = with_condition(hook, condition)
    assert replaced and status == {"x": 1, "conditions": [{"type": "A"}, condition]}
    assert hook["conditions"][1] == {"type": "Updated", "status": "False"}


# --- many passes: Hypothesis ----------------------------------------------------------------


def simulate(
    count: int, images: list[str], ready_after: list[int], method: UpdateMethod, max_passes: int
) -> tuple[list[tuple[Rollout, int]], dict[str, dict[str, Any]]]:
    """Run passes of a StatefulSet-like rollout: each pass the world applies the plan (a child
    whose desired image changed is replaced, not ready), and a replaced pod turns ready
    ``ready_after[i]`` passes later. The parent's image follows ``images``, one per pass,
    then stays. Returns each pass's rollout with how many children it moved that needed a
    write (their pod did not run the latest image yet), negated when a child already on the
    latest revision was not ready or not updated at that point."""
    names = [f"p-{i}" for i in reversed(range(count))]
    revisions: list[Revision] = []
    observed: dict[str, dict[str, Any]] = {}
    age: dict[str, int] = {}
    passes: list[tuple[Rollout, int]] = []
    owner: dict[str, str | None] = {}
    for step in range(max_passes):
        image = images[min(step, len(images) - 1)]
        rollout = one_pass(revisions, image, observed, names, method=method)
        now = owners(rollout)
        moved = [
            n
            for n in names
            if owner.get(n) is not None
            and now[n] != owner[n]
            and now[n] == rollout.latest.name
            and observed[n]["spec"]["image"] != image
        ]
        healthy = all(
            observed[n]["spec"]["image"] == image
            and observed[n]["status"]["conditions"][0]["status"] == "True"
            for n in names
            if owner.get(n) == rollout.latest.name
        )
        passes.append((rollout, len(moved) if healthy else -len(moved)))
        owner = now
        revisions = [
            Revision(r.name, r.patch, r.children, r.number, obj={"metadata": {"name": r.name}})
            for r in rollout.revisions
        ]
        for desired, _ in rollout.children:
            name = desired.id[2]
            wanted_image = desired.obj["spec"]["image"]
            current = observed.get(name)
            if current is None or current["spec"]["image"] != wanted_image:
                observed[name] = pod(name, wanted_image, ready=False)
                age[name] = 0
        for index, name in enumerate(names):
            age[name] = age.get(name, 0) + 1
            if age[name] > ready_after[index % len(ready_after)]:
                observed[name] = pod(name, observed[name]["spec"]["image"], ready=True)
    return passes, observed


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 5),
    images=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=4),
    ready_after=st.lists(st.integers(0, 3), min_size=1, max_size=5),
    method=st.sampled_from([UpdateMethod.ROLLING_RECREATE, UpdateMethod.ROLLING_IN_PLACE]),
)
def test_rollouts_move_one_child_at_a_time_and_terminate(
    count: int, images: list[str], ready_after: list[int], method: UpdateMethod
) -> None:
    passes, observed = simulate(count, images, ready_after, method, len(images) + count * 5 + 4)
    for rollout, moved in passes:
        assert 0 <= moved <= 1
        progressing = rollout.condition["reason"] == "RolloutProgressing"
        assert (rollout.moved is not None) == progressing
        assert rollout.latest.child_count() == count or rollout.latest.child_count() >= 1
    final = passes[-1][0]
    assert final.condition["reason"] == "OnLatestRevision"
    assert all(o["spec"]["image"] == images[-1] for o in observed.values())
    assert [r.name for r in final.revisions if r.child_count()] == [final.latest.name]
    assert len(final.revisions) <= 1 + 5


def test_arrangement_hooks_only_revisions_with_children() -> None:
    arrangement = Arrangement(
        rev("l", "v3", [], 3), (rev("a", "v1", ["p"], 1), rev("b", "v2", [], 2))
    )
    assert [r.name for r in arrangement.hooked] == ["l", "a"]
