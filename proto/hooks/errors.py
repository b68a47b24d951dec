"""Why a webhook call failed, typed by what the reconcile runner should do.

::

    HookError                  the hook gave no usable answer: the reconcile writes nothing
    ├── HookRetryAfter         HTTP 429: re-queue the key after ``delay`` seconds; this is not a
    │                          failure (no backoff step, no SyncError event)
    ├── HookStatusError        any other status but 200: a failure, re-queue with backoff; the
    │                          message carries the status and an excerpt of the body, with
    │                          the credentials sent masked
    ├── HookTransportError     no HTTP answer (timeout, refused, reset, DNS, TLS): a failure,
    │                          re-queue with backoff; ``code`` says which
    ├── HookResponseTooLarge   the body passed the size limit: a failure, re-queue with backoff
    └── HookConnectionError    the hook's TLS material or credentials are unusable (a missing
                               Secret key, a malformed certificate) or its URL cannot be sent:
                               the hook is not called; a failure, re-queue with backoff

``url`` and every message name the hook by its URL without userinfo or query
(``proto.runtime.redact.safe_url``), and no message carries a credential.

``code`` is the ``code`` label the call is counted under in
``metacontroller_<hook>_requests_total`` (``proto.hooks.metrics``): the HTTP status for an
answer (``"429"``, ``"503"``), else one of the failure codes below. They are documented in
``docs/metrics.md``; a dashboard tells answers from failures by the first character.

A 200 whose body cannot be used is a ``proto.api.errors.HookResponseError``, raised by the
caller's decoder, not by the HTTP layer; it is counted as ``INVALID_RESPONSE``.
"""

from __future__ import annotations

TIMEOUT = "timeout"
"""No whole answer within the hook's ``timeout`` (or no connection within the connect limit)."""
DNS = "dns"
"""The hook's host name did not resolve."""
CONNECT = "connect"
"""No connection: refused, unreachable, or any other failure to connect."""
TLS = "tls"
"""The TLS handshake failed: the server's certificate did not verify, or no common protocol."""
TRANSPORT = "transport"
"""The connection broke after it was made: closed or reset before the answer ended, or bytes
that are not HTTP."""
TOO_LARGE = "too-large"
"""The answer's body passed the size limit."""
CONFIG = "config"
"""Nothing was sent: the hook's TLS material or credentials are unusable, or its URL cannot be
sent."""
INVALID_RESPONSE = "invalid-response"
"""A 200 whose body is not valid JSON or not of the shape the hook's contract asks."""


class HookError(Exception):
    """The hook call failed."""

    code: str
    """The ``code`` label the call is counted under (see the module docstring)."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class HookRetryAfter(HookError):
    """The hook asked to be called again later (HTTP 429 with ``Retry-After``)."""

    def __init__(self, delay: float, *, url: str) -> None:
        super().__init__(f"hook asked to retry after {delay:g}s (HTTP 429)", url=url)
        self.delay = delay
        self.code = "429"


class HookStatusError(HookError):
    """The hook answered with a status other than 200."""

    def __init__(self, status: int, body: str, *, url: str) -> None:
        super().__init__(f"unsupported status code: {status} body: {body}", url=url)
        self.status = status
        self.body = body
        self.code = str(status)


class HookTransportError(HookError):
    """No HTTP answer: the request timed out or the connection failed.

    ``code`` is ``TIMEOUT``, ``DNS``, ``CONNECT``, ``TLS`` or ``TRANSPORT``; ``timed_out=True``
    is short for ``code=TIMEOUT``.
    """

    def __init__(
        self, message: str, *, url: str, code: str = TRANSPORT, timed_out: bool = False
    ) -> None:
        super().__init__(message, url=url)
        self.code = TIMEOUT if timed_out else code

    @property
    def timed_out(self) -> bool:
        return self.code == TIMEOUT


class HookResponseTooLarge(HookError):
    """The answer's body is longer than the limit; reading stopped there."""

    def __init__(self, limit: int, *, url: str) -> None:
        super().__init__(f"the answer of {url} is larger than the limit of {limit} bytes", url=url)
        self.limit = limit
        self.code = TOO_LARGE


class HookConnectionError(HookError):
    """The hook cannot be called: its TLS material or credentials are unusable, or its URL
    cannot be sent."""

    code = CONFIG
