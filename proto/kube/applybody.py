"""Apply bodies: JSON that the API server's YAML parser reads back as the same value.

kube-apiserver reads a server-side apply body (``application/apply-patch+yaml``) with
``sigs.k8s.io/yaml`` over go-yaml v2, a YAML 1.1 parser, even when the body is JSON. JSON is
almost YAML, but not quite, for characters a JSON encoder may leave raw inside a string:

- U+2028, U+2029 and U+0085 (NEL) are line breaks to YAML: inside a quoted string, line
  folding drops the blanks around them (``"a \\u2028 b"`` written raw reads ``a\\u2028b``; a
  raw NEL reads a space), a break followed by ``---`` or ``...`` ends the document, and one
  in a key is an error.
- DEL, the C1 controls (U+0080 to U+009F) and the noncharacters U+FFFE and U+FFFF are not
  printable to YAML: one of them anywhere in the body makes the request fail (400
  ``yaml: control characters are not allowed``).

Escaped as ``\\uXXXX`` they are ordinary characters to YAML as to JSON.

Contract: ``encode(body)`` is ``orjson.dumps(body)`` with those characters written as
``\\u2028``-style escapes (lowercase hex), and ``<``, ``>``, ``&`` as ``\\u003c``, ``\\u003e``,
``\\u0026``, as Go's ``encoding/json`` writes them: its strings are byte for byte Go's, except
that Go leaves NEL, DEL, the other C1 controls and U+FFFE/U+FFFF raw (so a Go client, such as
Metacontroller, gets the folding or the 400 above for those). ``orjson.loads(encode(body)) ==
body``; key order and float text are orjson's (the server re-encodes both). Other characters
YAML treats specially are safe in JSON output already: orjson escapes the C0 controls, and
inside a double-quoted scalar ``: ``, ``#``, quotes, tabs and leading or trailing spaces mean
nothing to YAML.

Cost: on top of ``orjson.dumps``, four single-byte scans and ``isascii()`` for a body with
nothing to escape; three more single-byte scans (for the lead bytes 0xC2, 0xE2, 0xEF) when it
holds non-ASCII text; a regular-expression pass only when a lead byte is there.
``loadtest/bench/apply.py`` measures it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

__all__ = ["encode"]

# The UTF-8 encodings of the non-ASCII characters to escape, by lead byte. Every match is
# inside a JSON string: outside them, JSON text is ASCII.
_LINE_SEPARATORS = re.compile(rb"\xe2\x80[\xa8\xa9]")  # U+2028, U+2029
_C1_CONTROLS = re.compile(rb"\xc2[\x80-\x9f]")  # U+0080..U+009F, NEL included
_NONCHARACTERS = re.compile(rb"\xef\xbf[\xbe\xbf]")  # U+FFFE, U+FFFF


def _escaped(match: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(match.group().decode())


def encode(body: Mapping[str, Any] | Sequence[Any]) -> bytes:
    """``body`` as JSON that reads back unchanged as YAML (see the module docstring)."""
    out = orjson.dumps(body)
    if b"<" in out or b">" in out or b"&" in out or b"\x7f" in out:
        out = (
            out.replace(b"<", b"\\u003c")
            .replace(b">", b"\\u003e")
            .replace(b"&", b"\\u0026")
            .replace(b"\x7f", b"\\u007f")
        )
    if out.isascii():
        return out
    if b"\xe2" in out:
        out = _LINE_SEPARATORS.sub(_escaped, out)
    if b"\xc2" in out:
        out = _C1_CONTROLS.sub(_escaped, out)
    if b"\xef" in out:
        out = _NONCHARACTERS.sub(_escaped, out)
    return out
