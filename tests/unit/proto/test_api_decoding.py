"""Strict/loose decoding: which fields count as unknown or duplicate, and where; the fast
orjson path agrees with the exact decoder on every body."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proto.api.decoding import (
    FREE,
    OPAQUE,
    Decoded,
    Items,
    LooseWarnings,
    Struct,
    _decode_exact,
    _decode_fast,
    decode,
)
from proto.api.errors import HookResponseError

SHAPE = Struct(
    {
        "status": FREE,
        "children": Items(OPAQUE),
        "rules": Items(Struct({"name": FREE, "selector": Struct({"labels": FREE})})),
    }
)


def issues(body: bytes) -> tuple[str, ...]:
    return decode(body, SHAPE).issues


def test_clean_body_has_no_issues() -> None:
    decoded = decode(b'{"status": {"a": {"b": [1, {"c": 2}]}}, "children": [{"x": 1}]}', SHAPE)
    assert decoded.issues == ()
    assert decoded.value == {"status": {"a": {"b": [1, {"c": 2}]}}, "children": [{"x": 1}]}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"Status": {}}', ('unknown field "Status"',)),
        (
            b'{"status": {}, "extra": 1, "more": {"a": 1}}',
            ('unknown field "extra"', 'unknown field "more"'),
        ),
        (b'{"rules": [{"name": "a", "nmae": "b"}]}', ('unknown field "rules[0].nmae"',)),
        (
            b'{"rules": [{}, {"selector": {"lables": {}}}]}',
            ('unknown field "rules[1].selector.lables"',),
        ),
        (b'{"status": {}, "status": {}}', ('duplicate field "status"',)),
        (
            b'{"status": {"a": 1, "a": 2, "b": {"c": 1, "c": 1}}}',
            ('duplicate field "status.a"', 'duplicate field "status.b.c"'),
        ),
        (b'{"status": {"l": [{"x": 1, "x": 1}]}}', ('duplicate field "status.l[0].x"',)),
        (b'{"rules": [{"name": "a", "name": "b"}]}', ('duplicate field "rules[0].name"',)),
        # free-form parts accept any field; opaque children are not checked at all
        (b'{"status": {"Anything": {"Goes": 1}}}', ()),
        (b'{"children": [{"a": 1, "a": 2, "kind": "X"}]}', ()),
    ],
)
def test_issues(body: bytes, expected: tuple[str, ...]) -> None:
    assert issues(body) == expected


def test_duplicate_keeps_last_value() -> None:
    assert decode(b'{"status": {"a": 1, "a": 2}}', SHAPE).value == {"status": {"a": 2}}


def test_dropped_duplicate_object_does_not_confuse_later_objects() -> None:
    # the first "a" object is discarded by the duplicate; later objects must not be reported
    body = b'{"status": {"a": {"x": 1}, "a": {"y": 2}}, "children": [{}, {}, {}, {}, {}]}'
    assert issues(body) == ('duplicate field "status.a"',)


def test_numbers_like_go() -> None:
    value = decode(b'{"status": {"i": 3, "f": 3.0, "e": 1e3, "big": 99999999999999999999}}', SHAPE)
    status = value.value["status"]
    assert status["i"] == 3 and isinstance(status["i"], int)
    assert isinstance(status["f"], float) and isinstance(status["e"], float)
    assert isinstance(status["big"], float)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "response is not valid JSON"),
        (b"{", "response is not valid JSON"),
        (b'{"status": NaN}', "response is not valid JSON"),
        (b'{"status": 1e999}', "out of range"),
        (b'{"status": 1' + b"0" * 400 + b"}", "out of range"),  # an integer past float64 too
        (b"[]", "response must be a JSON object, not array"),
        (b"null", "response must be a JSON object, not null"),
        (b'"ok"', "response must be a JSON object, not string"),
        (b"\xef\xbb\xbf{}", "response is not valid JSON"),
        (b"[" * 100_000, "response is not valid JSON"),
    ],
)
def test_not_a_json_object(body: bytes, message: str) -> None:
    with pytest.raises(HookResponseError, match=message):
        decode(body, SHAPE)


# --- the orjson fast path gives exactly the standard library's answer ----------------------

_KEYS = ["status", "children", "rules", "name", "selector", "labels", "Status", "a", "a:b"]
_SPACE = st.sampled_from(["", " ", "\n  ", "\t"])
_TEXT = st.text(alphabet=st.sampled_from('ab:"\\\n\u00e9\U0001f600 '), max_size=6)


@st.composite
def _json_text(draw: st.DrawFn, depth: int = 0) -> str:
    """JSON text with repeated keys, escapes, odd spacing and numbers of every size."""
    kind = draw(st.sampled_from(["object", "array", "scalar"] if depth < 3 else ["scalar"]))
    if kind == "object":
        members = [
            draw(_SPACE)
            + json.dumps(draw(st.sampled_from(_KEYS)))
            + draw(_SPACE)
            + ":"
            + draw(_json_text(depth + 1))
            for _ in range(draw(st.integers(0, 4)))
        ]
        return "{" + ",".join(members) + draw(_SPACE) + "}"
    if kind == "array":
        items = [draw(_json_text(depth + 1)) for _ in range(draw(st.integers(0, 3)))]
        return "[" + ",".join(items) + "]"
    return draw(
        st.one_of(
            st.sampled_from(
                ["true", "false", "null", '"\\ud800"', '"\\u003a"', "1e999", "-0.0", "1E2"]
            ),
            st.integers(-(2**70), 2**70).map(str),
            st.sampled_from([2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1]).map(str),
            st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
            st.builds(json.dumps, _TEXT, ensure_ascii=st.booleans()),
        )
    )


def _outcome(decoder: Callable[[], Decoded]) -> tuple[str, str]:
    try:
        decoded = decoder()
    except HookResponseError as err:
        return "error", str(err)
    return repr(decoded.value), repr(decoded.issues)


@settings(max_examples=1500)
@given(top=_json_text(), space=_SPACE)
def test_decode_equals_the_exact_decoder(top: str, space: str) -> None:
    body = (space + top + space).encode("utf-8", "surrogatepass")
    assert _outcome(lambda: decode(body, SHAPE)) == _outcome(lambda: _decode_exact(body, SHAPE))


@pytest.mark.parametrize(
    ("body", "fast"),
    [
        (b'{"status": {"a": "x:y"}, "children": [{"kind": "X", "a": 1, "b": [2.5, null]}]}', True),
        (b'{\n  "status" : {"msg": "a\\nb \\u00e9 \\\\ c"}\n}\n', True),
        (b'{"status": {"a": 1, "a": 2}}', False),  # a repeated key
        (b'{"children": [{"a": 1, "a": 2}]}', False),  # ... even where it does not count
        (b'{"status": {"q": "say \\"hi\\": \\\\"}}', True),  # escaped quotes and backslashes
        (b'{"status": {"a": 1, "a": "\\u003a"}}', False),  # an escaped colon
        (b'{"status": {"big": 9007199254740993}}', False),  # beyond 53 bits
        (b'{"status": {"u64": 18446744073709551615}}', False),  # Go's float64, orjson's int
        (b'{"status": {"bad": "\\ud800"}}', False),  # a lone surrogate
        (b"[]", False),
    ],
)
def test_which_bodies_take_the_fast_path(body: bytes, fast: bool) -> None:
    assert (_decode_fast(body) is not None) is fast
    assert _outcome(lambda: decode(body, SHAPE)) == _outcome(lambda: _decode_exact(body, SHAPE))


def test_loose_warnings_are_fresh_once_and_bounded() -> None:
    warned = LooseWarnings(limit=3)
    assert warned.fresh(["a", "b", "a"]) == ["a", "b"]
    assert warned.fresh(["b", "c"]) == ["c"]
    assert warned.fresh(["d"]) == []  # the limit of distinct issues is reached
    assert warned.fresh(["a", "b", "c"]) == []
