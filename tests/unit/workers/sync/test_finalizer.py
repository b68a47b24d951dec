"""workers.sync.finalizer: Metacontroller's finalizer manager and ShouldFinalize rules."""

from __future__ import annotations

import pytest

from workers.sync import finalizer
from workers.sync.finalizer import Change

NAME = "metacontroller.io/compositecontroller-cc"


@pytest.mark.parametrize(
    ("wanted", "present", "deleting", "expected"),
    [
        (True, False, False, Change.ADD),
        (True, False, True, Change.NONE),  # never added to an object being deleted
        (True, True, False, Change.NONE),
        (True, True, True, Change.NONE),
        (False, True, False, Change.REMOVE),  # the finalize hook was dropped
        (False, True, True, Change.REMOVE),
        (False, False, False, Change.NONE),
        (False, False, True, Change.NONE),
    ],
)
def test_change(wanted: bool, present: bool, deleting: bool, expected: Change) -> None:
    assert finalizer.change(wanted=wanted, present=present, deleting=deleting) is expected


@pytest.mark.parametrize(
    ("hook", "deleting", "selected", "expected"),
    [
        (True, True, True, True),
        (True, False, False, True),  # no longer selected, still carrying the finalizer
        (True, False, True, False),
        (False, True, True, False),  # no finalize hook: sync is called
        (False, False, False, False),
    ],
)
def test_finalizing(hook: bool, deleting: bool, selected: bool, expected: bool) -> None:
    assert (
        finalizer.finalizing(has_finalize_hook=hook, deleting=deleting, selected=selected)
        is expected
    )


@pytest.mark.parametrize(
    ("deleting", "finalizers", "hook", "expected"),
    [
        (False, [], False, True),
        (False, [NAME], True, True),
        (True, [NAME], True, True),
        (True, [NAME, "other.io/x"], True, True),
        (True, [], True, False),  # our finalizer is already gone
        (True, [NAME], False, False),  # no finalize hook any more
        (True, [NAME, "foregroundDeletion"], True, False),  # the GC deletes the children
        (True, ["orphan", NAME], True, False),  # the GC orphans the children
        (True, ["other.io/x"], False, False),
    ],
)
def test_manages_children(
    deleting: bool, finalizers: list[str], hook: bool, expected: bool
) -> None:
    assert (
        finalizer.manages_children(
            deleting=deleting, finalizers=finalizers, name=NAME, has_finalize_hook=hook
        )
        is expected
    )


def test_updated_lists_keep_other_finalizers_in_order() -> None:
    assert finalizer.updated(["a", "b"], NAME, Change.ADD) == ["a", "b", NAME]
    assert finalizer.updated(["a", NAME, "b", NAME], NAME, Change.REMOVE) == ["a", "b"]
    assert finalizer.updated(["a"], NAME, Change.REMOVE) == ["a"]


def test_finalizers_of_ignores_what_is_not_a_list_of_strings() -> None:
    assert finalizer.finalizers_of({"finalizers": ["a", 3, "b"]}) == ["a", "b"]
    assert finalizer.finalizers_of({"finalizers": "a"}) == []
    assert finalizer.finalizers_of({}) == []


def test_finalizers_patch_is_guarded_by_the_resource_version() -> None:
    metadata = {"name": "p", "resourceVersion": "12", "finalizers": ["a"]}
    assert finalizer.finalizers_patch(metadata, ["a", NAME]) == {
        "metadata": {"finalizers": ["a", NAME], "resourceVersion": "12"}
    }
    assert finalizer.finalizers_patch(metadata, [])["metadata"]["finalizers"] is None
