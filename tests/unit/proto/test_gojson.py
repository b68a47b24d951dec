"""proto.api.gojson against Go's bytes (../shared/vectors/gojson.json) and properties."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proto.api import gojson
from tests.conftest import SHARED
from tests.jsonvalues import FLOATS, json_values, strict

VECTORS = "vectors/gojson.json"


def _case_names() -> list[str]:
    path = SHARED / VECTORS
    if not path.is_file():
        return []  # test_vectors_are_present reports the missing file
    return [case["name"] for case in json.loads(path.read_text())["cases"]]


@pytest.fixture(scope="module")
def cases(shared_dir: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((shared_dir / VECTORS).read_text())
    return {case["name"]: case for case in data["cases"]}


def test_vectors_are_present(cases: dict[str, dict[str, Any]]) -> None:
    assert len(cases) >= 90


def _pointer(value: Any, pointer: str) -> Any:
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        value = value[int(token)] if isinstance(value, list) else value[token]
    return value


@pytest.mark.parametrize("name", _case_names())
def test_go_vector(cases: dict[str, dict[str, Any]], name: str) -> None:
    case = cases[name]
    text: str = case["input"]
    if case["go"] is None:
        with pytest.raises(ValueError):
            gojson.loads(text.encode())
        with pytest.raises(ValueError):
            gojson.loads(text)
        return
    go = case["go"].encode()
    from_bytes = gojson.loads(text.encode())
    assert strict(gojson.loads(text)) == strict(from_bytes)
    assert gojson.dumps(from_bytes) == go
    for pointer, go_type in case.get("numberTypes", {}).items():
        number = _pointer(from_bytes, pointer)
        assert type(number) is {"int64": int, "float64": float}[go_type], pointer
    fixed_point = case.get("checks", {}).get("reencodeIsFixedPoint")
    if fixed_point is not None:
        assert (gojson.dumps(gojson.loads(go)) == go) is fixed_point


# --- encoding --------------------------------------------------------------------------------


def _go_float(x: float) -> str:
    """Reference text of a float64 in Go's encoding/json, built independently with Decimal."""
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    exact = Decimal(repr(x)).normalize()
    return f"{exact:e}" if abs(x) < 1e-6 or abs(x) >= 1e21 else f"{exact:f}"


