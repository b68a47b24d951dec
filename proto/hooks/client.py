"""The webhook executor: POST a hook request, return the decoded body of a 200 answer.

``HookClient(http).call_decoded(endpoint, body, decode=..., cache_key=...)`` sends ``body``
(JSON bytes, encoded by the caller) to the endpoint's webhook as Metacontroller does, and
returns ``decode(answer)``; ``call`` returns the answer's bytes as they came:

- ``POST`` with ``Content-Type: application/json`` to ``webhook.url`` (``url`` as written, or
  ``<protocol>://<name>.<namespace>:<port><path>`` built from ``service``: see
  ``proto.api.controllers``).
- ``headers`` are sent with the request (the attempt's fencing headers:
  ``proto.hooks.attempt``); the client's own (``Content-Type``, ``Authorization``,
  ``If-None-Match``) win over them.
- A client made with a ``gate`` (a ``HookGate``: a fenced worker's check that it may still
  act, ``workers.link.fencing``) asks it for each call's ``ready`` check, given the hook and
  the attempt (the ``X-Metashard-Attempt`` header), called right before the request's bytes
  go out, with nothing awaited in between (``proto.runtime.http1``): what it raises stops the
  call unsent and passes as it is, uncounted. Once an answer is decoded, ``gate.answered()``
  may refuse it by raising (the call is counted under its HTTP status, the answer discarded,
  nothing cached).
- The webhook's ``timeout`` bounds the whole call: waiting for a pooled connection, connect,
  TLS handshake, sending, and reading the whole body.
- The endpoint's resolved ``Connection`` (``proto.api.endpoints``) supplies the
  ``Authorization`` header (without one, the URL's userinfo, ``http://user:password@host/``,
  is sent as Basic auth, as Go's net/http does for Metacontroller) and the TLS material: a
  verifying context with TLS 1.2 at least, with the given CA roots (else the system's) and
  client certificate (``proto.hooks.tls``).
  A connection that failed to resolve (``Connection.error``), whose material does not load,
  or a URL that cannot be sent raises ``HookConnectionError`` and nothing is sent.
- Only 200 is success. 429 raises ``HookRetryAfter`` with the ``Retry-After`` delay (integer
  seconds or an RFC 1123 date; unparsable or past: 0). Other statuses raise
  ``HookStatusError`` with an excerpt of the body (its first ``BODY_EXCERPT_BYTES``), in
  which the credentials sent read ``[REDACTED]``: the ``Authorization`` value, its
  credentials and, for ``Basic``, the decoded ``user:password`` and the password (a hook, or
  a proxy in front of it, may echo them in a 401). Timeouts, connection failures and malformed
  HTTP raise ``HookTransportError`` (tree in ``proto.hooks.errors``).
  ``asyncio.CancelledError`` passes.
- A body longer than ``max_response_bytes`` (default 3 MiB, Kubernetes' request size limit)
  raises ``HookResponseTooLarge``; reading stops there, nothing more is buffered.
- The 200's body goes through ``decode`` (the hook contract's parser, raising
  ``proto.api.errors.HookResponseError`` for a body that is not JSON or not of the expected
  shape) before the call is counted or its answer cached.
- ETag (``webhook.etag.enabled``, calls given a ``cache_key``, i.e. the parent): the last
  ``(ETag, body)`` per parent and ``cache_variant`` that ``decode`` accepted is kept
  (``proto.hooks.etag``, one cache per controller and hook); the next such call sends
  ``If-None-Match`` and a 304 or 412 answer returns the cached body, decoded. The variant tells
  apart the calls one sync makes for one parent (a rollout calls the hook once per revision,
  each with another parent), so they do not evict each other. ``drop_cached(predicate)``
  forgets parents, every variant (their slot moved away); ``forget`` a controller (its
  caches, TLS contexts and metric series).
- Answers reused by TTL (``ttl_of``, calls given a ``cache_key``; ``proto.api.ttl``): an
  answer whose decoded form sets a TTL is kept for it with a digest of its request
  (``proto.hooks.answers``, one cache per controller and hook, keyed as the ETag cache), and
  a call with the same request before it expires is not sent: the kept answer is decoded
  and returned, and counted apart (``HookMetrics.reused``), not as a request. An answer
  without a TTL removes what was kept for its parent and variant.
- One ``proto.runtime.http1.HttpClient`` per process (keep-alive connections per hook server and TLS
  material) is injected and shared by every controller; the hook client never closes it.
- Metrics go to an injected ``HookMetrics`` (``proto.hooks.metrics``), with the endpoint's
  ``url`` (without userinfo or query string), ``controller_name`` and ``controller_type``.
  Every call is counted once it ends, under a ``code``: the HTTP status of an answer, or the
  ``code`` of the ``HookError`` (``dns``, ``connect``, ``tls``, ``timeout``, ``transport``,
  ``too-large``, ``config``), or ``invalid-response`` when ``decode`` refused a 200. A call
  the caller cancels is not counted.
- No credential appears in an error message, a metric label or a log line: URLs are shown
  through ``proto.runtime.redact.safe_url``, header values are never put into messages, and the
  credentials sent are masked in a body excerpt.
"""

