"""Server-side apply's pure core (``loadtest.apiserver.ssa``): field sets, set operations,
merging, pruning, conflicts and the managedFields bookkeeping, by tables and properties."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.apiserver.ssa import fieldpath as fp
from loadtest.apiserver.ssa import managed
from loadtest.apiserver.ssa.fieldset import compare, to_set
from loadtest.apiserver.ssa.merge import merge, prune
from loadtest.apiserver.ssa.types import builtin, from_schema

WIDGET = from_schema(
    {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer"},
                    "selector": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "atomicMap": {
                        "type": "object",
                        "x-kubernetes-map-type": "atomic",
                        "additionalProperties": {"type": "string"},
                    },
                    "tags": {
                        "type": "array",
                        "x-kubernetes-list-type": "set",
                        "items": {"type": "string"},
                    },
                    "args": {"type": "array", "items": {"type": "string"}},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name", "protocol"],
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "protocol": {"type": "string", "default": "TCP"},
                                "port": {"type": "integer"},
                            },
                        },
                    },
                },
            },
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        },
    }
)
SCOPE = managed.Scope(type=WIDGET, api_version="example.com/v1", has_status=True)
CONFIGMAP = managed.Scope(type=builtin("ConfigMap"), api_version="v1")
NOW = "2030-01-01T00:00:00Z"


def fields(wire: dict[str, Any]) -> fp.Node:
    return fp.decode(wire)


def cm(**data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}


# --- field sets -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"spec": {"replicas": 1}}, {"f:spec": {"f:replicas": {}}}),
        (
            {"spec": {"ports": [{"name": "http", "port": 80}]}},
            {
                "f:spec": {
                    "f:ports": {
                        'k:{"name":"http","protocol":"TCP"}': {".": {}, "f:name": {}, "f:port": {}}
                    }
                }
            },
        ),
        ({"spec": {"tags": ["a", "b"]}}, {"f:spec": {"f:tags": {'v:"a"': {}, 'v:"b"': {}}}}),
        (
            {"spec": {"args": ["x"], "atomicMap": {"k": "v"}}},
            {"f:spec": {"f:args": {}, "f:atomicMap": {}}},
        ),
        (
            {"spec": {"selector": {"a": {"b": 1}}}},
            {"f:spec": {"f:selector": {"f:a": {".": {}, "f:b": {}}}}},
        ),
        ({"spec": {"labels": {}}}, {"f:spec": {"f:labels": {}}}),
        ({"spec": {"replicas": None}}, {"f:spec": {"f:replicas": {}}}),
    ],
)
def test_field_set_of_an_object(value: dict[str, Any], expected: dict[str, Any]) -> None:
    assert fp.encode(to_set(value, WIDGET)) == expected


def test_builtin_list_map_keys_include_defaulted_key_fields() -> None:
    pod = {"spec": {"containers": [{"name": "app", "ports": [{"containerPort": 80}]}]}}
    ports = to_set(pod, builtin("Pod"))["f:spec"]["f:containers"]['k:{"name":"app"}']["f:ports"]
    assert list(ports) == ['k:{"containerPort":80,"protocol":"TCP"}']


ROLE_REF = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}
RULE = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        (
            "RoleBinding",
            {"roleRef": ROLE_REF, "subjects": [{"kind": "User", "name": "u"}]},
            {"f:roleRef": {}, "f:subjects": {}},
        ),
        ("ClusterRoleBinding", {"roleRef": ROLE_REF}, {"f:roleRef": {}}),
        ("Role", {"rules": [RULE]}, {"f:rules": {}}),
        (
            "ClusterRole",
            {"rules": [RULE], "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {}}]}},
            {"f:rules": {}, "f:aggregationRule": {"f:clusterRoleSelectors": {}}},
        ),
        ("TokenRequest", {"spec": {"audiences": ["a"]}}, {"f:spec": {"f:audiences": {}}}),
        (
            "SubjectAccessReview",
            {"spec": {"groups": ["g"], "resourceAttributes": {"verb": "get"}}},
            {"f:spec": {"f:groups": {}, "f:resourceAttributes": {"f:verb": {}}}},
        ),
    ],
)
def test_rbac_and_review_types_own_their_atomic_fields_whole(
    kind: str, value: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert fp.encode(to_set(value, builtin(kind))) == expected


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("f:data", "f:x"), ".data.x"),
        (("f:spec", "f:ports", 'k:{"name":"http"}', "f:port"), '.spec.ports[name="http"].port'),
        (('k:{"port":80,"protocol":"TCP"}',), '[port=80,protocol="TCP"]'),
        (("f:metadata", "f:finalizers", 'v:"x"'), '.metadata.finalizers[="x"]'),
        (("f:args", "i:0"), ".args[0]"),
    ],
)
def test_conflict_paths_are_written_as_the_api_server_writes_them(
    path: tuple[str, ...], text: str
) -> None:
    assert fp.describe(path) == text


def test_compare_marks_created_maps_and_changed_leaves() -> None:
    old = {"metadata": {"name": "c"}, "data": {"a": "1", "gone": "x"}}
    new = {"metadata": {"name": "c", "labels": {"k": "v"}}, "data": {"a": "2"}}
    diff = compare(old, new, builtin("ConfigMap"))
    assert fp.encode(diff.added) == {"f:metadata": {"f:labels": {".": {}, "f:k": {}}}}
    assert fp.encode(diff.modified) == {"f:data": {"f:a": {}}}
    assert fp.encode(diff.removed) == {"f:data": {"f:gone": {}}}


# --- set operations ---------------------------------------------------------------------------

_ELEMENTS = st.sampled_from(["f:a", "f:b", 'k:{"name":"x"}', 'v:"y"', "i:0"])
_SETS = st.recursive(
    st.just(fp.member()),
    lambda children: (
        st.dictionaries(_ELEMENTS, children, min_size=1, max_size=3)
        | st.dictionaries(_ELEMENTS, children, min_size=1, max_size=3).map(lambda d: {**d, ".": {}})
    ),
    max_leaves=8,
)


def _members(node: fp.Node) -> set[tuple[str, ...]]:
    return set(fp.members(node))


@settings(max_examples=200)
@given(_SETS, _SETS)
def test_set_operations_are_the_set_operations_on_members(a: fp.Node, b: fp.Node) -> None:
    assert _members(fp.union(a, b)) == _members(a) | _members(b)
    assert _members(fp.intersection(a, b)) == _members(a) & _members(b)
    assert _members(fp.difference(a, b)) == _members(a) - _members(b)


@given(_SETS)
def test_fields_v1_round_trips(node: fp.Node) -> None:
    assert _members(fp.decode(fp.encode(node))) == _members(node)


# --- merging and pruning ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("live", "config", "expected"),
    [
        (  # a granular map merges keys
            {"spec": {"labels": {"a": "1"}}},
            {"spec": {"labels": {"b": "2"}}},
            {"spec": {"labels": {"a": "1", "b": "2"}}},
        ),
        (  # atomic values are replaced
            {"spec": {"args": ["a", "b"], "atomicMap": {"a": "1"}}},
            {"spec": {"args": ["c"], "atomicMap": {"b": "2"}}},
            {"spec": {"args": ["c"], "atomicMap": {"b": "2"}}},
        ),
        (  # list-map items merge by key; new items follow the config's order
            {"spec": {"ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]}},
            {
                "spec": {
                    "ports": [{"name": "metrics", "port": 9090}, {"name": "http", "port": 8080}]
                }
            },
            {
                "spec": {
                    "ports": [
                        {"name": "metrics", "port": 9090},
                        {"name": "http", "port": 8080},
                        {"name": "https", "port": 443},
                    ]
                }
            },
        ),
        (  # set lists union, live order first
            {"spec": {"tags": ["a", "b"]}},
            {"spec": {"tags": ["c", "a"]}},
            {"spec": {"tags": ["c", "a", "b"]}},
        ),
    ],
)
def test_merge(live: Any, config: Any, expected: Any) -> None:
    before = copy.deepcopy(live)
    assert merge(live, config, WIDGET) == expected
    assert live == before


def test_prune_removes_what_the_manager_dropped_and_nobody_owns() -> None:
    merged = {"data": {"x": "1", "y": "2", "z": "3"}}
    last = fields({"f:data": {"f:x": {}, "f:y": {}, "f:z": {}}})
    owned = fields({"f:data": {"f:x": {}, "f:y": {}}})  # y: another manager; x: the new set
    assert prune(merged, last, owned, builtin("ConfigMap")) == {"data": {"x": "1", "y": "2"}}
    nothing = prune(merged, last, {}, builtin("ConfigMap"))
    assert nothing == {}


_CONFIGS = st.fixed_dictionaries(
    {},
    optional={
        "replicas": st.integers(0, 3),
        "labels": st.dictionaries(
            st.sampled_from("abc"), st.sampled_from("xy"), min_size=1, max_size=3
        ),
        "ports": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["a", "b", "c"]), "port": st.integers(1, 3)}
            ),
            min_size=1,
            max_size=3,
            unique_by=lambda p: p["name"],
        ),
        "tags": st.lists(st.sampled_from("pqr"), unique=True, min_size=1, max_size=3),
        "args": st.lists(st.sampled_from("xyz"), max_size=2),
    },
).map(lambda spec: {"spec": spec})


@settings(max_examples=150)
@given(_CONFIGS, _CONFIGS)
def test_merged_object_carries_the_config_and_compares_equal_to_itself(
    live: dict[str, Any], config: dict[str, Any]
) -> None:
    merged = merge(live, config, WIDGET)
    assert merge(merged, config, WIDGET) == merged  # applying again changes nothing
    in_merged = _members(to_set(merged, WIDGET))
    for path in _members(to_set(config, WIDGET)):  # an empty spec may have gained keys
        assert any(m[: len(path)] == path for m in in_merged), path
    same = compare(merged, merged, WIDGET)
    assert not (same.added or same.modified or same.removed)


# --- managedFields ----------------------------------------------------------------------------


def _apply(
    live: dict[str, Any] | None,
    config: dict[str, Any],
    manager: str,
    *,
    force: bool = False,
    scope: managed.Scope = CONFIGMAP,
) -> dict[str, Any]:
    obj, entries, _ = managed.apply(
        live,
        config,
        manager=manager,
        scope=scope,
        force=force,
        now=NOW,
        zero=lambda: {"metadata": {}},
    )
    return {**obj, "metadata": {**obj["metadata"], "managedFields": entries}}


def _owners(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields") or []}


def test_apply_conflicts_force_and_shared_ownership() -> None:
    obj = _apply(None, cm(x="1", y="2"), "a")
    assert _owners(obj)["a"]["fieldsV1"] == {"f:data": {"f:x": {}, "f:y": {}}}
    with pytest.raises(managed.Conflicts) as err:
        _apply(obj, cm(x="9"), "b")
    assert str(err.value) == 'Apply failed with 1 conflict: conflict with "a": .data.x'
    shared = _apply(obj, cm(x="1"), "b")  # the same value: co-owned, no time (nothing changed)
    assert "time" not in _owners(shared)["b"]
    forced = _apply(shared, cm(y="9"), "b", force=True)
    assert forced["data"] == {"x": "1", "y": "9"}
    assert _owners(forced)["a"]["fieldsV1"] == {"f:data": {"f:x": {}}}
    assert _owners(forced)["b"]["fieldsV1"] == {"f:data": {"f:y": {}}}
    dropped = _apply(forced, cm(w="0"), "a")  # x was a's alone: removed
    assert dropped["data"] == {"w": "0", "y": "9"}


def test_conflicts_are_grouped_per_manager() -> None:
    conflicts = [('"b"', ".a"), ('"c" using v1', ".b"), ('"b"', ".c")]
    assert managed.message(conflicts) == (
        'Apply failed with 3 conflicts: conflicts with "b":\n- .a\n- .c\n'
        'conflicts with "c" using v1:\n- .b'
    )


def test_status_is_not_owned_on_the_main_resource() -> None:
    config = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    obj = _apply(
        None, {**config, "spec": {"replicas": 1}, "status": {"ready": True}}, "a", scope=SCOPE
    )
    assert _owners(obj)["a"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


def test_update_records_what_changed_and_takes_it_from_others() -> None:
    obj = _apply(None, cm(x="1", y="2"), "a")
    entries = managed.update(
        obj,
        {**obj, "data": {"x": "1", "y": "3"}},
        manager="u",
        scope=CONFIGMAP,
        now=NOW,
        zero=lambda: {"metadata": {}},
    )
    assert entries is not None
    by = {e["manager"]: e for e in entries}
    assert by["u"]["operation"] == "Update" and by["u"]["fieldsV1"] == {"f:data": {"f:y": {}}}
    assert by["a"]["fieldsV1"] == {"f:data": {"f:x": {}}}


@pytest.mark.parametrize("reset", [[], [{}]])
def test_an_empty_managed_fields_list_resets_and_stops_tracking(reset: list[Any]) -> None:
    obj = _apply(None, cm(x="1"), "a")
    new = {**obj, "metadata": {**obj["metadata"], "managedFields": reset}}
    kw: dict[str, Any] = {
        "manager": "u",
        "scope": CONFIGMAP,
        "now": NOW,
        "zero": lambda: {"metadata": {}},
    }
    assert managed.update(obj, new, **kw) is None
    untracked = {**obj, "metadata": {"name": "c"}}
    assert managed.update(untracked, {**untracked, "data": {"x": "2"}}, **kw) is None


def test_first_apply_to_an_untracked_object_conflicts_with_before_first_apply() -> None:
    live = cm(x="1")
    with pytest.raises(
        managed.Conflicts, match=re.escape('"before-first-apply" using v1: .data.x')
    ):
        _apply(live, cm(x="2"), "a")


def test_invalid_request_managed_fields_keep_the_stored_ones() -> None:
    obj = _apply(None, cm(x="1"), "a")
    bogus = {**obj, "metadata": {**obj["metadata"], "managedFields": [{"operation": "Bogus"}]}}
    entries = managed.update(
        obj, bogus, manager="u", scope=CONFIGMAP, now=NOW, zero=lambda: {"metadata": {}}
    )
    assert entries == obj["metadata"]["managedFields"]


def test_prune_walks_structs_and_keeps_what_nobody_applied() -> None:
    merged = {"metadata": {"name": "w", "labels": {"t": "a"}}, "spec": {"replicas": 1}}
    last = fields({"f:metadata": {"f:labels": {"f:t": {}}}, "f:spec": {"f:replicas": {}}})
    owned = fields({"f:spec": {"f:replicas": {}}})
    assert prune(merged, last, owned, WIDGET) == {
        "metadata": {"name": "w"},
        "spec": {"replicas": 1},
    }


def _widget(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, **spec}


@settings(max_examples=150, deadline=None)
@given(_CONFIGS, _CONFIGS)
def test_conflicts_are_exactly_the_fields_a_forced_apply_takes(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    live = _apply(None, _widget(first), "a", scope=SCOPE)
    again = managed.apply(
        live, _widget(first), manager="a", scope=SCOPE, force=False, now=NOW, zero=dict
    )
    assert not again[2]  # re-applying the same configuration changes nothing
    forced = _apply(live, _widget(second), "b", force=True, scope=SCOPE)
    assert merge(forced, _widget(second), WIDGET) == forced  # b's configuration holds
    before = _members(fields(_owners(live)["a"]["fieldsV1"]))
    after_entry = _owners(forced).get("a")
    after = _members(fields(after_entry["fieldsV1"])) if after_entry else set()
    taken = before - after
    try:
        _apply(live, _widget(second), "b", scope=SCOPE)
    except managed.Conflicts as err:
        assert {path for _, path in err.conflicts} == {fp.describe(p) for p in taken}
    else:
        assert not taken
    # once b owns its fields, re-applying them never conflicts
    managed.apply(
        forced, _widget(second), manager="b", scope=SCOPE, force=False, now=NOW, zero=dict
    )


def test_a_create_takes_every_field_it_sets_from_request_entries() -> None:
    given = [
        {
            "manager": "old",
            "operation": "Apply",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:x": {}}},
        }
    ]
    new = {**cm(x="1", y="2"), "metadata": {"name": "c", "managedFields": given}}
    entries = managed.update(
        None, new, manager="u", scope=CONFIGMAP, now=NOW, zero=lambda: {"metadata": {}}
    )
    assert entries is not None
    assert [(e["manager"], e["fieldsV1"]) for e in entries] == [
        ("u", {"f:data": {".": {}, "f:x": {}, "f:y": {}}})
    ]
