"""workers.sync.conditions: a hook's conditions merged into the status, as SetStatusCondition."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proto.api.reports import Condition
from workers.sync.conditions import merged, timestamp

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def ready(status: str = "True", **more: Any) -> Condition:
    return Condition("Ready", status, more.pop("reason", "Up"), more.pop("message", ""), **more)


def written(type: str, status: str, reason: str, since: str, **more: Any) -> dict[str, Any]:
    return {
        "type": type,
        "status": status,
        "reason": reason,
        "message": more.pop("message", ""),
        "lastTransitionTime": since,
        **more,
    }


def test_no_conditions_leave_the_status_as_it_is() -> None:
    status = {"phase": "x", "conditions": [{"type": "Other"}]}
    assert merged(status, (), observed=None, now=T0) == status


def test_a_new_condition_gets_now_and_is_appended_after_the_hooks_own() -> None:
    status = {"phase": "x", "conditions": [{"type": "Hooks", "status": "True"}]}
    assert merged(status, [ready()], observed={}, now=T0) == {
        "phase": "x",
        "conditions": [{"type": "Hooks", "status": "True"}, written("Ready", "True", "Up", T0)],
    }
    assert status == {"phase": "x", "conditions": [{"type": "Hooks", "status": "True"}]}


def test_an_unchanged_status_keeps_the_parents_transition_time() -> None:
    observed = {"conditions": [written("Ready", "True", "Up", T0)]}
    after = merged({}, [ready(reason="StillUp", message="m")], observed=observed, now=T1)
    assert after == {"conditions": [written("Ready", "True", "StillUp", T0, message="m")]}


def test_a_changed_status_takes_the_hooks_time_or_now() -> None:
    observed = {"conditions": [written("Ready", "True", "Up", T0)]}
    assert merged({}, [ready("False")], observed=observed, now=T1)["conditions"] == [
        written("Ready", "False", "Up", T1)
    ]
    hooks = "2025-12-31T23:00:00Z"
    changed = merged({}, [ready("False", last_transition_time=hooks)], observed=observed, now=T1)
    assert changed["conditions"] == [written("Ready", "False", "Up", hooks)]
    # With the status unchanged the hook's own time does not move the parent's.
    same = merged({}, [ready(last_transition_time=hooks)], observed=observed, now=T1)
    assert same["conditions"] == [written("Ready", "True", "Up", T0)]


def test_a_condition_of_the_hooks_status_of_the_same_type_is_replaced_in_place() -> None:
    status = {"conditions": [{"type": "A"}, {"type": "Ready", "status": "Bogus"}, {"type": "B"}]}
    after = merged(status, [ready(observed_generation=4)], observed=None, now=T0)
    assert after["conditions"] == [
        {"type": "A"},
        written("Ready", "True", "Up", T0, observedGeneration=4),
        {"type": "B"},
    ]


def test_a_malformed_observed_status_is_no_obstacle() -> None:
    for observed in (None, "text", {"conditions": "no"}, {"conditions": [None, {"type": 3}]}):
        assert merged({"conditions": "x"}, [ready()], observed=observed, now=T0) == {
            "conditions": [written("Ready", "True", "Up", T0)]
        }


def test_timestamps_are_whole_seconds_in_utc() -> None:
    assert timestamp(1_767_225_600.75) == T0


CONDITIONS = st.lists(
    st.builds(
        Condition,
        type=st.sampled_from(["Ready", "Synced", "example.com/Healthy"]),
        status=st.sampled_from(["True", "False", "Unknown"]),
        reason=st.sampled_from(["Up", "Down"]),
        message=st.sampled_from(["", "m"]),
        observed_generation=st.none() | st.integers(0, 3),
        last_transition_time=st.none() | st.just("2025-01-01T00:00:00Z"),
    ),
    unique_by=lambda c: c.type,
    max_size=3,
)


@given(first=CONDITIONS, again=CONDITIONS, base=st.sampled_from([{}, {"conditions": []}]))
def test_answering_the_same_statuses_again_writes_nothing(
    first: list[Condition], again: list[Condition], base: dict[str, Any]
) -> None:
    """The sync's status is a fixed point: merging the same conditions into what was written,
    later, gives what was written; a condition whose status changed gets the later time."""
    written_first = merged(base, first, observed=None, now=T0)
    assert merged(base, first, observed=written_first, now=T1) == written_first
    written_again = merged(base, again, observed=written_first, now=T1)
    before = {c["type"]: c for c in written_first.get("conditions", ())}
    for condition in written_again.get("conditions", ()):
        previous = before.get(condition["type"])
        if previous is not None and previous["status"] == condition["status"]:
            assert condition["lastTransitionTime"] == previous["lastTransitionTime"]
        else:
            assert condition["lastTransitionTime"] in (T1, "2025-01-01T00:00:00Z")