from __future__ import annotations

import base64
import calendar
import math
import re
import socket
import ssl
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol, TypeVar

from proto.api.controllers import HookName, Webhook
from proto.api.endpoints import Connection
from proto.api.errors import HookResponseError
from proto.hooks.answers import AnswerCache
from proto.hooks.attempt import ATTEMPT
from proto.hooks.errors import (
    CONNECT,
    DNS,
    INVALID_RESPONSE,
    TIMEOUT,
    TLS,
    TRANSPORT,
    HookConnectionError,
    HookError,
    HookResponseTooLarge,
    HookRetryAfter,
    HookStatusError,
    HookTransportError,
)
from proto.hooks.etag import ETagCache
from proto.hooks.metrics import HookMetrics, NoHookMetrics
from proto.hooks.tls import TlsContexts
from proto.runtime.http1 import (
    BodyTooLarge,
    HttpClient,
    HttpResponse,
    HttpTransportError,
    Ready,
    userinfo_authorization,
)
from proto.runtime.redact import REDACTED, safe_url

BODY_EXCERPT_BYTES = 1024
DEFAULT_MAX_RESPONSE_BYTES = 3 * 1024 * 1024
_JSON = "application/json"
_CACHE_HIT_STATUSES = (304, 412)

T = TypeVar("T")


@dataclass(frozen=True)
class HookEndpoint:
    """One hook of one controller."""

    hook: HookName
    webhook: Webhook
    controller_type: str
    """``CompositeController`` or ``DecoratorController``."""
    controller_name: str
    connection: Connection = field(default_factory=Connection, repr=False)
    """TLS material and credentials, resolved from the controller's Secrets and ConfigMaps."""

    @cached_property
    def shown_url(self) -> str:
        """The URL without userinfo or query string: for labels and messages."""
        return safe_url(self.webhook.url)

    @property
    def metric_labels(self) -> tuple[str, str, str]:
        return (self.shown_url, self.controller_name, self.controller_type)

    @property
    def controller(self) -> tuple[str, str]:
        return (self.controller_type, self.controller_name)


# --- Retry-After ------------------------------------------------------------------------------

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_RFC1123 = re.compile(
    r"(?i:mon|tue|wed|thu|fri|sat|sun), (\d\d) ([A-Za-z]{3}) (\d{4}) (\d\d):(\d\d):(\d\d) "
    r"(?:GMT([+-]\d{1,2})|[A-Z]{3,5}|ChST|MeST)"
)
_INTEGER = re.compile(r"[+-]?\d+")


def _rfc1123_timestamp(text: str) -> float | None:
    """Seconds since the epoch, as Go's ``time.Parse(time.RFC1123, text)`` reads the date.

    Zone abbreviations count as UTC (Go gives unknown abbreviations a zero offset), except
    ``GMT+h``/``GMT-h``.
    """
    match = _RFC1123.fullmatch(text)
    if match is None:
        return None
    day, month_text, year, hour, minute, second, gmt_offset = match.groups()
    month = _MONTHS.index(month_text.lower()) + 1 if month_text.lower() in _MONTHS else 0
    if not month or int(hour) > 23 or int(minute) > 59 or int(second) > 59:
        return None
    if not 1 <= int(day) <= calendar.monthrange(int(year), month)[1]:
        return None
    stamp = calendar.timegm((int(year), month, int(day), int(hour), int(minute), int(second)))
    return float(stamp - int(gmt_offset or 0) * 3600)


