"""workers.sync.hookrequest: object maps of raw objects (v1/v2 keys) and the encoded request."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.api.controllers import HookVersion
from proto.api.objectmap import TypeKey
from tests.unit.proto.objectmaps import build_object_map
from workers.sync.hookrequest import HookRequest, encode, object_map
from workers.sync.observed import Observed


def obj(name: str, namespace: str = "") -> Observed:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return Observed.decode(orjson.dumps({"kind": "ConfigMap", "metadata": metadata}))


def decoded(mapping: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = orjson.loads(orjson.dumps(mapping))
    return out


@pytest.mark.parametrize(
    ("version", "parent_namespace", "expected"),
    [
        # v1 under a namespaced parent: names; objects elsewhere are dropped
        (HookVersion.V1, "a", {"ConfigMap.v1": ["x"], "Secret.v1": []}),
        # v1 under a cluster-scoped parent: namespace/name for namespaced objects
        (HookVersion.V1, "", {"ConfigMap.v1": ["a/x", "b/y", "z"], "Secret.v1": []}),
        # v2: namespace/name for namespaced objects, whatever the parent
        (HookVersion.V2, "a", {"ConfigMap.v1": ["a/x", "b/y", "z"], "Secret.v1": []}),
        (HookVersion.V2, "", {"ConfigMap.v1": ["a/x", "b/y", "z"], "Secret.v1": []}),
    ],
)
def test_object_map_keys(
    version: HookVersion, parent_namespace: str, expected: dict[str, list[str]]
) -> None:
    groups = {"ConfigMap.v1": [obj("x", "a"), obj("y", "b"), obj("z")], "Secret.v1": []}
    result = decoded(object_map(version, parent_namespace=parent_namespace, groups=groups))
    assert {group: sorted(objects) for group, objects in result.items()} == expected


NAMES = st.sampled_from(["x", "y", "z"])
NAMESPACES = st.sampled_from(["", "a", "b"])


@given(
    st.sampled_from(list(HookVersion)),
    NAMESPACES,
    st.lists(st.tuples(NAMES, NAMESPACES, st.integers(0, 9)), max_size=6),
)
def test_object_map_agrees_with_the_reference_builder(
    version: HookVersion, parent_namespace: str, items: list[tuple[str, str, int]]
) -> None:
    raws = [
        orjson.dumps({"metadata": {"name": n, "namespace": ns}, "data": {"i": i}})
        for n, ns, i in items
    ]
    objects = [Observed.decode(raw) for raw in raws]
    ours = object_map(version, parent_namespace=parent_namespace, groups={"ConfigMap.v1": objects})
    reference = build_object_map(
        version,
        parent_namespace=parent_namespace,
        groups={TypeKey("v1", "ConfigMap"): [o.obj for o in objects]},
    )
    assert decoded(ours) == reference


def test_encode_embeds_the_raw_json_as_sent() -> None:
    controller = b'{"kind":"CompositeController","metadata":{"name":"cc"}}'
    parent = b'{"kind": "Thing",   "metadata": {"name": "p", "namespace": "a"}}'
    child = (
        b'{ "kind":"ConfigMap","metadata":{"name":"x","namespace":"a"},"data":{"b":"1","a":"2"}}'
    )
    children = object_map(
        HookVersion.V1, parent_namespace="a", groups={"ConfigMap.v1": [Observed.decode(child)]}
    )
    body = encode(HookRequest(controller, parent, children, related={}, finalizing=True))
    assert parent in body and child in body and controller in body
    assert orjson.loads(body) == {
        "controller": orjson.loads(controller),
        "parent": orjson.loads(parent),
        "children": {"ConfigMap.v1": {"x": orjson.loads(child)}},
        "related": {},
        "finalizing": True,
    }
