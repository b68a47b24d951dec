from __future__ import annotations

import pytest

from loadtest.apiserver import decode


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "invalid character 'n' looking for beginning of object key string"),
        (b"{bad", "invalid character 'b' looking for beginning of object key string"),
        (b"", "unexpected end of JSON input"),
        (b'{"a":1', "unexpected end of JSON input"),
        (b'{"a" 1}', "invalid character '1' after object key"),
        (b'{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
        (b"[1 2]", "invalid character '2' after array element"),
        (b"tru", "unexpected end of JSON input"),
        (b"trux", "invalid character 'x' in literal true (expecting 'e')"),
        (b"-x", "invalid character 'x' in numeric literal"),
        (b"1.x", "invalid character 'x' after decimal point in numeric literal"),
        (b'"\\q"', "invalid character 'q' in string escape code"),
        (b"{} {}", "invalid character '{' after top-level value"),
        (b"?", "invalid character '?' looking for beginning of value"),
    ],
)
def test_syntax_errors_are_worded_like_go(raw: bytes, message: str) -> None:
    with pytest.raises(decode.SyntaxProblem) as err:
        decode.loads(raw)
    assert str(err.value) == message


def test_summary_of_a_body() -> None:
    assert decode.summarize(b"") == "<empty>"
    assert decode.summarize(b"{not json") == "{not json"
    assert decode.summarize(b"{" + b"x" * 40) == "{" + "x" * 29 + " ..."
    assert decode.summarize(b"\x01\x02") == "0102"


def test_media_type() -> None:
    assert decode.media_type("Application/JSON; charset=utf-8") == "application/json"
    assert decode.media_type(None) == ""
