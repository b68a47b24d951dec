"""Why a webhook call failed, typed by what the reconcile runner should do.

::

    HookError                  the hook gave no usable answer: the reconcile writes nothing
    ├── HookRetryAfter         HTTP 429: re-queue the key after ``delay`` seconds; this is not a
    │                          failure (no backoff step, no SyncError event)
    ├── HookStatusError        any other status but 200: a failure, re-queue with backoff; the
    │                          message carries the status and an excerpt of the body, with
    │                          the credentials sent masked
    ├── HookTransportError     no HTTP answer (timeout, refused, reset, DNS, TLS): a failure,
    │                          re-queue with backoff; ``timed_out`` tells timeouts apart
    ├── HookResponseTooLarge   the body passed the size limit: a failure, re-queue with backoff
    └── HookConnectionError    the hook's TLS material or credentials are unusable (a missing
                               Secret key, a malformed certificate): the hook is not called; a
                               failure, re-queue with backoff

``url`` and every message name the hook by its URL without userinfo or query
(``proto.runtime.redact.safe_url``), and no message carries a credential.

A 200 whose body cannot be used is a ``proto.api.errors.HookResponseError``, raised by the
response parser, not by the HTTP layer.
"""

from __future__ import annotations


class HookError(Exception):
    """The hook call failed."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class HookRetryAfter(HookError):
    """The hook asked to be called again later (HTTP 429 with ``Retry-After``)."""

    def __init__(self, delay: float, *, url: str) -> None:
        super().__init__(f"hook asked to retry after {delay:g}s (HTTP 429)", url=url)
        self.delay = delay


class HookStatusError(HookError):
    """The hook answered with a status other than 200."""

    def __init__(self, status: int, body: str, *, url: str) -> None:
        super().__init__(f"unsupported status code: {status} body: {body}", url=url)
        self.status = status
        self.body = body


class HookTransportError(HookError):
    """No HTTP answer: the request timed out or the connection failed."""

    def __init__(self, message: str, *, url: str, timed_out: bool = False) -> None:
        super().__init__(message, url=url)
        self.timed_out = timed_out


class HookResponseTooLarge(HookError):
    """The answer's body is longer than the limit; reading stopped there."""

    def __init__(self, limit: int, *, url: str) -> None:
        super().__init__(f"the answer of {url} is larger than the limit of {limit} bytes", url=url)
        self.limit = limit


class HookConnectionError(HookError):
    """The hook cannot be called safely: its TLS material or credentials are unusable."""
