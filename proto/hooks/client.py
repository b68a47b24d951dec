"""The webhook executor: POST a hook request, return the body of a 200 answer.

``HookClient(session).call(endpoint, body)`` sends ``body`` (JSON bytes, encoded by the caller)
to the endpoint's webhook as Metacontroller does:

- ``POST`` with ``Content-Type: application/json`` to ``webhook.url`` (``url`` as written, or
  ``<protocol>://<name>.<namespace>:<port><path>`` built from ``service``: see
  ``proto.api.controllers``), with the webhook's timeout over the whole exchange.
- Only 200 is success. 429 raises ``HookRetryAfter`` with the ``Retry-After`` delay (integer
  seconds or an RFC 1123 date; unparsable or past: 0). Other statuses raise
  ``HookStatusError`` with an excerpt of the body; timeouts, connection failures and malformed
  HTTP raise ``HookTransportError`` (tree in ``proto.hooks.errors``).
  ``asyncio.CancelledError`` passes.
- One ``proto.http1.HttpClient`` per process (keep-alive connections per hook server) is
  injected and shared by every controller; the hook client never closes it.
- Metrics go to an injected ``HookMetrics`` (``proto.hooks.metrics``), with the endpoint's
  ``url``, ``controller_name`` and ``controller_type``.

Connection settings that are parsed but not applied yet (``proto.api.controllers.Webhook``):
``etag`` (a cache of ``(ETag, body)`` per parent, ``If-None-Match``, 304/412 answered from the
cache) belongs in a wrapper around ``call``; ``caBundle``/``clientTLS`` become a per-endpoint
``ssl`` context and ``authorization``/``basicAuth`` an ``Authorization`` header, both resolved
from Secrets outside this module and added where ``_request_options`` builds the request.
"""

from __future__ import annotations

import asyncio
import calendar
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from proto.api.controllers import HookName, Webhook
from proto.hooks.errors import HookRetryAfter, HookStatusError, HookTransportError
from proto.hooks.metrics import HookMetrics, NoHookMetrics
from proto.http1 import HttpClient, HttpTransportError

BODY_EXCERPT_BYTES = 1024
_HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True, slots=True)
class HookEndpoint:
    """One hook of one controller."""

    hook: HookName
    webhook: Webhook
    controller_type: str
    """``CompositeController`` or ``DecoratorController``."""
    controller_name: str

    @property
    def metric_labels(self) -> tuple[str, str, str]:
        return (self.webhook.url, self.controller_name, self.controller_type)


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


# --- the client -------------------------------------------------------------------------------


class HookClient:
    """Calls webhooks over one shared ``HttpClient``."""

    def __init__(
        self,
        http: HttpClient,
        *,
        metrics: HookMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._http = http
        self._metrics: HookMetrics = metrics if metrics is not None else NoHookMetrics()
        self._clock = clock
        self._wall_clock = wall_clock

    async def call(self, endpoint: HookEndpoint, body: bytes) -> bytes:
        """POST ``body``; the response body of a 200. Raises ``HookError`` subclasses."""
        url = endpoint.webhook.url
        labels = endpoint.metric_labels
        timeout = endpoint.webhook.timeout_seconds
        self._metrics.started(endpoint.hook, labels)
        start = self._clock()
        code: int | None = None
        try:
            async with asyncio.timeout(timeout):
                response = await self._http.request("POST", url, headers=_HEADERS, body=body)
            code = response.status
        except TimeoutError:
            raise HookTransportError(
                f"http error: no answer from {url} within {timeout:g}s", url=url, timed_out=True
            ) from None
        except (HttpTransportError, ValueError) as err:
            raise HookTransportError(f"http error: {err}", url=url) from err
        finally:
            self._metrics.finished(endpoint.hook, labels, code=code, seconds=self._clock() - start)
        if code == 200:
            return response.body
        if code == 429:
            delay = parse_retry_after(response.headers.get("retry-after"), now=self._wall_clock())
            raise HookRetryAfter(delay, url=url)
        excerpt = response.body[:BODY_EXCERPT_BYTES]
        raise HookStatusError(code, excerpt.decode("utf-8", "replace"), url=url)
