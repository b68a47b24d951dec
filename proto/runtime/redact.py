"""Keeping credentials out of logs, events, metrics and error messages.

- ``safe_url(url)``: the URL without its ``user:password@`` and without its query string and
  fragment (a token is often passed as ``?token=...``). Hook metric labels and every hook error
  message name the hook by this form.
- ``masked_url(text)``: for a message about a URL that may not parse (a refused webhook
  ``url``): the text with everything up to the last ``@`` before the query (where userinfo
  may be), every query value and the fragment replaced, the scheme, host and path kept.
- ``redact_headers(headers)``: a copy of a header mapping whose credential headers
  (``Authorization``, ``Proxy-Authorization``, ``Cookie``, ``Set-Cookie`` and any name holding
  ``token``, ``secret``, ``password`` or ``api-key``, case-insensitively) read ``[REDACTED]``.
- ``scrub(text)``: ``text`` with credentials written inline replaced: header lines and dict
  entries of the names above (``'Authorization': 'Bearer ...'``, ``Cookie: a=b``), bare
  ``Bearer``/``Basic`` credentials and URL userinfo.
- ``redact(value)``: ``redact_headers`` for mappings and ``scrub`` for strings, recursively
  through mappings, lists and tuples. ``proto.runtime.logs`` runs it over every log record.

Redaction is best effort for free text; the rule that stays exact is structural: credential
material is never put into an exception message, an event or a metric label in the first place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "[REDACTED]"

_SENSITIVE_NAME = re.compile(
    r"authorization|cookie|token|secret|passw(or)?d|api[-_]?key|credential", re.IGNORECASE
)
_NAMES = r"(?:proxy-)?authorization|(?:set-)?cookie|[\w-]*(?:token|secret|password|api-key)"
# 'Authorization': 'Bearer x'  /  "cookie": "a=b"  /  Authorization: Bearer x (a header line)
_QUOTED_ENTRY = re.compile(rf"""(?i)(['"](?:{_NAMES})['"]\s*[:=]\s*)(['"])(.*?)(?<!\\)\2""")
_HEADER_LINE = re.compile(rf"(?im)^(\s*(?:{_NAMES})\s*:\s*)(\S.*?)\s*$")
_SCHEME_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s'\"]+@")


def is_sensitive(name: str) -> bool:
    """Whether a header or field name holds a credential."""
    return bool(_SENSITIVE_NAME.search(name))


def safe_url(url: str) -> str:
    """``url`` without userinfo, query string or fragment (unparsable: a fixed placeholder)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<unparsable URL>"
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


_URL_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/+")


def masked_url(text: str) -> str:
    """``text`` with possible userinfo, query values and fragment replaced (module docstring).

    Made for malformed input: with no parse to trust, anything before the last ``@`` of the
    part before ``?`` may be userinfo (``http:/user:pw@host`` is no URL with userinfo, but the
    password is there all the same), so all of it but a leading ``scheme:/`` goes.
    """
    rest, hash_mark, fragment = text.partition("#")
    rest, question_mark, query = rest.partition("?")
    at = rest.rfind("@")
    if at >= 0:
        prefix = _URL_PREFIX.match(rest)
        keep = prefix.end() if prefix is not None and prefix.end() <= at else 0
        rest = f"{rest[:keep]}{REDACTED}{rest[at:]}"
    if question_mark:
        rest += "?" + "&".join(_masked_parameter(p) for p in query.split("&"))
    if hash_mark:
        rest += "#" + (REDACTED if fragment else "")
    return rest


def _masked_parameter(parameter: str) -> str:
    name, equals, value = parameter.partition("=")
    if not equals:
        return REDACTED if parameter else parameter
    return f"{name}={REDACTED}" if value else parameter


def redact_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``headers`` with the values of credential headers replaced."""
    return {
        name: REDACTED if isinstance(name, str) and is_sensitive(name) else redact(value)
        for name, value in headers.items()
    }


def scrub(text: str) -> str:
    """``text`` with inline credentials replaced (see the module docstring)."""
    text = _QUOTED_ENTRY.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}{m[2]}", text)
    text = _HEADER_LINE.sub(lambda m: f"{m[1]}{REDACTED}", text)
    text = _SCHEME_CREDENTIAL.sub(lambda m: f"{m[1]} {REDACTED}", text)
    return _USERINFO.sub(lambda m: f"{m[1]}{REDACTED}@", text)


def redact(value: Any) -> Any:
    """``value`` with credentials replaced, through mappings, lists and tuples."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return redact_headers(value)
    if isinstance(value, list | tuple):
        return type(value)(redact(item) for item in value)
    return value
