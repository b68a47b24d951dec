"""manager.cli.rollout: the pure parts of ``metashard rollout``, and ``status``'s wait with a
stepped clock (the I/O runs in the e2e tests)."""

from __future__ import annotations

import asyncio
import datetime
import io
from collections.abc import Sequence
from typing import Any

import pytest

from manager.cli.rollout import (
    Progress,
    RolloutError,
    RolloutTimeout,
    age,
    changed_paths,
    history_table,
    render,
    summary,
    undo_target,
    wait,
)
from proto.api.revisions import Revision

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


def parent(
    generation: int, observed: int | None, updated: tuple[str, str] | None
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if observed is not None:
        status["observedGeneration"] = observed
    if updated is not None:
        condition = {"type": "Updated", "status": updated[0], "reason": updated[1], "message": "m"}
        status["conditions"] = [condition]
    return {"metadata": {"generation": generation}, "status": status}


def test_status_lines_say_where_the_rollout_is() -> None:
    revisions = [rev(1, "a", 1), rev(2, "b", 2)]
    waiting = Progress.of("things/p", parent(3, 3, ("False", "RolloutWaiting")), revisions)
    assert not waiting.complete
    assert waiting.line() == (
        "things/p: waiting for rollout to finish: 2 of 3 children on revision 2 "
        "(2abcdef012); RolloutWaiting: m"
    )
    behind = Progress.of("things/p", parent(4, 3, ("True", "OnLatestRevision")), [rev(2, "b", 3)])
    assert not behind.complete
    assert behind.line() == (
        "things/p: waiting for its controller to observe generation 4 (observed: 3)"
    )
    done = Progress.of("things/p", parent(4, 4, ("True", "OnLatestRevision")), [rev(2, "b", 3)])
    assert done.complete
    assert done.line() == (
        "things/p: successfully rolled out revision 2 (2abcdef012): 3 of 3 children"
    )
    # all children moved, but the controller still says it waits (a status check)
    checking = Progress.of("things/p", parent(4, 4, ("False", "RolloutWaiting")), [rev(2, "b", 3)])
    assert not checking.complete
    # no Updated condition (a parent Metacontroller wrote): the counts decide
    assert Progress.of("things/p", parent(4, 4, None), [rev(2, "b", 3)]).complete
    unrolled = Progress.of("things/p", parent(1, 1, None), [])
    assert unrolled.unrolled and "no ControllerRevisions" in unrolled.line()
    assert not Progress.of("things/p", parent(1, None, None), []).unrolled  # not synced yet


class Steps:
    """``read`` returns the given states in turn (the last one for ever); ``sleep`` steps
    the clock instead of waiting."""

    def __init__(self, states: Sequence[Progress]) -> None:
        self.states = list(states)
        self.now = 0.0
        self.reads = 0

    async def read(self) -> Progress:
        self.reads += 1
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def moving() -> list[Progress]:
    """A rollout of three children to revision 2, as the controller writes it."""
    updated = ("False", "RolloutProgressing")
    return [
        Progress.of("things/p", parent(2, 1, ("True", "OnLatestRevision")), [rev(1, "a", 3)]),
        Progress.of("things/p", parent(2, 2, updated), [rev(1, "a", 3), rev(2, "b", 0)]),
        Progress.of("things/p", parent(2, 2, updated), [rev(1, "a", 2), rev(2, "b", 1)]),
        Progress.of("things/p", parent(2, 2, updated), [rev(1, "a", 2), rev(2, "b", 1)]),
        Progress.of("things/p", parent(2, 2, updated), [rev(1, "a", 1), rev(2, "b", 2)]),
        Progress.of("things/p", parent(2, 2, ("True", "OnLatestRevision")), [rev(2, "b", 3)]),
    ]


def test_status_prints_a_line_each_time_the_rollout_moves_until_it_has_finished() -> None:
    steps, out = Steps(moving()), io.StringIO()
    asyncio.run(wait(steps.read, out, clock=steps.clock, sleep=steps.sleep, interval=0.5))
    lines = out.getvalue().splitlines()
    assert lines == [
        "things/p: waiting for its controller to observe generation 2 (observed: 1)",
        "things/p: waiting for rollout to finish: 0 of 3 children on revision 2 "
        "(2abcdef012); RolloutProgressing: m",
        "things/p: waiting for rollout to finish: 1 of 3 children on revision 2 "
        "(2abcdef012); RolloutProgressing: m",
        "things/p: waiting for rollout to finish: 2 of 3 children on revision 2 "
        "(2abcdef012); RolloutProgressing: m",
        "things/p: successfully rolled out revision 2 (2abcdef012): 3 of 3 children",
    ]
    assert steps.reads == 6 and steps.now == 2.5


def test_status_gives_up_after_the_timeout() -> None:
    stuck = moving()[:3]
    steps, out = Steps(stuck), io.StringIO()
    with pytest.raises(RolloutTimeout) as err:
        asyncio.run(wait(steps.read, out, limit=2, clock=steps.clock, sleep=steps.sleep))
    assert str(err.value) == f"timed out after 2s: {stuck[-1].line()}"
    assert steps.now == 2.0
    assert out.getvalue().splitlines()[-1] == stuck[-1].line()


def test_status_without_watch_prints_where_the_rollout_is_once() -> None:
    steps, out = Steps(moving()[2:]), io.StringIO()
    asyncio.run(wait(steps.read, out, watch=False, clock=steps.clock, sleep=steps.sleep))
    assert out.getvalue().splitlines() == [moving()[2].line()]
    assert steps.reads == 1


def test_status_of_a_parent_without_revisions_is_an_error() -> None:
    steps = Steps([Progress.of("things/p", parent(1, 1, None), [])])
    with pytest.raises(RolloutError, match="no ControllerRevisions"):
        asyncio.run(wait(steps.read, io.StringIO(), clock=steps.clock, sleep=steps.sleep))


def test_undo_target() -> None:
    revisions = [rev(1, "a"), rev(2, "b"), rev(3, "c", 1)]
    assert undo_target(revisions, None).number == 2
    assert undo_target(revisions, 1).number == 1
    with pytest.raises(RolloutError, match=r"no revision 7 \(known: 1, 2, 3\)"):
        undo_target(revisions, 7)
    with pytest.raises(RolloutError, match="no previous revision"):
        undo_target(revisions[:1], None)
