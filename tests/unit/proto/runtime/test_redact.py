"""Credential redaction: URLs for labels and messages, header maps, free text."""

from __future__ import annotations

import pytest

from proto.runtime.redact import REDACTED, masked_url, redact, redact_headers, safe_url, scrub


@pytest.mark.parametrize(
    ("url", "safe"),
    [
        ("http://hooks.example/sync", "http://hooks.example/sync"),
        ("https://u:p%40ss@hooks.example:8443/sync?token=abc#x", "https://hooks.example:8443/sync"),
        ("http://user@10.0.0.1/sync", "http://10.0.0.1/sync"),
        ("http://[::1]:8080/a/b?q=1", "http://[::1]:8080/a/b"),
        ("http://svc.ns:80/sync", "http://svc.ns:80/sync"),
        ("http://host:notaport/x", "<unparsable URL>"),
    ],
)
def test_safe_url(url: str, safe: str) -> None:
    assert safe_url(url) == safe


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("http://hooks.example/sync", "http://hooks.example/sync"),
        ("hook/sync", "hook/sync"),
        ("http:/alice:pw@hook.ns/sync", "http:/[REDACTED]@hook.ns/sync"),
        ("htps://alice:pw@hook.ns/sync", "htps://[REDACTED]@hook.ns/sync"),
        ("alice:pw@hook.ns/sync", "[REDACTED]@hook.ns/sync"),
        ("http://a:p/w@host/x@y?z=@", "http://[REDACTED]@y?z=[REDACTED]"),
        (
            "ftp://hook.ns/s?token=pw&flag&empty=#pw",
            "ftp://hook.ns/s?token=[REDACTED]&[REDACTED]&empty=#[REDACTED]",
        ),
    ],
)
def test_masked_url_hides_userinfo_query_values_and_fragment(url: str, masked: str) -> None:
    assert masked_url(url) == masked


def test_redact_headers_keeps_ordinary_headers() -> None:
    headers = {
        "Authorization": "Bearer t",
        "proxy-authorization": "Basic x",
        "Cookie": "a=b",
        "X-Auth-Token": "t",
        "Content-Type": "application/json",
    }
    assert redact_headers(headers) == {
        "Authorization": REDACTED,
        "proxy-authorization": REDACTED,
        "Cookie": REDACTED,
        "X-Auth-Token": REDACTED,
        "Content-Type": "application/json",
    }


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("{'Authorization': 'Bearer abc.def', 'Accept': '*/*'}", "abc.def"),
        ('{"cookie": "sid=xyz123"}', "sid=xyz123"),
        ("GET / HTTP/1.1\r\nAuthorization: Basic dXNlcjpwYXNz\r\nHost: h\r\n", "dXNlcjpwYXNz"),
        ("calling with bearer eyJhbGciOi in the header", "eyJhbGciOi"),
        ("cannot reach https://admin:hunter2@hooks.example/sync", "hunter2"),
    ],
)
def test_scrub_removes_inline_credentials(text: str, secret: str) -> None:
    cleaned = scrub(text)
    assert secret not in cleaned
    assert REDACTED in cleaned


def test_redact_walks_nested_values() -> None:
    value = {"request": {"headers": [{"Authorization": "Bearer t0ken"}]}, "n": 3}
    assert "t0ken" not in repr(redact(value))
    assert redact(value)["n"] == 3
    assert redact(("plain", 1)) == ("plain", 1)
