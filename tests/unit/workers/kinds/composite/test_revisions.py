"""workers.kinds.composite.revisions against Metacontroller's ControllerRevision names."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from proto.api import gojson
from proto.api.revisions import Revision, revision_hash
from tests.jsonvalues import strict
from workers.apply import ControllerRef
from workers.kinds.composite.revisions import (
    new_revision_object,
    revision_labels,
    revision_name,
    revision_object,
)


@pytest.fixture(scope="module")
def vectors(shared_dir: Path) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((shared_dir / "vectors/apply.json").read_text())[
        "revisionName"
    ]
    assert data
    return data


def test_revision_name_vectors(vectors: list[dict[str, Any]]) -> None:
    for vector in vectors:
        patch = vector["parentPatch"]
        before = strict(patch)
        name = revision_name(
            vector["parentResource"], vector["parentGroup"], vector["parentUID"], patch
        )
        assert name == vector["expectedName"], vector["name"]
        assert gojson.dumps(patch).decode() == vector["parentPatchGoJSON"]
        assert strict(patch) == before


def test_core_group_and_the_hash_input() -> None:
    patch = {"spec": {"b": "<x>", "a": 1}}
    expected = hashlib.sha1(b'uid-1{"spec":{"a":1,"b":"\\u003cx\\u003e"}}').hexdigest()
    assert revision_name("things", "", "uid-1", patch) == f"things.core-{expected}"


def test_the_prefix_is_cut_to_fit_a_253_character_name() -> None:
    name = revision_name("r" * 300, "example.com", "u", {})
    assert len(name) == 253
    assert name.startswith("r" * 212 + "-")


def test_different_patches_or_parents_get_different_names() -> None:
    names = {
        revision_name("things", "g", "u1", {"spec": {"a": 1}}),
        revision_name("things", "g", "u2", {"spec": {"a": 1}}),
        revision_name("things", "g", "u1", {"spec": {"a": 1.5}}),
    }
    assert len(names) == 3
    # Go writes 1.0 as 1: the same patch text, hence the same revision.
    assert revision_name("things", "g", "u1", {"spec": {"a": 1.0}}) == revision_name(
        "things", "g", "u1", {"spec": {"a": 1}}
    )


def test_a_collision_count_changes_the_hash_and_zero_is_metacontrollers() -> None:
    patch = {"spec": {"a": 1}}
    base = revision_name("things", "g", "u", patch)
    assert revision_name("things", "g", "u", patch, 0) == base
    bumped = {revision_name("things", "g", "u", patch, n) for n in (1, 2, 3)}
    assert len(bumped) == 3 and base not in bumped
    assert revision_hash(base) == base.rsplit("-", 1)[1] and len(revision_hash(base)) == 40


def test_new_revision_object_is_metacontrollers_with_a_history_number() -> None:
    parent = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"template": {"metadata": {"labels": {"app": "x"}}}},
    }
    labels = revision_labels(parent, group="g.io", resource="things", generate_selector=False)
    assert labels == {
        "app": "x",
        "metacontroller.k8s.io/apiGroup": "g.io",
        "metacontroller.k8s.io/resource": "things",
    }
    assert (
        revision_labels(parent, group="", resource="things", generate_selector=True)[
            "controller-uid"
        ]
        == "u"
    )
    revision = Revision(
        "things.g.io-abc", {"spec": {"b": 1.0, "a": "<"}}, (("", "Pod", ("p-1",)),), 3
    )
    owner = ControllerRef("g.io/v1", "Thing", "p", "u")
    body = new_revision_object(revision, namespace="ns", owner=owner, labels=labels)
    assert body == {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": "things.g.io-abc",
            "namespace": "ns",
            "labels": labels,
            "annotations": {"metashard.io/revision": "3"},
            "ownerReferences": [owner.as_owner_reference()],
        },
        "parentPatch": {"spec": {"a": "<", "b": 1}},
        "children": [{"apiGroup": "", "kind": "Pod", "names": ["p-1"]}],
    }
    decoded = Revision.decode(body)
    assert (decoded.name, decoded.children, decoded.number) == (revision.name, revision.children, 3)


def test_revision_object_writes_only_what_changed() -> None:
    live = {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "ControllerRevision",
        "metadata": {"name": "r", "resourceVersion": "7"},
        "parentPatch": {},
        "children": [{"apiGroup": "", "kind": "Pod", "names": ["a"]}],
    }
    same = Revision.decode(live)
    assert same.number == 0
    assert revision_object(same) is None
    numbered = revision_object(Revision("r", {}, same.children, 4, live))
    assert numbered is not None
    assert numbered["metadata"] == {
        "name": "r",
        "resourceVersion": "7",
        "annotations": {"metashard.io/revision": "4"},
    }
    emptied = revision_object(Revision("r", {}, (), 0, live))
    assert emptied is not None and "children" not in emptied
