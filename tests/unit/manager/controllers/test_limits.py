"""manager.controllers.limits: annotations to limits, and what does not parse."""

from __future__ import annotations

from typing import Any

import pytest

from manager.controllers.limits import (
    MAX_CONCURRENT_ANNOTATION,
    NO_LIMITS,
    RATE_ANNOTATION,
    Limits,
    Problem,
    limits_of,
)


def controller(annotations: Any) -> dict[str, Any]:
    return {"metadata": {"name": "c", "annotations": annotations}}


@pytest.mark.parametrize(
    ("annotations", "limits"),
    [
        (None, NO_LIMITS),
        ({}, NO_LIMITS),
        ({MAX_CONCURRENT_ANNOTATION: "4"}, Limits(max_concurrent=4)),
        ({MAX_CONCURRENT_ANNOTATION: " 12 "}, Limits(max_concurrent=12)),
        ({RATE_ANNOTATION: "2.5"}, Limits(per_second=2.5)),
        ({RATE_ANNOTATION: "0.1", MAX_CONCURRENT_ANNOTATION: "1"}, Limits(1, 0.1)),
    ],
)
def test_limits_parse(annotations: Any, limits: Limits) -> None:
    assert limits_of(controller(annotations)) == (limits, ())


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (MAX_CONCURRENT_ANNOTATION, "0"),
        (MAX_CONCURRENT_ANNOTATION, "-1"),
        (MAX_CONCURRENT_ANNOTATION, "1.5"),
        (MAX_CONCURRENT_ANNOTATION, "many"),
        (RATE_ANNOTATION, "0"),
        (RATE_ANNOTATION, "-3"),
        (RATE_ANNOTATION, "nan"),
        (RATE_ANNOTATION, "inf"),
        (RATE_ANNOTATION, "1e9"),
        (RATE_ANNOTATION, "fast"),
    ],
)
def test_a_value_that_does_not_parse_is_a_problem_and_that_limit_is_off(
    annotation: str, value: str
) -> None:
    other = (
        RATE_ANNOTATION if annotation == MAX_CONCURRENT_ANNOTATION else MAX_CONCURRENT_ANNOTATION
    )
    limits, problems = limits_of(controller({annotation: value, other: "3"}))
    assert problems == (Problem(annotation, value),)
    assert limits == (Limits(per_second=3.0) if other == RATE_ANNOTATION else Limits(3))
    assert repr(value) in str(problems[0])


def test_the_bucket_holds_one_second_of_tokens_and_at_least_one() -> None:
    assert Limits(per_second=0.2).burst == 1
    assert Limits(per_second=7.9).burst == 7
    assert not NO_LIMITS.limited
    assert Limits(max_concurrent=1).limited
