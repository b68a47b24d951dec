"""Strict/loose decoding: which fields count as unknown or duplicate, and where."""

from __future__ import annotations

import pytest

from proto.api.decoding import FREE, OPAQUE, Items, Struct, decode
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
