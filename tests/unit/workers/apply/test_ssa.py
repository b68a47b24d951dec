"""workers.apply.ssa: the apply body, ``covers`` and the update planner per method."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.api.controllers import UpdateMethod
from tests.jsonvalues import json_values
from workers.apply import LAST_APPLIED_ANNOTATION, ControllerRef
from workers.apply.ssa import Step, apply_body, body_hash, covers, plan_update, up_to_date

OWNER = ControllerRef("example.com/v1", "Thing", "t", "uid-p")
LABEL = "controller-revision-hash"


def _child(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns", **metadata},
        "data": {"a": "1"},
    }


def test_the_apply_body_has_no_system_metadata_status_or_last_applied() -> None:
    desired = _child(
        uid="u",
        resourceVersion="5",
        generation=2,
        creationTimestamp="2026-01-01T00:00:00Z",
        deletionTimestamp="2026-01-01T00:00:00Z",
        deletionGracePeriodSeconds=30,
        managedFields=[{}],
        selfLink="/x",
        annotations={LAST_APPLIED_ANNOTATION: "{}"},
        labels={"app": "x"},
    )
    desired["status"] = {"phase": "x"}
    before = copy.deepcopy(desired)
    body = apply_body(desired, OWNER)
    assert desired == before
    assert body == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "labels": {"app": "x"},
            "ownerReferences": [OWNER.as_owner_reference()],
        },
        "data": {"a": "1"},
    }


def test_the_controller_reference_is_not_added_twice() -> None:
    ref = {**OWNER.as_owner_reference(), "blockOwnerDeletion": False}
    body = apply_body(_child(ownerReferences=[ref]), OWNER)
    assert body["metadata"]["ownerReferences"] == [ref]


def test_other_annotations_stay() -> None:
    body = apply_body(_child(annotations={LAST_APPLIED_ANNOTATION: "{}", "a": "b"}), OWNER)
    assert body["metadata"]["annotations"] == {"a": "b"}


def test_the_hash_ignores_key_order() -> None:
    assert body_hash({"a": 1, "b": [1, 2]}) == body_hash({"b": [1, 2], "a": 1})
    assert body_hash({"a": 1}) != body_hash({"a": 2})
    assert body_hash({"a": True}) != body_hash({"a": 1})


@pytest.mark.parametrize(
    ("current", "desired", "expected"),
    [
        ({"a": 1, "b": 2}, {"a": 1}, True),
        ({"a": 1}, {"a": 2}, False),
        ({"a": 1}, {"b": 1}, False),
        ({"a": True}, {"a": 1}, False),
        ({"a": 1.0}, {"a": 1}, True),
        ([{"k": 1, "d": 300}, {"k": 2}], [{"k": 1}], True),  # a defaulted item field
        ([{"k": 0}, {"k": 1}], [{"k": 1}], True),  # an item added by admission
        ([{"k": 1}], [{"k": 1}, {"k": 2}], False),
        ([{"k": 2}, {"k": 1}], [{"k": 1}, {"k": 2}], False),  # order counts
        ({"a": [1]}, {"a": {"b": 1}}, False),
        ({"a": None}, {"a": None}, True),
    ],
)
def test_covers(current: Any, desired: Any, expected: bool) -> None:
    assert covers(current, desired) is expected


@given(json_values())
def test_a_value_covers_itself(value: Any) -> None:
    assert covers(value, value)


@given(st.dictionaries(st.sampled_from("abcd"), json_values(max_leaves=4)), st.data())
def test_a_map_covers_any_part_of_itself(current: dict[str, Any], data: st.DataObject) -> None:
    keys = data.draw(st.lists(st.sampled_from(sorted(current)), unique=True)) if current else []
    assert covers(current, {k: current[k] for k in keys})


def test_a_child_is_up_to_date_when_it_holds_what_is_applied() -> None:
    observed = _child(uid="u", resourceVersion="3", annotations={"other": "x"})
    desired = _child(annotations={LAST_APPLIED_ANNOTATION: "{}"})
    desired["status"] = {"ignored": True}
    assert up_to_date(observed, desired)
    assert not up_to_date(observed, {**desired, "data": {"a": "2"}})
    assert not up_to_date(None, desired)


_OBSERVED = _child(uid="u", resourceVersion="3", generation=1, labels={LABEL: "r1"})
_SAME = {
    **_OBSERVED,
    "metadata": {**_OBSERVED["metadata"], "resourceVersion": "3", "generation": 2},
}
_RELABELLED = {**_OBSERVED, "metadata": {**_OBSERVED["metadata"], "labels": {LABEL: "r2"}}}
_CHANGED = {**_OBSERVED, "data": {"a": "2"}}
_NEWER = {**_OBSERVED, "metadata": {**_OBSERVED["metadata"], "resourceVersion": "4"}}

M = UpdateMethod
PLANS: list[tuple[str, UpdateMethod, dict[str, Any], Step]] = [
    ("OnDelete never patches", M.ON_DELETE, {}, Step.SKIP),
    ("OnDelete even with a dry run", M.ON_DELETE, {"dry_run": _CHANGED}, Step.SKIP),
    ("InPlace applies", M.IN_PLACE, {}, Step.APPLY),
    ("RollingInPlace applies", M.ROLLING_IN_PLACE, {}, Step.APPLY),
    ("InPlace cached: skip", M.IN_PLACE, {"cached": True}, Step.SKIP),
    ("being deleted: skip", M.IN_PLACE, {"deleting": True}, Step.SKIP),
    ("Recreate first dry-runs", M.RECREATE, {}, Step.DRY_RUN),
    ("RollingRecreate first dry-runs", M.ROLLING_RECREATE, {}, Step.DRY_RUN),
    ("Recreate cached: skip", M.RECREATE, {"cached": True}, Step.SKIP),
    ("Recreate, dry run equal", M.RECREATE, {"dry_run": _SAME}, Step.SKIP),
    ("Recreate, dry run changed", M.RECREATE, {"dry_run": _CHANGED}, Step.RECREATE),
    ("RollingRecreate changed", M.ROLLING_RECREATE, {"dry_run": _CHANGED}, Step.RECREATE),
    (
        "revision label only: in place",
        M.ROLLING_RECREATE,
        {"dry_run": _RELABELLED, "in_place_labels": frozenset((LABEL,))},
        Step.APPLY,
    ),
    ("a label not listed recreates", M.RECREATE, {"dry_run": _RELABELLED}, Step.RECREATE),
    ("a dry run of a newer child", M.RECREATE, {"dry_run": _NEWER}, Step.STALE),
    ("newer and changed", M.RECREATE, {"dry_run": {**_NEWER, "data": {"a": "2"}}}, Step.STALE),
]


@pytest.mark.parametrize(("why", "method", "given", "step"), PLANS, ids=[p[0] for p in PLANS])
def test_plan_update(why: str, method: UpdateMethod, given: dict[str, Any], step: Step) -> None:
    assert plan_update(method, observed=_OBSERVED, **given) is step


@given(
    st.sampled_from(list(UpdateMethod)),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, _SAME, _CHANGED, _RELABELLED, _NEWER]),
)
def test_planner_properties(
    method: UpdateMethod, deleting: bool, cached: bool, dry_run: dict[str, Any] | None
) -> None:
    step = plan_update(
        method, observed=_OBSERVED, deleting=deleting, cached=cached, dry_run=dry_run
    )
    if deleting or cached or method is M.ON_DELETE:
        assert step is Step.SKIP
    if step is Step.RECREATE:
        assert method in (M.RECREATE, M.ROLLING_RECREATE) and dry_run is not None
        assert dry_run is not _SAME
    if step is Step.DRY_RUN:
        assert dry_run is None
    if step is Step.STALE:
        assert dry_run is _NEWER
    if method in (M.IN_PLACE, M.ROLLING_IN_PLACE):
        assert step in (Step.SKIP, Step.APPLY)