def parse_retry_after(value: str | None, *, now: float) -> float:
    """The delay in seconds asked by a ``Retry-After`` header; 0 when unusable or past.

    A date becomes whole seconds from ``now`` (wall-clock seconds since the epoch), rounded
    up, as Metacontroller computes it.
    """
    if not value:
        return 0.0
    if _INTEGER.fullmatch(value):
        seconds = int(value)
        return float(seconds) if 0 < seconds < 2**63 else 0.0
    stamp = _rfc1123_timestamp(value)
    if stamp is None:
        return 0.0
    return float(max(0, math.ceil(stamp - now)))


# --- error answers ---------------------------------------------------------------------------


def _sent_credentials(authorization: str | None) -> set[bytes]:
    """The secret parts of an ``Authorization`` value, as the bytes an echo would carry: the
    value, its credentials and, for ``Basic``, the decoded ``user:password`` and password."""
    if not authorization:
        return set()
    scheme, _, credentials = authorization.partition(" ")
    credentials = credentials.strip()
    texts = {authorization, credentials}
    values: set[bytes] = set()
    if scheme.lower() == "basic":
        try:
            userinfo = base64.b64decode(credentials, validate=True)
        except ValueError:  # not base64: the value and its credentials are masked all the same
            userinfo = b""
        values |= {userinfo, userinfo.partition(b":")[2]}
    for encoding in ("utf-8", "latin-1"):  # as sent (latin-1), or re-encoded by the hook
        values |= {text.encode(encoding, "ignore") for text in texts}
    values.discard(b"")
    return values


def _masked_excerpt(body: bytes, authorization: str | None) -> str:
    """The start of an error answer's body with the credentials sent masked.

    The whole body is masked before it is cut, so a credential across the cut leaves no part.
    """
    secrets = _sent_credentials(authorization)
    if secrets:
        longest_first = sorted(secrets, key=len, reverse=True)
        pattern = re.compile(b"|".join(re.escape(secret) for secret in longest_first))
        body = pattern.sub(REDACTED.encode(), body)
    return body[:BODY_EXCERPT_BYTES].decode("utf-8", "replace")


# --- failures ---------------------------------------------------------------------------------


def _transport_code(err: HttpTransportError) -> str:
    """Why no answer came, from the error a failed connect is raised from: the host name did
    not resolve (``DNS``), the TLS handshake failed (``TLS``), any other failure to connect
    (``CONNECT``) or the connect time limit (``TIMEOUT``); else the connection broke after it
    was made, or what came was not HTTP (``TRANSPORT``)."""
    cause = err.__cause__
    if isinstance(cause, socket.gaierror):
        return DNS
    if isinstance(cause, ssl.SSLError):
        return TLS
    if isinstance(cause, TimeoutError) or isinstance(err.__context__, TimeoutError):
        return TIMEOUT
    if isinstance(cause, OSError):
        return CONNECT
    return TRANSPORT


def _as_is(body: bytes) -> bytes:
    return body


# --- the client -------------------------------------------------------------------------------


class HookGate(Protocol):
    """What may stop a call or refuse its answer (``workers.link.fencing.Fence`` conforms)."""

    def hook_call(self, hook: str, attempt: str) -> Ready:
        """The ``ready`` check of one call of ``hook`` for ``attempt``."""
        ...

    def answered(self) -> None:
        """Raise to discard the answer that just came."""
        ...


