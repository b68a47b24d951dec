"""Request bodies: JSON decoding with Go's ``encoding/json`` error wording.

- ``media_type(header)`` is the bare media type of a ``Content-Type``/``Accept`` entry.
- ``loads(raw)`` parses JSON with orjson; on a syntax error it raises ``SyntaxProblem``
  whose message is what Go's scanner says about the same bytes (``invalid character 'n'
  looking for beginning of object key string``, ``unexpected end of JSON input``...).
- ``summarize(raw)`` is apiserver's 30-byte body summary used in decode errors.
"""

from __future__ import annotations

from typing import Any

import orjson


class SyntaxProblem(ValueError):
    """The body is not valid JSON (or YAML: ``goyaml``). The message is Go's."""


def media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def _quote_char(c: str) -> str:
    if c == "'":
        return "'\\''"
    if c == '"':
        return "'\"'"
    text = orjson.dumps(c).decode()[1:-1]
    return f"'{text}'"


class _Scanner:
    """Finds the first error Go's JSON scanner reports; only used on bad input."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _peek(self) -> str | None:
        return self.text[self.pos] if self.pos < len(self.text) else None

    def _next(self) -> str:
        c = self._peek()
        if c is None:
            raise SyntaxProblem("unexpected end of JSON input")
        self.pos += 1
        return c

    def _ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def _bad(self, c: str, context: str) -> SyntaxProblem:
        return SyntaxProblem(f"invalid character {_quote_char(c)} {context}")

    def run(self) -> None:
        self._ws()
        self._value()
        self._ws()
        c = self._peek()
        if c is not None:
            raise self._bad(c, "after top-level value")

    def _value(self) -> None:
        self._ws()
        c = self._next()
        if c == "{":
            self._object()
        elif c == "[":
            self._array()
        elif c == '"':
            self._string()
        elif c == "-" or c.isdigit():
            self._number(c)
        elif c in "tfn":
            word = {"t": "true", "f": "false", "n": "null"}[c]
            for expected in word[1:]:
                got = self._next()
                if got != expected:
                    raise self._bad(got, f"in literal {word} (expecting {_quote_char(expected)})")
        else:
            raise self._bad(c, "looking for beginning of value")

    def _object(self) -> None:
        self._ws()
        if self._peek() == "}":
            self.pos += 1
            return
        while True:
            self._ws()
            c = self._next()
            if c != '"':
                raise self._bad(c, "looking for beginning of object key string")
            self._string()
            self._ws()
            c = self._next()
            if c != ":":
                raise self._bad(c, "after object key")
            self._value()
            self._ws()
            c = self._next()
            if c == "}":
                return
            if c != ",":
                raise self._bad(c, "after object key:value pair")

    def _array(self) -> None:
        self._ws()
        if self._peek() == "]":
            self.pos += 1
            return
        while True:
            self._value()
            self._ws()
            c = self._next()
            if c == "]":
                return
            if c != ",":
                raise self._bad(c, "after array element")

    def _string(self) -> None:
        while True:
            c = self._next()
            if c == '"':
                return
            if c == "\\":
                e = self._next()
                if e == "u":
                    for _ in range(4):
                        h = self._next()
                        if h not in "0123456789abcdefABCDEF":
                            raise self._bad(h, "in \\u hexadecimal character escape")
                elif e not in '"\\/bfnrt':
                    raise self._bad(e, "in string escape code")
            elif ord(c) < 0x20:
                raise self._bad(c, "in string literal")

    def _number(self, first: str) -> None:
        c: str | None = first
        if c == "-":
            c = self._next()
            if not c.isdigit():
                raise self._bad(c, "in numeric literal")
        if c != "0":
            while (p := self._peek()) is not None and p.isdigit():
                self.pos += 1
        if self._peek() == ".":
            self.pos += 1
            c = self._next()
            if not c.isdigit():
                raise self._bad(c, "after decimal point in numeric literal")
            while (p := self._peek()) is not None and p.isdigit():
                self.pos += 1
        if self._peek() in ("e", "E"):
            self.pos += 1
            c = self._next()
            if c in "+-":
                c = self._next()
            if not c.isdigit():
                raise self._bad(c, "in exponent of numeric literal")
            while (p := self._peek()) is not None and p.isdigit():
                self.pos += 1


def go_error(raw: bytes) -> str:
    """Go's message for invalid JSON ``raw`` (or a generic one if Go would accept it)."""
    try:
        _Scanner(raw.decode("utf-8", errors="replace")).run()
    except SyntaxProblem as err:
        return str(err)
    return "invalid JSON"


def loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise SyntaxProblem(go_error(raw)) from None


def summarize(raw: bytes, limit: int = 30) -> str:
    """``summarizeData`` of the apiserver's decode errors."""
    if not raw:
        return "<empty>"
    if raw[:1] == b"{":
        text = raw.decode("utf-8", errors="replace")
        return text[:limit] + " ..." if len(raw) > limit else text
    return raw[:limit].hex() + " ..." if len(raw) > limit else raw.hex()
