from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtest.apiserver.patch import PatchFailed, json_patch, merge_patch, strategic_merge

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)
objects = st.dictionaries(st.text(max_size=3), json_values, max_size=4)


def strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    return value


@given(objects, objects)
def test_merge_patch_is_idempotent(target: dict[str, Any], patch: dict[str, Any]) -> None:
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once


@given(objects)
def test_merging_an_object_into_nothing_drops_its_nulls(patch: dict[str, Any]) -> None:
    assert merge_patch({}, patch) == strip_nulls(patch)


def test_merge_patch_null_removes_and_lists_replace() -> None:
    target = {"data": {"a": "1", "b": "2"}, "items": [1, 2]}
    patched = merge_patch(target, {"data": {"b": None, "c": "3"}, "items": [3]})
    assert patched == {"data": {"a": "1", "c": "3"}, "items": [3]}
    assert target == {"data": {"a": "1", "b": "2"}, "items": [1, 2]}


def test_json_patch_operations() -> None:
    doc = {"a": {"b": [1, 2]}, "c": "x"}
    ops = [
        {"op": "test", "path": "/c", "value": "x"},
        {"op": "add", "path": "/a/b/-", "value": 3},
        {"op": "add", "path": "/a/b/0", "value": 0},
        {"op": "replace", "path": "/c", "value": "y"},
        {"op": "copy", "from": "/c", "path": "/d"},
        {"op": "move", "from": "/d", "path": "/e~1f"},
        {"op": "remove", "path": "/a/b/1"},
    ]
    assert json_patch(doc, ops) == {"a": {"b": [0, 2, 3]}, "c": "y", "e/f": "y"}


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/c", "value": "nope"}],
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/list/9", "value": 1}],
        [{"op": "dance", "path": "/c"}],
        [{"op": "add", "path": "no-slash", "value": 1}],
    ],
)
def test_json_patch_failures(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(PatchFailed):
        json_patch({"c": "x", "list": []}, ops)


POD = {
    "metadata": {"finalizers": ["a"], "labels": {"x": "1"}},
    "spec": {
        "containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "E", "value": "1"}]},
            {"name": "b", "image": "b:1", "ports": [{"containerPort": 80, "protocol": "TCP"}]},
        ],
        "tolerations": [{"key": "t"}],
        "volumes": [{"name": "v", "emptyDir": {}}],
    },
}


def test_strategic_merge_merges_containers_by_name() -> None:
    patch = {"spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}]}}
    merged = strategic_merge(POD, patch, "Pod")
    assert [(c["name"], c["image"]) for c in merged["spec"]["containers"]] == [
        ("a", "a:1"),
        ("b", "b:2"),
        ("c", "c:1"),
    ]
    assert merged["spec"]["containers"][1]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]


def test_strategic_merge_lists_without_a_key_are_replaced_and_finalizers_are_a_set() -> None:
    patch = {"metadata": {"finalizers": ["b", "a"]}, "spec": {"tolerations": [{"key": "u"}]}}
    merged = strategic_merge(POD, patch, "Pod")
    assert merged["metadata"]["finalizers"] == ["a", "b"]
    assert merged["spec"]["tolerations"] == [{"key": "u"}]


def test_strategic_merge_directives() -> None:
    patch = {
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
        "spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [{"name": "a", "env": [{"name": "E", "$patch": "delete"}]}],
            "volumes": [
                {"name": "v", "configMap": {"name": "cm"}, "$retainKeys": ["name", "configMap"]}
            ],
        },
    }
    merged = strategic_merge(POD, patch, "Pod")
    assert merged["metadata"]["finalizers"] == []
    assert [c["name"] for c in merged["spec"]["containers"]] == ["b", "a"]
    assert merged["spec"]["containers"][1]["env"] == []
    assert merged["spec"]["volumes"] == [{"name": "v", "configMap": {"name": "cm"}}]


def test_strategic_merge_replace_and_delete_directives() -> None:
    replaced = strategic_merge(POD, {"spec": {"$patch": "replace", "containers": []}}, "Pod")
    assert replaced["spec"] == {"containers": []}
    listed = strategic_merge(
        POD, {"spec": {"containers": [{"$patch": "replace"}, {"name": "z"}]}}, "Pod"
    )
    assert listed["spec"]["containers"] == [{"name": "z"}]
    removed = strategic_merge(
        POD, {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}, "Pod"
    )
    assert [c["name"] for c in removed["spec"]["containers"]] == ["b"]
    assert "labels" not in strategic_merge(POD, {"metadata": {"labels": None}}, "Pod")["metadata"]


def test_strategic_merge_of_workload_templates_uses_the_pod_spec_keys() -> None:
    deployment = {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "1"}]}}}}
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "2"}]}}}}
    merged = strategic_merge(deployment, patch, "Deployment")
    assert [c["name"] for c in merged["spec"]["template"]["spec"]["containers"]] == ["a", "b"]
