"""Hook object maps: group keys, v1 relative and v2 uniform inner keys, empty groups."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.api.controllers import HookVersion
from proto.api.objectmap import TypeKey, object_key
from tests.unit.proto.objectmaps import build_object_map

V1, V2 = HookVersion.V1, HookVersion.V2


def obj(name: str, namespace: str = "") -> dict[str, Any]:
    metadata = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"metadata": metadata}


@pytest.mark.parametrize(
    ("api_version", "kind", "key"),
    [("v1", "Pod", "Pod.v1"), ("apps/v1", "StatefulSet", "StatefulSet.apps/v1")],
)
def test_group_key(api_version: str, kind: str, key: str) -> None:
    assert TypeKey(api_version, kind).group_key == key


# (version, parent namespace, object namespace) -> key of object "o"; None: left out
SCOPES = [
    (V1, "ns", "ns", "o"),  # both namespaced
    (V1, "", "", "o"),  # both cluster-scoped
    (V1, "", "other", "other/o"),  # cluster-scoped parent, namespaced object
    (V1, "ns", "other", None),  # namespaced parent, object elsewhere: dropped
    (V1, "ns", "", None),  # namespaced parent, cluster-scoped object: dropped
    (V2, "ns", "ns", "ns/o"),
    (V2, "", "", "o"),
    (V2, "", "other", "other/o"),
    (V2, "ns", "other", "other/o"),
    (V2, "ns", "", "o"),
]


@pytest.mark.parametrize(("version", "parent_ns", "ns", "key"), SCOPES)
def test_object_key(version: HookVersion, parent_ns: str, ns: str, key: str | None) -> None:
    assert object_key(version, parent_namespace=parent_ns, namespace=ns, name="o") == key


def test_build_keeps_declared_types_and_drops_like_v1() -> None:
    pods = TypeKey("v1", "Pod")
    sets = TypeKey("apps/v1", "StatefulSet")
    nodes = TypeKey("v1", "Node")
    a, b, node = obj("a", "ns"), obj("b", "elsewhere"), obj("n1")
    groups = {pods: [a, b], sets: [], nodes: [node]}
    v1 = build_object_map(V1, parent_namespace="ns", groups=groups)
    assert v1 == {"Pod.v1": {"a": a}, "StatefulSet.apps/v1": {}, "Node.v1": {}}
    assert v1["Pod.v1"]["a"] is a
    v2 = build_object_map(V2, parent_namespace="ns", groups=groups)
    assert v2 == {
        "Pod.v1": {"ns/a": a, "elsewhere/b": b},
        "StatefulSet.apps/v1": {},
        "Node.v1": {"n1": node},
    }
    cluster_v1 = build_object_map(V1, parent_namespace="", groups=groups)
    assert cluster_v1["Pod.v1"] == {"ns/a": a, "elsewhere/b": b}
    assert cluster_v1["Node.v1"] == {"n1": node}


def test_later_object_with_same_key_wins() -> None:
    first, second = obj("a", "ns"), {**obj("a", "ns"), "data": 2}
    built = build_object_map(
        V2, parent_namespace="ns", groups={TypeKey("v1", "X"): [first, second]}
    )
    assert built["X.v1"] == {"ns/a": second}


names = st.text(alphabet="abc-1", min_size=1, max_size=4)
namespaces = st.sampled_from(["", "ns", "other"])


@given(
    version=st.sampled_from([V1, V2]),
    parent_ns=namespaces,
    objects=st.lists(st.tuples(namespaces, names), max_size=12, unique=True),
)
def test_keys_identify_objects(
    version: HookVersion, parent_ns: str, objects: list[tuple[str, str]]
) -> None:
    built = build_object_map(
        version,
        parent_namespace=parent_ns,
        groups={TypeKey("v1", "Thing"): [obj(name, ns) for ns, name in objects]},
    )
    group = built["Thing.v1"]
    kept = [(ns, name) for ns, name in objects if version is V2 or not parent_ns or ns == parent_ns]
    # every kept object is in the map, under its own key, and nothing else is
    assert len(group) == len(kept)
    for ns, name in kept:
        key = object_key(version, parent_namespace=parent_ns, namespace=ns, name=name)
        assert key is not None
        assert group[key]["metadata"]["name"] == name
        assert group[key]["metadata"].get("namespace", "") == ns
        if version is V2 or not parent_ns:
            assert key == (f"{ns}/{name}" if ns else name)
        else:
            assert key == name
