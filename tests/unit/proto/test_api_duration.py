"""Go duration parsing, against the results of Go's own ``time.ParseDuration`` tests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.api.duration import (
    HOUR,
    MICROSECOND,
    MILLISECOND,
    MINUTE,
    NANOSECOND,
    SECOND,
    parse_duration,
    parse_seconds,
)
from proto.api.errors import DurationError

# (input, nanoseconds) pairs from Go's src/time/time_test.go parseDurationTests.
GO_RESULTS = [
    ("0", 0),
    ("5s", 5 * SECOND),
    ("30s", 30 * SECOND),
    ("1478s", 1478 * SECOND),
    ("-5s", -5 * SECOND),
    ("+5s", 5 * SECOND),
    ("-0", 0),
    ("+0", 0),
    ("5.0s", 5 * SECOND),
    ("5.6s", 5 * SECOND + 600 * MILLISECOND),
    ("5.s", 5 * SECOND),
    (".5s", 500 * MILLISECOND),
    ("1.0s", 1 * SECOND),
    ("1.00s", 1 * SECOND),
    ("1.004s", 1 * SECOND + 4 * MILLISECOND),
    ("1.0040s", 1 * SECOND + 4 * MILLISECOND),
    ("100.00100s", 100 * SECOND + 1 * MILLISECOND),
    ("10ns", 10 * NANOSECOND),
    ("11us", 11 * MICROSECOND),
    ("12\u00b5s", 12 * MICROSECOND),
    ("12\u03bcs", 12 * MICROSECOND),
    ("13ms", 13 * MILLISECOND),
    ("14s", 14 * SECOND),
    ("15m", 15 * MINUTE),
    ("16h", 16 * HOUR),
    ("3h30m", 3 * HOUR + 30 * MINUTE),
    ("10.5s4m", 4 * MINUTE + 10 * SECOND + 500 * MILLISECOND),
    ("-2m3.4s", -(2 * MINUTE + 3 * SECOND + 400 * MILLISECOND)),
    ("1h2m3s4ms5us6ns", HOUR + 2 * MINUTE + 3 * SECOND + 4 * MILLISECOND + 5 * MICROSECOND + 6),
    ("39h9m14.425s", 39 * HOUR + 9 * MINUTE + 14 * SECOND + 425 * MILLISECOND),
    ("52763797000ns", 52763797000 * NANOSECOND),
    ("0.3333333333333333333h", 20 * MINUTE),
    ("9007199254740993ns", (1 << 53) + 1),
    ("9223372036854775807ns", (1 << 63) - 1),
    ("9223372036854775.807us", (1 << 63) - 1),
    ("9223372036s854ms775us807ns", (1 << 63) - 1),
    ("-9223372036854775808ns", -(1 << 63)),
    ("-9223372036854775.808us", -(1 << 63)),
    ("-9223372036s854ms775us808ns", -(1 << 63)),
    ("-2562047h47m16.854775808s", -(1 << 63)),
    ("0.100000000000000000000h", 6 * MINUTE),
    ("0.830103483285477580700h", 49 * MINUTE + 48 * SECOND + 372539827 * NANOSECOND),
    ("1m30s", 90 * SECOND),
    ("1.5h", 90 * MINUTE),
    ("500ms", 500 * MILLISECOND),
]

GO_ERRORS = [
    ("", 'time: invalid duration ""'),
    ("3", 'time: missing unit in duration "3"'),
    ("-", 'time: invalid duration "-"'),
    ("s", 'time: invalid duration "s"'),
    (".", 'time: invalid duration "."'),
    ("-.", 'time: invalid duration "-."'),
    (".s", 'time: invalid duration ".s"'),
    ("+.s", 'time: invalid duration "+.s"'),
    ("1d", 'time: unknown unit "d" in duration "1d"'),
    ("10 s", 'time: unknown unit " s" in duration "10 s"'),
    ("1h1", 'time: missing unit in duration "1h1"'),
    ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
    ("9223372036854775.808us", 'time: invalid duration "9223372036854775.808us"'),
    ("9223372036854ms775us808ns", 'time: invalid duration "9223372036854ms775us808ns"'),
    ("-9223372036854775809ns", 'time: invalid duration "-9223372036854775809ns"'),
    ("3000000h", 'time: invalid duration "3000000h"'),
    ("1\u00e9s", 'time: unknown unit "\\xc3\\xa9s" in duration "1\\xc3\\xa9s"'),
    ('1"s', 'time: unknown unit "\\"s" in duration "1\\"s"'),
]


@pytest.mark.parametrize(("text", "expected"), GO_RESULTS)
def test_parses_like_go(text: str, expected: int) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(("text", "message"), GO_ERRORS)
def test_rejects_like_go(text: str, message: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert str(info.value) == message


def test_seconds() -> None:
    assert parse_seconds("1m30s") == 90.0
    assert parse_seconds("250ms") == 0.25


_UNITS = {"ns": 1, "us": MICROSECOND, "ms": MILLISECOND, "s": SECOND, "m": MINUTE, "h": HOUR}


@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=10_000), st.sampled_from(sorted(_UNITS))),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(["", "+", "-"]),
)
def test_sum_of_integer_terms(terms: list[tuple[int, str]], sign: str) -> None:
    text = sign + "".join(f"{value}{unit}" for value, unit in terms)
    total = sum(value * _UNITS[unit] for value, unit in terms)
    assert parse_duration(text) == (-total if sign == "-" else total)
