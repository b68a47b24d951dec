"""Go duration strings (``"10s"``, ``"1m30s"``, ``"1.5h"``), parsed as ``time.ParseDuration``.

Metacontroller's ``webhook.timeout`` is a ``metav1.Duration``, decoded by Go's parser, so the
same strings must be accepted and rejected here, with the same results:

- Grammar ``[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+``, or exactly ``"0"`` (with an optional sign).
  Units: ``ns``, ``us``, ``µs`` (U+00B5), ``μs`` (U+03BC), ``ms``, ``s``, ``m``, ``h``.
- The value is an integer number of nanoseconds in the int64 range; fractions are converted the
  way Go converts them (a float64 product, truncated), so ``"0.3333333333333333333h"`` is
  exactly 20 minutes and over-long fractions lose the same digits Go loses.
- Errors raise ``DurationError`` with Go's message (``time: invalid duration "abc"``,
  ``time: missing unit in duration "3"``, ``time: unknown unit "d" in duration "1d"``).
"""

from __future__ import annotations

from proto.api.errors import DurationError

NANOSECOND = 1
MICROSECOND = 1000 * NANOSECOND
MILLISECOND = 1000 * MICROSECOND
SECOND = 1000 * MILLISECOND
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

_UNITS = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "\u00b5s": MICROSECOND,
    "\u03bcs": MICROSECOND,
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}
_LIMIT = 1 << 63
_DIGITS = frozenset("0123456789")


def _quote(text: str) -> str:
    """Go's ``time.quote``: non-ASCII and control characters become ``\\xNN`` per byte."""
    out = ['"']
    for char in text:
        if ord(char) >= 0x80 or char < " ":
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        else:
            out.append("\\" + char if char in '"\\' else char)
    out.append('"')
    return "".join(out)


def parse_duration(text: str) -> int:
    """The duration in nanoseconds. Raises ``DurationError`` exactly when Go would."""
    invalid = DurationError(f"time: invalid duration {_quote(text)}")
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = 0
    while rest:
        if rest[0] != "." and rest[0] not in _DIGITS:
            raise invalid
        # [0-9]*
        i = 0
        whole = 0
        while i < len(rest) and rest[i] in _DIGITS:
            if whole > (_LIMIT - 1) // 10:
                raise invalid
            whole = whole * 10 + int(rest[i])
            if whole > _LIMIT:
                raise invalid
            i += 1
        before_point = i > 0
        rest = rest[i:]
        # (\.[0-9]*)?
        fraction, scale, after_point = 0, 1.0, False
        if rest[:1] == ".":
            rest = rest[1:]
            i = 0
            overflow = False
            while i < len(rest) and rest[i] in _DIGITS:
                if not overflow:
                    if fraction > (_LIMIT - 1) // 10:
                        overflow = True
                    else:
                        candidate = fraction * 10 + int(rest[i])
                        if candidate > _LIMIT:
                            overflow = True
                        else:
                            fraction = candidate
                            scale *= 10
                i += 1
            after_point = i > 0
            rest = rest[i:]
        if not before_point and not after_point:
            raise invalid
        # the unit: everything up to the next digit or point
        i = 0
        while i < len(rest) and rest[i] != "." and rest[i] not in _DIGITS:
            i += 1
        if i == 0:
            raise DurationError(f"time: missing unit in duration {_quote(text)}")
        unit_text, rest = rest[:i], rest[i:]
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise DurationError(
                f"time: unknown unit {_quote(unit_text)} in duration {_quote(text)}"
            )
        if whole > _LIMIT // unit:
            raise invalid
        value = whole * unit
        if fraction > 0:
            value += int(float(fraction) * (float(unit) / scale))
            if value > _LIMIT:
                raise invalid
        total += value
        if total > _LIMIT:
            raise invalid
    if negative:
        return -total
    if total > _LIMIT - 1:
        raise invalid
    return total


def parse_seconds(text: str) -> float:
    """The duration in seconds (a float), for timeouts and delays."""
    return parse_duration(text) / SECOND
