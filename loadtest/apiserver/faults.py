"""Fault injection for reliability tests.

The same operations are available on the library object (``cluster.faults``) and over HTTP
under ``/_emulator/faults/...`` (see ``admin_routes``), so a test can steer an emulator
running in another process:

- ``drop_watches()``: cut every open watch connection.
- ``expire_history()``: empty the watch caches; the next watch from an older
  resourceVersion gets the 410 ERROR event.
- ``compact()``: an etcd compaction now: exact LISTs and continue tokens at older
  resourceVersions get 410, and so do watches of resources without a watch cache (Events).
- ``fail(count, status=429|500|504|"timeout", method=, path=, retry_after=, seconds=)``: the
  next ``count`` requests whose method matches and whose path+query matches the regex get
  that error (429 with ``Retry-After``); ``"timeout"`` hangs until the client gives up, or
  answers 504 after ``seconds``.
- ``delay(seconds, method=, path=, count=)``: add latency to matching requests.
- ``clear()``: remove all rules.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from loadtest.apiserver.storage import Storage
from loadtest.apiserver.watch import WatchHub


class FaultControl(Protocol):
    """What a test can do to the emulator, in-process or over HTTP."""

    def drop_watches(self) -> int: ...

    def expire_history(self) -> None: ...

    def compact(self) -> None: ...

    def fail(
        self,
        count: int = 1,
        *,
        status: int | str = 500,
        method: str = "",
        path: str = "",
        retry_after: int = 1,
        seconds: float | None = None,
    ) -> None: ...

    def delay(
        self, seconds: float, *, method: str = "", path: str = "", count: int | None = None
    ) -> None: ...

    def clear(self) -> None: ...


@dataclass(slots=True)
class Rule:
    """Matching requests get ``status`` (or latency when ``latency`` is set)."""

    method: str
    path: re.Pattern[str]
    remaining: int | None
    status: int | str = 500
    retry_after: int = 1
    seconds: float | None = None
    latency: float = 0.0
    hits: int = field(default=0)

    def matches(self, method: str, path: str) -> bool:
        return (not self.method or self.method == method) and bool(self.path.search(path))

    def describe(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path.pattern,
            "remaining": self.remaining,
            "status": self.status,
            "latency": self.latency,
            "hits": self.hits,
        }


_STATUSES = (429, 500, 504, "timeout")


class Faults:
    def __init__(self, storage: Storage, watches: WatchHub) -> None:
        self._storage = storage
        self._watches = watches
        self.errors: list[Rule] = []
        self.latencies: list[Rule] = []

    def drop_watches(self) -> int:
        return self._watches.drop_all()

    def expire_history(self) -> None:
        self._storage.expire_history()

    def compact(self) -> None:
        self._storage.compact()

    def fail(
        self,
        count: int = 1,
        *,
        status: int | str = 500,
        method: str = "",
        path: str = "",
        retry_after: int = 1,
        seconds: float | None = None,
    ) -> None:
        if status not in _STATUSES:
            raise ValueError(f"status must be one of {_STATUSES}, not {status!r}")
        if count < 1:
            raise ValueError("count must be at least 1")
        self.errors.append(
            Rule(method.upper(), re.compile(path), count, status, retry_after, seconds)
        )

    def delay(
        self, seconds: float, *, method: str = "", path: str = "", count: int | None = None
    ) -> None:
        if seconds < 0:
            raise ValueError("seconds must not be negative")
        self.latencies.append(Rule(method.upper(), re.compile(path), count, latency=seconds))

    def clear(self) -> None:
        self.errors.clear()
        self.latencies.clear()

    def _take(self, rules: list[Rule], method: str, path: str) -> Rule | None:
        for rule in rules:
            if rule.matches(method, path):
                rule.hits += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        rules.remove(rule)
                return rule
        return None

    def latency_for(self, method: str, path: str) -> float:
        rule = self._take(self.latencies, method, path) if self.latencies else None
        return rule.latency if rule else 0.0

    def error_for(self, method: str, path: str) -> Rule | None:
        return self._take(self.errors, method, path) if self.errors else None

    def describe(self) -> dict[str, Any]:
        return {
            "errors": [r.describe() for r in self.errors],
            "latencies": [r.describe() for r in self.latencies],
        }


async def _json(request: web.BaseRequest) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    body = await request.json()
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="expected a JSON object")
    return body


AdminHandler = Callable[[web.BaseRequest], Awaitable[web.Response]]


def admin_routes(faults: Faults) -> dict[tuple[str, str], AdminHandler]:
    """``/_emulator/faults/...`` handlers by (method, path): JSON in, JSON out."""

    async def drop(request: web.BaseRequest) -> web.Response:
        return web.json_response({"dropped": faults.drop_watches()})

    async def expire(request: web.BaseRequest) -> web.Response:
        faults.expire_history()
        return web.json_response({})

    async def compact(request: web.BaseRequest) -> web.Response:
        faults.compact()
        return web.json_response({})

    async def fail(request: web.BaseRequest) -> web.Response:
        body = await _json(request)
        try:
            faults.fail(
                int(body.get("count", 1)),
                status=body.get("status", 500),
                method=str(body.get("method", "")),
                path=str(body.get("path", "")),
                retry_after=int(body.get("retryAfterSeconds", 1)),
                seconds=body.get("seconds"),
            )
        except (ValueError, re.error) as err:
            return web.json_response({"error": str(err)}, status=400)
        return web.json_response(faults.describe())

    async def delay(request: web.BaseRequest) -> web.Response:
        body = await _json(request)
        try:
            faults.delay(
                float(body["seconds"]),
                method=str(body.get("method", "")),
                path=str(body.get("path", "")),
                count=body.get("count"),
            )
        except (KeyError, ValueError, re.error) as err:
            return web.json_response({"error": str(err)}, status=400)
        return web.json_response(faults.describe())

    async def show(request: web.BaseRequest) -> web.Response:
        return web.json_response(faults.describe())

    async def clear(request: web.BaseRequest) -> web.Response:
        faults.clear()
        return web.json_response(faults.describe())

    base = "/_emulator/faults"
    return {
        ("POST", f"{base}/drop-watches"): drop,
        ("POST", f"{base}/expire-history"): expire,
        ("POST", f"{base}/compact"): compact,
        ("POST", f"{base}/errors"): fail,
        ("POST", f"{base}/latency"): delay,
        ("GET", base): show,
        ("DELETE", base): clear,
    }
