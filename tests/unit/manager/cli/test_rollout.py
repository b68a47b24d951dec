"""manager.cli.rollout: the pure parts of ``metashard rollout`` (the I/O runs in the e2e tests)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from manager.cli.rollout import (
    RolloutError,
    age,
    changed_paths,
    find_resource,
    history_table,
    render,
    status_lines,
    summary,
    undo_target,
)
from proto.api.revisions import Revision
from proto.kube.resources import Resource

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def rev(
    number: int, image: str, children: int = 0, created: str = "2026-01-02T03:00:00Z"
) -> Revision:
    names = tuple(f"p-{i}" for i in range(children))
    obj: dict[str, Any] = {
        "metadata": {"name": f"r-{number}abcdef0123", "creationTimestamp": created}
    }
    kids = (("", "Pod", names),) if names else ()
    return Revision(
        f"things.g-{number}abcdef0123", {"spec": {"image": image, "n": 3}}, kids, number, obj
    )


def test_changed_paths_and_summary() -> None:
    before = {"spec": {"image": "a", "n": 3, "list": [1], "gone": {"x": 1}}}
    after = {"spec": {"image": "b", "n": 3, "list": [1, 2], "new": True}}
    assert changed_paths(before, after) == ["spec.gone.x", "spec.image", "spec.list", "spec.new"]
    assert summary(before, after, limit=2) == "spec.gone.x, spec.image (+2 more)"
    assert summary(None, after) == "(first)"
    assert summary(after, after) == "(no change)"


@pytest.mark.parametrize(
    ("created", "expected"),
    [
        ("2026-01-02T03:04:00Z", "5s"),
        ("2026-01-02T02:04:05Z", "1h"),
        ("2025-12-30T03:04:05Z", "3d"),
        ("2026-01-02T03:00:05Z", "4m"),
        ("nonsense", "?"),
    ],
)
def test_age(created: str, expected: str) -> None:
    assert age(created, NOW) == expected


def test_history_is_oldest_first_with_changes() -> None:
    rows = history_table([rev(3, "c", 2), rev(1, "a"), rev(2, "b")], NOW)
    assert rows == [
        ["REVISION", "HASH", "AGE", "CHILDREN", "CHANGE"],
        ["1", "1abcdef012", "4m", "0", "(first)"],
        ["2", "2abcdef012", "4m", "0", "spec.image"],
        ["3", "3abcdef012", "4m", "2", "spec.image"],
    ]
    assert render(rows).splitlines()[1] == "1         1abcdef012  4m   0         (first)"


def test_status_names_the_latest_revision_and_the_updated_condition() -> None:
    parent = {
        "status": {
            "conditions": [
                {"type": "Updated", "status": "False", "reason": "RolloutWaiting", "message": "m"}
            ]
        }
    }
    lines = status_lines(parent, [rev(1, "a", 1), rev(2, "b", 2)], "things/p")
    assert lines == [
        "things/p: latest revision 2 (things.g-2abcdef0123)",
        "  children on the latest revision: 2 of 3",
        "  Updated: False RolloutWaiting: m",
    ]
    assert "no ControllerRevisions" in status_lines({}, [], "things/p")[0]


def test_undo_target() -> None:
    revisions = [rev(1, "a"), rev(2, "b"), rev(3, "c", 1)]
    assert undo_target(revisions, None).number == 2
    assert undo_target(revisions, 1).number == 1
    with pytest.raises(RolloutError, match=r"no revision 7 \(known: 1, 2, 3\)"):
        undo_target(revisions, 7)
    with pytest.raises(RolloutError, match="no previous revision"):
        undo_target(revisions[:1], None)


def test_find_resource() -> None:
    things = Resource("example.com", "v1", "things", "Thing", True, short_names=("th",))
    others = Resource("other.io", "v1", "things", "Thing", True)
    status = Resource("example.com", "v1", "things/status", "Thing", True)
    assert find_resource([things, status], "Thing") is things
    assert find_resource([things, others], "things.other.io") is others
    assert find_resource([things], "th") is things
    with pytest.raises(RolloutError, match="ambiguous"):
        find_resource([things, others], "things")
    with pytest.raises(RolloutError, match="no resource"):
        find_resource([things], "widgets")
