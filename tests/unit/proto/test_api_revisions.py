"""proto.api.revisions: the ControllerRevision schema, parent patches and hashes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.api.revisions import (
    Revision,
    apply_patch,
    make_patch,
    older_parents,
    restore_patch,
    revision_hash,
)
from tests.jsonvalues import strict


@pytest.mark.parametrize(
    ("paths", "patch"),
    [
        (["spec"], {"spec": {"template": {"x": 1}, "replicas": 3}}),
        (["spec.template"], {"spec": {"template": {"x": 1}}}),
        (
            ["spec.template", "spec.missing", "metadata.labels"],
            {"spec": {"template": {"x": 1}}, "metadata": {"labels": {"a": "b"}}},
        ),
        (["spec.replicas.deeper"], {}),
    ],
)
def test_make_patch_takes_the_field_paths_that_exist(
    paths: list[str], patch: dict[str, Any]
) -> None:
    parent = {
        "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {"template": {"x": 1}, "replicas": 3},
    }
    before = strict(parent)
    assert make_patch(parent, paths) == patch
    assert strict(parent) == before


def test_apply_patch_overwrites_the_paths_on_a_copy() -> None:
    parent = {"metadata": {"name": "p"}, "spec": {"template": {"x": 2}, "replicas": 5}}
    before = strict(parent)
    patched = apply_patch(parent, {"spec": {"template": {"x": 1}}}, ["spec.template", "spec.gone"])
    assert patched == {"metadata": {"name": "p"}, "spec": {"template": {"x": 1}, "replicas": 5}}
    assert strict(parent) == before
    assert apply_patch(parent, {"spec": {"replicas": 1}}, ["spec"]) == {
        "metadata": {"name": "p"},
        "spec": {"replicas": 1},
    }


def test_restore_patch_also_removes_the_paths_the_patch_lacks() -> None:
    paths = ["spec.template", "spec.paused", "spec.gone.deeper"]
    then = {"metadata": {"name": "p"}, "spec": {"template": {"image": "v1"}}}
    patch = make_patch(then, paths)
    now = {"metadata": {"name": "p"}, "spec": {"template": {"image": "v2"}, "paused": True}}
    before = strict(now)
    restored = restore_patch(now, patch, paths)
    assert restored == then
    assert make_patch(restored, paths) == patch
    assert strict(now) == before
    assert apply_patch(now, patch, paths)["spec"]["paused"] is True  # unlike applyPatch


OBJECTS = st.dictionaries(
    st.sampled_from(["spec", "x"]), st.dictionaries(st.sampled_from(["a", "b"]), st.integers())
)


@given(parent=OBJECTS, then=OBJECTS)
def test_a_restored_parent_has_exactly_the_patch(
    parent: dict[str, Any], then: dict[str, Any]
) -> None:
    paths = ["spec.a", "x"]
    patch = make_patch(then, paths)
    assert make_patch(restore_patch(parent, patch, paths), paths) == patch


@pytest.mark.parametrize(
    "obj",
    [{}, {"metadata": {"name": "r"}, "parentPatch": []}, {"metadata": {}, "children": [1]}],
)
def test_malformed_revisions_are_value_errors(obj: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Revision.decode(obj)


def test_the_hash_is_the_name_suffix_and_decode_reads_children_and_number() -> None:
    assert revision_hash("things.g.io-0123abc") == "0123abc"
    revision = Revision.decode(
        {
            "metadata": {"name": "r-1", "annotations": {"metashard.io/revision": "7"}},
            "children": [{"apiGroup": "apps", "kind": "X", "names": ["a", "b"]}],
        }
    )
    assert (revision.patch, revision.number, revision.child_count()) == ({}, 7, 2)
    assert revision.owns("apps", "X", "b") and not revision.owns("", "X", "b")


PARENT = {"metadata": {"name": "p"}, "spec": {"template": {"image": "v3"}, "replicas": 3}}
PODS = (("", "Pod", ("p-0",)),)


@pytest.mark.parametrize(
    ("revisions", "expected"),
    [
        ([], []),
        # The latest (the live parent's own patch) and childless revisions are left out.
        ([Revision("latest", {"spec": {"template": {"image": "v3"}}}, PODS)], []),
        ([Revision("history", {"spec": {"template": {"image": "v1"}}})], []),
        (
            [
                Revision("latest", {"spec": {"template": {"image": "v3"}}}, PODS),
                Revision("old", {"spec": {"template": {"image": "v2"}}}, PODS),
            ],
            [("old", {**PARENT, "spec": {"template": {"image": "v2"}, "replicas": 3}})],
        ),
    ],
)
def test_older_parents_are_the_parents_of_older_revisions_that_own_children(
    revisions: list[Revision], expected: list[tuple[str, dict[str, Any]]]
) -> None:
    assert older_parents(PARENT, revisions, ["spec.template"]) == expected
