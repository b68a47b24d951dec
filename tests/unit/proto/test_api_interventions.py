"""``metashard.io/paused`` and ``metashard.io/sync-requested-at`` as read from annotations."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from proto.api.interventions import (
    NOT_PAUSED,
    PAUSED,
    PAUSED_NOW,
    SYNC_REQUESTED_AT,
    Pause,
    annotations_of,
    pause_of,
    request_stamp,
    sync_requested,
)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, NOT_PAUSED),
        ({"other": "true"}, NOT_PAUSED),
        ({PAUSED: "true"}, PAUSED_NOW),
        ({PAUSED: "false"}, NOT_PAUSED),
    ],
)
def test_true_pauses_and_false_or_nothing_does_not(
    annotations: dict[str, Any], expected: Pause
) -> None:
    assert pause_of(annotations) == expected


@pytest.mark.parametrize("value", ["True", "yes", "1", "", " true", 1, True])
def test_any_other_value_is_a_problem_naming_it_and_does_not_pause(value: Any) -> None:
    pause = pause_of({PAUSED: value})
    assert pause.paused is False
    assert pause.problem == (
        f'annotation metashard.io/paused: {value!r} is neither "true" nor "false"; not paused'
    )


def test_annotations_are_read_from_the_metadata_of_any_shape() -> None:
    assert annotations_of({"metadata": {"annotations": {"a": "b"}}}) == {"a": "b"}
    assert annotations_of({"metadata": {"annotations": None}}) == {}
    assert annotations_of({"metadata": []}) == {}
    assert annotations_of({}) == {}


def test_a_sync_request_is_its_value_whatever_it_is() -> None:
    assert sync_requested({SYNC_REQUESTED_AT: "2026-11-27T20:35:00Z"}) == "2026-11-27T20:35:00Z"
    assert sync_requested({SYNC_REQUESTED_AT: "again, please"}) == "again, please"
    assert sync_requested({}) is None


def test_the_stamp_is_rfc3339_in_utc_with_microseconds() -> None:
    east = datetime.timezone(datetime.timedelta(hours=2))
    when = datetime.datetime(2026, 11, 27, 22, 35, 0, 1234, tzinfo=east)
    assert request_stamp(when) == "2026-11-27T20:35:00.001234Z"
    assert request_stamp(when) != request_stamp(when + datetime.timedelta(microseconds=1))
