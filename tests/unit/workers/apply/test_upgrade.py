"""workers.apply.upgrade: the client-side -> server-side managed fields migration."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from workers.apply import LAST_APPLIED_ANNOTATION
from workers.apply.upgrade import union, upgrade_patch, upgraded_entries

OLD = {
    "manager": "metashard",
    "operation": "Update",
    "apiVersion": "v1",
    "time": "2026-01-01T00:00:00Z",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:data": {".": {}, "f:a": {}, "f:b": {}}},
}
APPLY = {
    "manager": "metacontroller",
    "operation": "Apply",
    "apiVersion": "v1",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:data": {"f:a": {}}},
}
OTHER = {**OLD, "manager": "kubectl-edit", "fieldsV1": {"f:data": {"f:z": {}}}}
STATUS = {**OLD, "subresource": "status", "fieldsV1": {"f:status": {}}}


def _obj(*entries: dict[str, Any], annotation: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "c", "resourceVersion": "7", "managedFields": list(entries)}
    if annotation:
        metadata["annotations"] = {LAST_APPLIED_ANNOTATION: "{}", "keep": "x"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def test_old_update_entries_merge_into_the_apply_entry() -> None:
    obj = _obj(OLD, APPLY, OTHER, STATUS)
    before = copy.deepcopy(obj)
    patch = upgrade_patch(obj, manager="metacontroller")
    assert obj == before
    assert patch == [
        {
            "op": "replace",
            "path": "/metadata/managedFields",
            "value": [
                {**APPLY, "fieldsV1": {"f:data": {"f:a": {}, ".": {}, "f:b": {}}}},
                OTHER,
                STATUS,
            ],
        },
        {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
    ]


def test_without_an_apply_entry_one_is_made_in_the_old_ones_place() -> None:
    entries = upgraded_entries([OTHER, OLD], old_managers={"metashard"}, manager="m")
    assert entries == [
        OTHER,
        {
            "manager": "m",
            "operation": "Apply",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "time": OLD["time"],
            "fieldsV1": OLD["fieldsV1"],
        },
    ]


def test_nothing_to_migrate() -> None:
    assert upgrade_patch(_obj(APPLY, OTHER, STATUS), manager="metacontroller") is None
    assert upgrade_patch({"metadata": {}}, manager="m") is None
    other_version = {**OLD, "apiVersion": "v2"}
    assert upgrade_patch(_obj(APPLY, other_version), manager="metacontroller") is None


def test_the_last_applied_annotation_is_removed_when_asked() -> None:
    path = "/metadata/annotations/metacontroller.k8s.io~1last-applied-configuration"
    assert upgrade_patch(_obj(APPLY, annotation=True), manager="metacontroller") is None
    patch = upgrade_patch(_obj(APPLY, annotation=True), manager="metacontroller", last_applied=True)
    assert patch == [
        {"op": "remove", "path": path},
        {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
    ]


_FIELDS: st.SearchStrategy[dict[str, Any]] = st.recursive(
    st.just({}),
    lambda inner: st.dictionaries(st.sampled_from(["f:a", "f:b", "k:{}", "."]), inner, max_size=3),
    max_leaves=8,
)


def _paths(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    out = {prefix}
    for key, sub in tree.items():
        out |= _paths(sub, (*prefix, key))
    return out


@given(_FIELDS, _FIELDS)
def test_union_holds_exactly_both_field_sets(a: dict[str, Any], b: dict[str, Any]) -> None:
    merged = union(a, b)
    assert _paths(merged) == _paths(a) | _paths(b)
    assert union(b, a) == merged
