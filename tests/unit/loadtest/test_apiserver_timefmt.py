from __future__ import annotations

from datetime import UTC, datetime

import pytest

from loadtest.apiserver import timefmt


def test_micro_time_needs_exactly_six_fractional_digits() -> None:
    moment = timefmt.parse("2030-01-01T00:00:00.123456Z", micro=True)
    assert timefmt.format_micro(moment) == "2030-01-01T00:00:00.123456Z"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2030-01-01T00:02:00Z", 'cannot parse "Z" as ".000000"'),
        ("2030-01-01T00:02:00.500Z", 'cannot parse ".500Z" as ".000000"'),
        ("yesterday", 'cannot parse "yesterday" as "2006"'),
        ("2030-01-01 00:00:00.000000Z", 'cannot parse " 00:00:00.000000Z" as "T"'),
    ],
)
def test_micro_time_errors_are_gos(value: str, message: str) -> None:
    with pytest.raises(timefmt.TimeParseError) as err:
        timefmt.parse(value, micro=True)
    assert str(err.value) == (
        f'parsing time "{value}" as "2006-01-02T15:04:05.000000Z07:00": {message}'
    )


def test_time_accepts_fractions_and_offsets_and_writes_seconds_utc() -> None:
    moment = timefmt.parse("2030-01-01T01:00:00.9+01:00", micro=False)
    assert moment == datetime(2030, 1, 1, 0, 0, 0, 900000, tzinfo=UTC)
    assert timefmt.format_time(moment) == "2030-01-01T00:00:00Z"


def test_range_and_trailing_text_errors() -> None:
    with pytest.raises(timefmt.TimeParseError, match="month out of range"):
        timefmt.parse("2030-13-01T00:00:00Z", micro=False)
    with pytest.raises(timefmt.TimeParseError, match="day out of range"):
        timefmt.parse("2030-02-30T00:00:00Z", micro=False)
    with pytest.raises(timefmt.TimeParseError, match='extra text: "x"'):
        timefmt.parse("2030-01-01T00:00:00Zx", micro=False)


def test_now_has_second_precision() -> None:
    assert timefmt.now().endswith("Z") and len(timefmt.now()) == 20
