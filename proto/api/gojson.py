"""Go-compatible JSON: the bytes Go's ``encoding/json`` writes, the values apimachinery reads.

Metacontroller stores the last-applied configuration of every child as ``json.Marshal`` output
and hashes ``json.Marshal`` output into ControllerRevision names. Reading those values back, or
writing new ones, must reproduce Go exactly: one differing byte makes every existing child look
changed, which under a Recreate strategy deletes them all.

Contract:

- ``dumps(value) -> bytes`` is byte-identical to Go's ``json.Marshal`` of the same value as
  apimachinery decodes it (``map[string]interface{}``, ``[]interface{}``, string, int64,
  float64, bool, nil): compact; object keys sorted by their UTF-8 bytes (code point order);
  ``<`` ``>`` ``&`` written ``\\u003c`` ``\\u003e`` ``\\u0026``; U+2028/U+2029 written escaped;
  ``\\b \\f \\n \\r \\t`` short, other C0 controls ``\\u00XX`` (lowercase hex), everything
  else raw UTF-8; integers in decimal; floats via ``format_float``.
- ``loads(data) -> value`` decodes like apimachinery (``sigs.k8s.io/json``, PreserveInts):
  integer literals in int64 range become ``int``, every other number ``float`` (an integer
  literal outside int64 silently becomes a float; one outside float64 range is an error);
  lone UTF-16 surrogate escapes and invalid UTF-8 bytes become U+FFFD (one per bad byte, as
  Go does); the last of duplicate keys wins; anything Go rejects raises ``ValueError``.
- ``format_float(x)`` is Go's JSON float text; ``sprint(value)`` is Go's ``fmt`` ``%v`` text of
  a decoded value (Metacontroller keys list-map items by it).

How and why:

- The fast paths are orjson, whose output differs from Go's only in HTML escapes, U+2028/9
  and the text of some floats (integral ones keep ``.0``; orjson uses an exponent for
  1e-6 <= |x| < 1e-5 and 1e16 <= |x| < 1e21 where Go writes plain decimals). Floats
  elsewhere get the same shortest digits from both. Each difference is detected with a cheap
  scan and rewritten; anything unusual takes an exact slow path, so the fast path never
  changes the result, only the cost.
- orjson's decoder differs from Go's only by rejecting what Go repairs (lone surrogates,
  invalid UTF-8), by a nesting limit of 1024, and by returning ``int`` for literals in
  [2**63, 2**64); the first two fall back to the standard library decoder with Go's number and
  string rules, the last is detected by re-encoding with orjson's 53-bit integer check.
- Domain limits: values are what JSON decoding produces (dict with str keys, list, str, int,
  float, bool, None). NaN and infinities are not JSON: orjson writes them as ``null`` where Go
  fails. Nesting deeper than Python's recursion limit (about 1000 levels; Go allows 10000)
  raises ``ValueError`` when decoding.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from typing import Any

import orjson

__all__ = ["dumps", "format_float", "loads", "sprint"]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

# --- encoding ------------------------------------------------------------------------------

# orjson float tokens whose text differs from Go's: integral values ("3.0", "-0.0") and the
# exponent forms of 1e-6 <= |x| < 1e-5 ("5e-6") and 1e16 <= |x| < 1e21 ("1e+16" .. "1e+20").
# In compact output a number is always followed by ',' '}' or ']' unless it is the whole
# document. Matches inside strings are possible and only cost the exact rewrite below.
_INTEGRAL_FLOAT = re.compile(rb"\.0[,}\]]")
_EXP_MINUS_6 = re.compile(rb"e-6[,}\]]")
_EXP_PLUS = re.compile(rb"e\+(?:1[6-9]|20)[,}\]]")
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|-?[0-9][0-9.eE+-]*')
_NUMBER_START = frozenset(b"-0123456789")


def dumps(value: object) -> bytes:
    """Go's ``json.Marshal`` of a JSON-decoded value, byte for byte.

    Raises ``TypeError`` for values JSON decoding cannot produce (non-str keys, other types,
    str with lone surrogates, integers beyond 64 bits).
    """
    out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    if out[0] in _NUMBER_START:
        # A bare number: no delimiter follows it, so format it directly.
        return format_float(value).encode() if isinstance(value, float) else out
    if (
        _INTEGRAL_FLOAT.search(out) is not None
        or _EXP_MINUS_6.search(out) is not None
        or (b"+" in out and _EXP_PLUS.search(out) is not None)
    ):
        out = _TOKEN.sub(_go_number, out)
    if b"<" in out:
        out = out.replace(b"<", b"\\u003c")
    if b">" in out:
        out = out.replace(b">", b"\\u003e")
    if b"&" in out:
        out = out.replace(b"&", b"\\u0026")
    if b"\xe2" in out:
        out = out.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    return out


def _go_number(match: re.Match[bytes]) -> bytes:
    token = match.group()
    if token[0] == 0x22 or (b"." not in token and b"e" not in token):
        return token  # a string, or an integer
    return format_float(float(token)).encode()


def _shortest_digits(x: float) -> tuple[str, int]:
    """The shortest digits that round-trip ``abs(x)`` (x finite, non-zero) and the position of
    the decimal point: ``abs(x) == float("0." + digits + "e" + str(point))``."""
    mantissa, _, exponent = repr(abs(x)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    return stripped.rstrip("0"), point - (len(digits) - len(stripped))


def _plain(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def _exponent(digits: str, point: int, *, min_width: int) -> str:
    exp = point - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):0{min_width}d}"


def format_float(x: float) -> str:
    """Go's ``encoding/json`` text of a float64: shortest round-trip digits, plain decimal for
    1e-6 <= |x| < 1e21, else an exponent with a sign and no zero padding (``1e-7``, ``1e+21``).
    """
    if not math.isfinite(x):
        raise ValueError(f"json: unsupported value: {x!r}")
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    digits, point = _shortest_digits(x)
    magnitude = abs(x)
    sign = "-" if x < 0 else ""
    if magnitude < 1e-6 or magnitude >= 1e21:
        return sign + _exponent(digits, point, min_width=1)
    return sign + _plain(digits, point)


def _format_float_g(x: float) -> str:
    """Go's ``strconv.FormatFloat(x, 'g', -1, 64)``, which is what ``%v`` prints."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    digits, point = _shortest_digits(x)
    sign = "-" if x < 0 else ""
    if not -4 <= point - 1 < 6:
        return sign + _exponent(digits, point, min_width=2)
    return sign + _plain(digits, point)