class HookClient:
    """Calls webhooks over one shared ``HttpClient``."""

    def __init__(
        self,
        http: HttpClient,
        *,
        metrics: HookMetrics | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        gate: HookGate | None = None,
    ) -> None:
        if max_response_bytes < 1:
            raise ValueError(f"max_response_bytes must be positive, got {max_response_bytes}")
        self._http = http
        self._metrics: HookMetrics = metrics if metrics is not None else NoHookMetrics()
        self._max_response_bytes = max_response_bytes
        self._clock = clock
        self._wall_clock = wall_clock
        self._gate = gate
        self._tls = TlsContexts(on_replaced=http.discard)
        self._etags: dict[tuple[str, str, HookName], ETagCache] = {}
        self._answers: dict[tuple[str, str, HookName], AnswerCache] = {}

    async def call(
        self,
        endpoint: HookEndpoint,
        body: bytes,
        *,
        cache_key: Hashable | None = None,
        cache_variant: Hashable = None,
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        """``call_decoded`` without a decoder: the body of the 200 as it came, counted as
        ``"200"`` whatever it holds."""
        return await self.call_decoded(
            endpoint,
            body,
            decode=_as_is,
            cache_key=cache_key,
            cache_variant=cache_variant,
            headers=headers,
        )

    async def call_decoded(
        self,
        endpoint: HookEndpoint,
        body: bytes,
        *,
        decode: Callable[[bytes], T],
        cache_key: Hashable | None = None,
        cache_variant: Hashable = None,
        headers: Mapping[str, str] | None = None,
        ttl_of: Callable[[T], float | None] | None = None,
    ) -> T:
        """POST ``body``; ``decode`` of the 200's body. Raises ``HookError`` subclasses, and
        the ``proto.api.errors.HookResponseError`` of ``decode``.

        ``decode`` runs before the call is counted, so an answer it refuses counts as
        ``invalid-response``, not ``"200"``, and is not kept for ETag reuse.
        ``cache_key`` (the parent) enables the ETag cache when the webhook asks for it;
        ``cache_variant`` (a revision) gives one parent's calls in one sync their own entries.
        ``headers`` go with the request; the gate, if any, may stop it right before it is
        sent, and refuse its answer.
        ``ttl_of`` (with a ``cache_key``) says how long a decoded answer may be reused for
        the same request: such a call is not sent, and is counted apart (``reused``).
        """
        labels = endpoint.metric_labels
        entry = (cache_key, cache_variant)
        answers = self._answers_of(endpoint) if ttl_of and cache_key is not None else None
        reused = answers.get(entry, body) if answers is not None else None
        if reused is not None:
            result = decode(reused)
            self._metrics.reused(endpoint.hook, labels)
            return result
        self._metrics.started(endpoint.hook, labels)
        code: str | None = None  # stays None when the caller abandons the call (cancelled)
        seconds: float | None = None  # stays None without an HTTP answer
        try:
            cache = self._cache(endpoint) if cache_key is not None else None
            cached = cache.get(entry) if cache is not None else None
            start = self._clock()
            response = await self._send(
                endpoint,
                body,
                etag=cached.etag if cached else None,
                extra=headers,
                ready=self._ready(endpoint, headers),
            )
            seconds = self._clock() - start
            if self._gate is not None:
                code = str(response.status)  # counted as it came, should the gate refuse it
                self._gate.answered()
            if response.status == 200:
                answer = response.body
                result = decode(answer)
                etag = response.headers.get("etag")
                if cache is not None and etag:
                    cache.put(entry, etag, answer)
            elif cached is not None and response.status in _CACHE_HIT_STATUSES:
                answer = cached.body
                result = decode(answer)
            else:
                raise self._refusal(endpoint, response)
            if answers is not None and ttl_of is not None:
                answers.put(entry, body, answer, ttl_of(result))
            code = str(response.status)
            return result
        except HookError as err:
            code = err.code
            raise
        except HookResponseError:
            code = INVALID_RESPONSE
            raise
        finally:
            self._metrics.finished(endpoint.hook, labels, code=code, seconds=seconds)

    async def _send(
        self,
        endpoint: HookEndpoint,
        body: bytes,
        *,
        etag: str | None,
        extra: Mapping[str, str] | None,
        ready: Ready | None,
    ) -> HttpResponse:
        """The hook's answer, whatever its status; ``HookError`` when none came."""
        url = endpoint.shown_url
        connection = endpoint.connection
        if connection.error is not None:
            raise HookConnectionError(f"not calling {url}: {connection.error}", url=url)
        headers = {**(extra or {}), "Content-Type": _JSON}
        if connection.authorization is not None:
            headers["Authorization"] = connection.authorization
        if etag is not None:
            headers["If-None-Match"] = etag
        context = self._context(endpoint)
        timeout = endpoint.webhook.timeout_seconds
        try:
            return await self._http.request(
                "POST",
                endpoint.webhook.url,
                headers=headers,
                body=body,
                ssl_context=context,
                max_body=self._max_response_bytes,
                time_limit=timeout,
                ready=ready,
            )
        except TimeoutError:
            raise HookTransportError(
                f"http error: no answer from {url} within {timeout:g}s", url=url, timed_out=True
            ) from None
        except BodyTooLarge:
            raise HookResponseTooLarge(self._max_response_bytes, url=url) from None
        except HttpTransportError as err:
            code = _transport_code(err)
            raise HookTransportError(f"http error: {url}: {err}", url=url, code=code) from None
        except ValueError:  # its text may quote the URL, userinfo included: not repeated here
            raise HookConnectionError(
                f"http error: {url}: the request cannot be sent (a malformed URL or header)",
                url=url,
            ) from None

    def _ready(self, endpoint: HookEndpoint, headers: Mapping[str, str] | None) -> Ready | None:
        """The gate's check of one call, if the client has a gate."""
        if self._gate is None:
            return None
        return self._gate.hook_call(endpoint.hook.value, (headers or {}).get(ATTEMPT, ""))

    def _refusal(self, endpoint: HookEndpoint, response: HttpResponse) -> HookError:
        """The error for an answer that is not a success: 429 or another status."""
        url = endpoint.shown_url
        if response.status == 429:
            delay = parse_retry_after(response.headers.get("retry-after"), now=self._wall_clock())
            return HookRetryAfter(delay, url=url)
        sent = endpoint.connection.authorization or userinfo_authorization(endpoint.webhook.url)
        excerpt = _masked_excerpt(response.body, sent)
        return HookStatusError(response.status, excerpt, url=url)

    def _context(self, endpoint: HookEndpoint) -> ssl.SSLContext | None:
        if not endpoint.webhook.url.startswith("https:"):
            return None
        key = (*endpoint.controller, endpoint.hook)
        try:
            return self._tls.get(key, endpoint.connection.tls_material)
        except ValueError as err:
            url = endpoint.shown_url
            raise HookConnectionError(f"not calling {url}: {err}", url=url) from None

    def _cache(self, endpoint: HookEndpoint) -> ETagCache | None:
        config = endpoint.webhook.etag
        key = (*endpoint.controller, endpoint.hook)
        if config is None or not config.enabled:
            self._etags.pop(key, None)
            return None
        cache = self._etags.get(key)
        if cache is None or cache.config != config:
            cache = self._etags[key] = ETagCache(config, clock=self._clock)
        return cache

    def _answers_of(self, endpoint: HookEndpoint) -> AnswerCache:
        key = (*endpoint.controller, endpoint.hook)
        cache = self._answers.get(key)
        if cache is None:
            cache = self._answers[key] = AnswerCache(clock=self._clock)
        return cache

    def drop_cached(self, predicate: Callable[[Any], bool]) -> None:
        """Forget the cached answers of the parents that match (their slot moved away).

        ``predicate`` is called with the ``cache_key``s given to ``call``; a key that matches
        loses the entries of all its variants.
        """
        caches: list[ETagCache | AnswerCache] = [*self._etags.values(), *self._answers.values()]
        for cache in caches:
            cache.drop(lambda entry: predicate(entry[0]))

    def forget(self, *, controller_type: str, controller_name: str) -> None:
        """Drop the ETag and answer caches, TLS contexts and metric series of a controller that
        went away."""
        ours = (controller_type, controller_name)
        self._metrics.forget(controller_type=controller_type, controller_name=controller_name)
        for key in [k for k in self._etags if k[:2] == ours]:
            del self._etags[key]
        for key in [k for k in self._answers if k[:2] == ours]:
            del self._answers[key]
        self._tls.forget(lambda key: isinstance(key, tuple) and key[:2] == ours)