_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _go_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif ch < " " or ch in "<>&\u2028\u2029":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _go_marshal(value: Any) -> str:
    """Reference json.Marshal, written out the slow and obvious way."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode())
        return "{" + ",".join(f"{_go_string(k)}:{_go_marshal(v)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_go_marshal(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    return _go_string(value)


@settings(deadline=None)
@given(json_values())
@example({"\U0001f600": 1, "\uffff": 2, "\ue000": 3, "z": 4})  # code point order, not UTF-16
@example({"a": [1.0, -0.0, 1e16, 5e-6, 1e-7, 1e21, 0.25]})
@example("<\u2028&\x7f\x1f>")
def test_dumps_matches_a_reference_go_marshal(value: Any) -> None:
    assert gojson.dumps(value) == _go_marshal(value).encode()


def _same_reading(read: Any, value: Any) -> bool:
    """read is value read back from Go JSON: integral floats may come back as int."""
    if isinstance(value, dict):
        return (
            isinstance(read, dict)
            and read.keys() == value.keys()
            and all(_same_reading(read[k], v) for k, v in value.items())
        )
    if isinstance(value, list):
        return (
            isinstance(read, list)
            and len(read) == len(value)
            and all(_same_reading(r, v) for r, v in zip(read, value, strict=True))
        )
    if isinstance(value, float):
        return type(read) in (int, float) and float(read) == value
    return strict(read) == strict(value)


_NEGATIVE_ZERO = re.compile(rb"-0(?![.0-9])")


@settings(deadline=None)
@given(json_values())
def test_dumps_round_trips_through_orjson_with_go_key_order(value: Any) -> None:
    out = gojson.dumps(value)
    assert _same_reading(orjson.loads(out), value)
    if isinstance(value, dict):
        assert list(orjson.loads(out)) == sorted(value, key=lambda k: k.encode())
    if not _NEGATIVE_ZERO.search(out):  # Go writes -0.0 as "-0", which reads back as int 0
        assert gojson.dumps(gojson.loads(out)) == out


@settings(deadline=None)
@given(FLOATS)
@example(9.999999999999999e20)
@example(1e-6)
@example(9.99e-7)
def test_float_text_is_go_shortest_form(x: float) -> None:
    text = gojson.format_float(x)
    assert text == _go_float(x)
    assert float(text) == x
    assert gojson.dumps([x]) == f"[{text}]".encode()
    assert gojson.dumps(x) == text.encode()
    assert gojson.dumps({"k": x, "s": "1.0,"}) == f'{{"k":{text},"s":"1.0,"}}'.encode()


def test_strings_that_look_like_floats_are_left_alone() -> None:
    value = {"a": "1.0,", "b": ["3.0]", "e-6}", "1e+16,"]}
    assert gojson.dumps(value) == orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def test_dumps_rejects_values_json_cannot_decode_to() -> None:
    for value in ({1: "a"}, {"s": "\ud800"}, {"n": 2**64}, {"x": object()}):
        with pytest.raises(TypeError):
            gojson.dumps(value)


# --- decoding --------------------------------------------------------------------------------


@settings(deadline=None)
@given(st.integers(min_value=-(2**66), max_value=2**66))
@example(2**63 - 1)
@example(2**63)
@example(2**64 - 1)
@example(-(2**63))
@example(-(2**63) - 1)
def test_integers_beyond_int64_become_floats(n: int) -> None:
    for text in (str(n), f'{{"n":[{n}]}}'):
        decoded = gojson.loads(text)
        value = decoded if isinstance(decoded, int | float) else decoded["n"][0]
        if -(2**63) <= n < 2**63:
            assert type(value) is int and value == n
        else:
            assert type(value) is float and value == float(n)


@settings(deadline=None)
@given(json_values())
def test_fast_and_exact_decoders_agree(value: Any) -> None:
    # orjson rejects invalid UTF-8 where Go repairs it, so the trailing broken string sends
    # the whole document down the exact decoder; its first element must decode the same.
    text = json.dumps(value, indent=1)
    fast = gojson.loads(text)
    exact = gojson.loads(b"[" + text.encode() + b',"\xff"]')
    assert strict(exact) == strict([fast, "\ufffd"])


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'"a\xe6\x97b"', "a\ufffd\ufffdb"),  # one U+FFFD per invalid byte, as Go's unquote
        (b'"\xed\xa0\x80"', "\ufffd\ufffd\ufffd"),  # a UTF-8-encoded surrogate is 3 bad bytes
        ('"\\\\ud800"', "\\ud800"),  # an escaped backslash, then plain text
        ('{"a":"\\ud83d\\ude00","b":"\\ud83d"}', {"a": "\U0001f600", "b": "\ufffd"}),
        ('"\ud800x"', "\ufffdx"),  # a str holding a raw lone surrogate
    ],
)
def test_broken_text_is_repaired_as_go_does(data: bytes | str, expected: Any) -> None:
    assert gojson.loads(data) == expected


@pytest.mark.parametrize(
    "data",
    [b"", b"NaN", b"[Infinity]", b"-Infinity", b"[1,]", b'{"a":1,}', b"\xef\xbb\xbf{}", b"1 2",
     b"[1e400]", b"{'a':1}", b"[" * 3000],
)  # fmt: skip
def test_what_go_rejects_raises_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        gojson.loads(data)


# --- %v ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("80", "80"),
        (80, "80"),
        (80.0, "80"),
        (1e6, "1e+06"),
        (123456.0, "123456"),
        (1e-5, "1e-05"),
        (0.0001, "0.0001"),
        (1.5e-7, "1.5e-07"),
        (-0.0, "-0"),
        (1e21, "1e+21"),
        (True, "true"),
        (None, "<nil>"),
        ({"b": 1, "a": [1, "x y", None, {}]}, "map[a:[1 x y <nil> map[]] b:1]"),
    ],
)
def test_sprint_is_go_percent_v(value: Any, text: str) -> None:
    assert gojson.sprint(value) == text
