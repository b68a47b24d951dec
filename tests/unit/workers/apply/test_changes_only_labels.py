"""workers.apply.changes_only_labels: an update that changes nothing but some labels, on the
object or in the last-applied annotation's record of them."""

from __future__ import annotations

from typing import Any

import pytest

from workers.apply import ControllerRef, apply_update, changes_only_labels, create_body

OWNER = ControllerRef("x/v1", "Set", "s", "uid")
HASH = "controller-revision-hash"
KEYS = frozenset((HASH,))


def wanted(labels: dict[str, str] | None, value: str = "v") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "a"}
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": value}}


def written(desired: dict[str, Any], labels: dict[str, str] | None) -> dict[str, Any]:
    """``desired`` as created, its labels then set to ``labels`` (None: no labels map)."""
    body = create_body(desired, OWNER)
    metadata = {k: v for k, v in body["metadata"].items() if k != "labels"}
    if labels is not None:
        metadata["labels"] = labels
    return {**body, "metadata": {**metadata, "uid": "u", "resourceVersion": "3"}}


CASES = [
    ("unchanged", {"app": "w", HASH: "h"}, {"app": "w", HASH: "h"}, "v", True),
    ("label removed", {"app": "w", HASH: "h"}, {"app": "w"}, "v", True),
    ("label changed", {"app": "w", HASH: "h"}, {"app": "w", HASH: "x"}, "v", True),
    ("label emptied", {"app": "w", HASH: "h"}, {"app": "w", HASH: ""}, "v", True),
    ("the only label removed, no map left", {HASH: "h"}, None, "v", True),
    ("the only label removed, an empty map left", {HASH: "h"}, {}, "v", True),
    ("label removed and data changed", {"app": "w", HASH: "h"}, {"app": "w"}, "new", False),
    ("another label removed", {"app": "w", HASH: "h"}, {HASH: "h"}, "v", False),
    ("another label added by someone", {HASH: "h"}, {"x": "1", HASH: "h"}, "v", True),
]


@pytest.mark.parametrize(
    ("why", "recorded", "live", "value", "only"), CASES, ids=[c[0] for c in CASES]
)
def test_changes_only_labels(
    why: str,
    recorded: dict[str, str],
    live: dict[str, str] | None,
    value: str,
    only: bool,
) -> None:
    observed = written(wanted(recorded), live)
    desired = wanted(recorded, value)
    assert changes_only_labels(observed, desired, KEYS) is only
    assert changes_only_labels(observed, desired, frozenset()) is (
        not apply_update(observed, desired)[1]
    )


def test_a_new_value_of_the_label_alone() -> None:
    observed = written(wanted({"app": "w", HASH: "h1"}), {"app": "w", HASH: "h1"})
    assert changes_only_labels(observed, wanted({"app": "w", HASH: "h2"}), KEYS)
    assert not changes_only_labels(observed, wanted({"app": "w", HASH: "h2"}, "new"), KEYS)


def test_without_a_record_any_update_is_more_than_labels() -> None:
    """A child dynamic apply never wrote (no annotation): the update records one."""
    observed = written(wanted({HASH: "h"}), {})
    annotations = observed["metadata"].pop("annotations")
    assert annotations
    assert not changes_only_labels(observed, wanted({HASH: "h"}), KEYS)