def sprint(value: object) -> str:
    """Go's ``fmt.Sprintf("%v", v)`` for a JSON-decoded value.

    ``map[k:v ...]`` with keys sorted, ``[a b]`` for lists, ``<nil>`` for null, strings raw,
    floats in ``%g`` form (``1e+06``), so the integer 80, the float 80.0 and the string "80"
    all print ``80``.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _format_float_g(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{sprint(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(sprint(v) for v in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


# --- decoding ------------------------------------------------------------------------------


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode JSON the way apimachinery does; raises ``ValueError`` where Go fails."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _loads_exact(data)
    try:
        # Cheap test for integers orjson keeps as int but Go turns into float64 (>= 2**63):
        # any integer beyond 53 bits makes this raise, then the walk below settles it.
        orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except orjson.JSONEncodeError:
        return _floats_beyond_int64(value)
    return value


def _floats_beyond_int64(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _floats_beyond_int64(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats_beyond_int64(v) for v in value]
    if type(value) is int and not _INT64_MIN <= value <= _INT64_MAX:
        return float(value)
    return value


def _replace_byte(error: UnicodeError) -> tuple[str, int]:
    """Decode error handler: one U+FFFD per invalid byte, then resume (Go's unquote)."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return "\ufffd", error.start + 1


_GO_REPLACE = "metashard-gojson-replace"
codecs.register_error(_GO_REPLACE, _replace_byte)

# An escaped backslash, a valid escaped surrogate pair, or a lone escaped surrogate. Scanning
# left to right keeps "\\\\ud800" (an escaped backslash, then text) apart from "\\ud800".
_SURROGATE_ESCAPE = re.compile(
    r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    r"|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
_RAW_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(match: re.Match[str]) -> str:
    escape = match.group()
    return escape if len(escape) != 6 else "\\ufffd"


def _parse_int(literal: str) -> int | float:
    number = int(literal)
    if _INT64_MIN <= number <= _INT64_MAX:
        return number
    return _parse_float(literal)


def _parse_float(literal: str) -> float:
    number = float(literal)
    if math.isinf(number):
        raise ValueError(f"json: cannot unmarshal number {literal} into Go value of type float64")
    return number


def _reject_constant(literal: str) -> None:
    raise ValueError(f"invalid character {literal[0]!r} looking for beginning of value")


def _loads_exact(data: bytes | bytearray | memoryview | str) -> Any:
    """The standard library decoder with Go's rules for numbers and broken text."""
    if isinstance(data, str):
        text = _RAW_SURROGATE.sub("\ufffd", data)
    else:
        text = bytes(data).decode("utf-8", _GO_REPLACE)
    if "\\u" in text:
        text = _SURROGATE_ESCAPE.sub(_lone_surrogate, text)
    try:
        return json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_reject_constant,
        )
    except RecursionError:
        raise ValueError("json: nesting too deep") from None
