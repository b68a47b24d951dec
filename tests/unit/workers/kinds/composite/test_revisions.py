"""workers.kinds.composite.revisions against Metacontroller's ControllerRevision names."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from proto.api import gojson
from tests.jsonvalues import strict
from workers.kinds.composite.revisions import revision_name


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
