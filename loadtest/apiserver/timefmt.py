"""Timestamps as apimachinery reads and writes them.

- ``metav1.Time`` is written ``2006-01-02T15:04:05Z`` (UTC, whole seconds) and read with Go's
  RFC 3339 layout, fractional seconds allowed and dropped.
- ``metav1.MicroTime`` is written ``2006-01-02T15:04:05.000000Z`` and read with the layout
  ``2006-01-02T15:04:05.000000Z07:00``: exactly six fractional digits, else a parse error.
- Parse errors carry Go's ``time.Parse`` wording (``parsing time "x" as "layout": cannot parse
  "y" as "elem"``), which the API server puts verbatim in its 400 responses.
"""

from __future__ import annotations

import calendar
import time
from datetime import UTC, datetime, timedelta, timezone

import orjson

RFC3339 = "2006-01-02T15:04:05Z07:00"
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"


class TimeParseError(ValueError):
    """A timestamp Go's ``time.Parse`` would reject; the message is Go's."""


def _quote(text: str) -> str:
    return orjson.dumps(text).decode()


def _digits(value: str, n: int) -> int | None:
    part = value[:n]
    return int(part) if len(part) == n and part.isascii() and part.isdigit() else None


def _num(value: str, fixed: bool) -> tuple[int, str] | None:
    """Go's ``getnum``: one or two digits (exactly two when ``fixed``)."""
    if not value or not value[0].isdigit() or not value[0].isascii():
        return None
    if len(value) < 2 or not value[1].isdigit() or not value[1].isascii():
        if fixed:
            return None
        return int(value[0]), value[1:]
    return int(value[:2]), value[2:]


_FIELDS = (
    ("-", "01", True),
    ("-", "02", True),
    ("T", "15", False),
    (":", "04", True),
    (":", "05", True),
)
"""After the year: (separator, Go layout element, two digits required) of month, day, hour
(Go's ``15`` also takes one digit), minute and second."""


def parse(value: str, *, micro: bool) -> datetime:
    """Parse like Go's ``time.Parse`` with the RFC 3339 (micro) layout; UTC result."""
    layout = RFC3339_MICRO if micro else RFC3339
    original = value

    def fail(rest: str, elem: str) -> TimeParseError:
        return TimeParseError(
            f"parsing time {_quote(original)} as {_quote(layout)}: "
            f"cannot parse {_quote(rest)} as {_quote(elem)}"
        )

    def out_of_range(what: str) -> TimeParseError:
        return TimeParseError(f"parsing time {_quote(original)}: {what} out of range")

    year = _digits(value, 4)
    if year is None:
        raise fail(value, "2006")
    value = value[4:]
    fields: list[int] = []
    for prefix, elem, fixed in _FIELDS:
        if not value.startswith(prefix):
            raise fail(value, prefix)
        value = value[1:]
        got = _num(value, fixed)
        if got is None:
            raise fail(value, elem)
        number, value = got
        fields.append(number)
    month, day, hour, minute, second = fields
    micros = 0
    if micro:
        if len(value) < 7 or value[0] not in ".," or _digits(value[1:], 6) is None:
            raise fail(value, ".000000")
        micros = int(value[1:7])
        value = value[7:]
    elif len(value) >= 2 and value[0] in ".," and value[1].isdigit():
        n = 1
        while n < len(value) and value[n].isdigit():
            n += 1
        micros = int((value[1:n] + "000000")[:6])
        value = value[n:]
    if value.startswith("Z"):
        offset = 0
        value = value[1:]
    else:
        if len(value) < 6 or value[0] not in "+-" or value[3] != ":":
            raise fail(value, "Z07:00")
        hh, mm = _digits(value[1:3], 2), _digits(value[4:6], 2)
        if hh is None or mm is None:
            raise fail(value, "Z07:00")
        offset = (hh * 60 + mm) * (-1 if value[0] == "-" else 1)
        value = value[6:]
    if value:
        raise TimeParseError(f"parsing time {_quote(original)}: extra text: {_quote(value)}")
    if not 1 <= month <= 12:
        raise out_of_range("month")
    if hour >= 24:
        raise out_of_range("hour")
    if minute >= 60:
        raise out_of_range("minute")
    if second >= 60:
        raise out_of_range("second")
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        raise out_of_range("day")
    local = datetime(
        year, month, day, hour, minute, second, micros, timezone(timedelta(minutes=offset))
    )
    return local.astimezone(UTC)


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_cached_second = -1
_cached_text = ""


def now() -> str:
    """The current time as ``metav1.Time`` text (cached per second: it is on every write)."""
    global _cached_second, _cached_text
    second = int(time.time())
    if second != _cached_second:
        _cached_second = second
        _cached_text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
    return _cached_text
