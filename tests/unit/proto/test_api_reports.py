"""proto.api.reports: the events and conditions of a sync or finalize answer."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.api.controllers import ResponseMode
from proto.api.decorator import decode_decorator_response
from proto.api.errors import HookResponseError
from proto.api.hooks import decode_sync_response
from proto.api.reports import MAX_EVENTS, Condition, HookEvent, Reports
from tests.jsonvalues import json_values

LOOSE, STRICT = ResponseMode.LOOSE, ResponseMode.STRICT


def reports(answer: dict[str, Any], mode: ResponseMode = STRICT) -> Reports:
    return decode_sync_response(orjson.dumps(answer), mode=mode).reports


def test_an_answer_without_either_reports_nothing() -> None:
    assert reports({"status": {}}) == Reports()


def test_valid_events_and_conditions_are_read_in_order() -> None:
    found = reports(
        {
            "events": [
                {"type": "Normal", "reason": "Provisioned", "message": "database db-1 is up"},
                {"type": "Warning", "reason": "Slow"},
            ],
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "AllGood", "message": "ok"},
                {
                    "type": "example.com/Synced",
                    "status": "Unknown",
                    "reason": "Waiting",
                    "observedGeneration": 3,
                    "lastTransitionTime": "2026-01-02T03:04:05Z",
                },
            ],
        }
    )
    assert found == Reports(
        events=(
            HookEvent("Normal", "Provisioned", "database db-1 is up"),
            HookEvent("Warning", "Slow", ""),
        ),
        conditions=(
            Condition("Ready", "True", "AllGood", "ok"),
            Condition("example.com/Synced", "Unknown", "Waiting", "", 3, "2026-01-02T03:04:05Z"),
        ),
    )


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        ({"type": "Normal"}, "events: must be an array, not object"),
        (["Normal"], "events[0]: must be an object, not string"),
        ([{"reason": "R"}], "events[0].type: required"),
        (
            [{"type": "Info", "reason": "R"}],
            "events[0].type: must be Normal or Warning, not 'Info'",
        ),
        ([{"type": "Normal"}], "events[0].reason: required"),
        ([{"type": "Normal", "reason": ""}], "events[0].reason: must not be empty"),
        ([{"type": "Normal", "reason": 3}], "events[0].reason: must be a string, not number"),
        ([{"type": "Normal", "reason": "R" * 129}], "events[0].reason: longer than 128"),
        ([{"type": "Normal", "reason": "R", "message": []}], "events[0].message: must be a"),
    ],
)
def test_a_malformed_event_is_left_out_and_named(events: Any, problem: str) -> None:
    found = reports({"events": events, "status": {"kept": True}})
    assert found.events == ()
    (only,) = found.problems
    assert only.startswith(problem)


@pytest.mark.parametrize(
    ("condition", "problem"),
    [
        ({"status": "True", "reason": "R"}, "conditions[0].type: required"),
        ({"type": "not ok", "status": "True", "reason": "R"}, "conditions[0].type: 'not ok' is"),
        ({"type": "Ready", "reason": "R"}, "conditions[0].status: required"),
        (
            {"type": "Ready", "status": "true", "reason": "R"},
            "conditions[0].status: must be True, False or Unknown, not 'true'",
        ),
        ({"type": "Ready", "status": "True"}, "conditions[0].reason: required"),
        ({"type": "Ready", "status": "True", "reason": "Not Camel"}, "conditions[0].reason: 'Not"),
        (
            {"type": "Ready", "status": "True", "reason": "R", "message": "m" * 32769},
            "conditions[0].message: longer than 32768",
        ),
        (
            {"type": "Ready", "status": "True", "reason": "R", "observedGeneration": -1},
            "conditions[0].observedGeneration: must be an integer >= 0, not -1",
        ),
        (
            {"type": "Ready", "status": "True", "reason": "R", "observedGeneration": "1"},
            "conditions[0].observedGeneration: must be an integer >= 0, not string",
        ),
        (
            {"type": "Ready", "status": "True", "reason": "R", "lastTransitionTime": "yesterday"},
            "conditions[0].lastTransitionTime: must be an RFC 3339 time",
        ),
        (
            {"type": "Ready", "status": "True", "reason": "R", "lastTransitionTime": "2026-01-02"},
            "conditions[0].lastTransitionTime: must be an RFC 3339 time",
        ),
    ],
)
def test_a_malformed_condition_is_left_out_and_named(
    condition: dict[str, Any], problem: str
) -> None:
    found = reports({"conditions": [condition]})
    assert found.conditions == ()
    (only,) = found.problems
    assert only.startswith(problem)


def test_the_good_entries_stay_when_others_are_malformed() -> None:
    decoded = decode_sync_response(
        orjson.dumps(
            {
                "status": {"phase": "Running"},
                "children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}],
                "events": [{"type": "Normal", "reason": "A"}, {"type": "Bad", "reason": "B"}],
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "Up"},
                    {"type": "Ready", "status": "False", "reason": "Again"},
                ],
            }
        ),
        mode=STRICT,
    )
    assert decoded.status == {"phase": "Running"} and len(decoded.children) == 1
    assert decoded.reports == Reports(
        events=(HookEvent("Normal", "A", ""),),
        conditions=(Condition("Ready", "True", "Up", ""),),
        problems=(
            "events[1].type: must be Normal or Warning, not 'Bad'",
            "conditions[1].type: 'Ready' appears more than once",
        ),
    )


def test_events_beyond_the_limit_are_left_out_once() -> None:
    many = [{"type": "Normal", "reason": f"R{i}"} for i in range(MAX_EVENTS + 5)]
    found = reports({"events": many})
    assert len(found.events) == MAX_EVENTS
    assert found.problems == (
        f"events[{MAX_EVENTS}]: at most {MAX_EVENTS} events per answer, the rest are ignored",
    )


def test_a_long_event_message_is_cut() -> None:
    (event,) = reports(
        {"events": [{"type": "Normal", "reason": "R", "message": "x" * 5000}]}
    ).events
    assert event.message == "x" * 1024


def test_unknown_fields_in_an_entry_follow_the_response_mode() -> None:
    answer = {"events": [{"type": "Normal", "reason": "R", "mesage": "typo"}]}
    with pytest.raises(HookResponseError, match=re.escape('unknown field "events[0].mesage"')):
        reports(answer, STRICT)
    loose = decode_sync_response(orjson.dumps(answer), mode=LOOSE)
    assert loose.warnings == ('unknown field "events[0].mesage"',)
    assert loose.reports.events == (HookEvent("Normal", "R", ""),)


def test_a_decorator_answer_reports_the_same_way() -> None:
    decoded = decode_decorator_response(
        orjson.dumps(
            {
                "labels": {"a": "b"},
                "events": [{"type": "Warning", "reason": "Odd", "message": "m"}],
                "conditions": [{"type": "Decorated", "status": "True", "reason": "Done"}],
            }
        ),
        mode=STRICT,
    )
    assert decoded.labels == {"a": "b"}
    assert decoded.reports == Reports(
        events=(HookEvent("Warning", "Odd", "m"),),
        conditions=(Condition("Decorated", "True", "Done", ""),),
    )


FIELDS = st.sampled_from(
    ["type", "status", "reason", "message", "observedGeneration", "lastTransitionTime"]
)
VALUES = st.sampled_from(
    ["Normal", "Warning", "True", "False", "Ready", "Ok", "", "2026-01-02T03:04:05Z", 0, -1, 7]
)
ENTRIES = st.lists(st.dictionaries(FIELDS, VALUES | json_values(max_leaves=3)), max_size=20)
"""Lists of entries that are often valid, often not, whatever field breaks."""


@given(events=ENTRIES | json_values(), conditions=ENTRIES | json_values())
def test_no_value_of_either_field_refuses_a_loose_answer(events: Any, conditions: Any) -> None:
    """Whatever ``events`` and ``conditions`` hold, the rest of the answer applies, and each
    entry is either read or named in exactly one problem."""
    decoded = decode_sync_response(
        orjson.dumps({"status": {"x": 1}, "events": events, "conditions": conditions}), mode=LOOSE
    )
    assert decoded.status == {"x": 1}
    found = decoded.reports
    for field, value, kept in (
        ("events", events, found.events),
        ("conditions", conditions, found.conditions),
    ):
        named = [p for p in found.problems if p.startswith(field)]
        if value is None:
            assert not kept and not named
        elif not isinstance(value, list):
            assert not kept and len(named) == 1
        elif field == "events" and len(value) > MAX_EVENTS:
            assert len(kept) + len(named) == MAX_EVENTS + 1
        else:
            assert len(kept) + len(named) == len(value)
