"""The ETag cache of one hook of one controller: the last ``(ETag, body)`` per parent.

Metacontroller's ``webhook.etag``: with ``enabled``, a call for a parent whose last answer
carried an ``ETag`` sends ``If-None-Match: <etag>``, and a 304 or 412 answer means "the same
body as last time", which is served from here.

Contract:
- ``get(key)`` returns the entry of a parent (``None`` when absent or expired); ``put`` stores
  one, ``drop(predicate)`` removes the entries of keys that match (the worker lost their slot).
- Entries expire ``cacheTimeoutSeconds`` after they were stored. Expired entries are never
  served and are swept at most every ``cacheCleanupSeconds``, on the next ``put``. Either
  number may be set alone.
- Memory is bounded, unlike Metacontroller (whose cache never expires without a timeout and
  dereferences a nil pointer when only the timeout is set): without ``cacheTimeoutSeconds``
  entries expire after ``DEFAULT_TTL_SECONDS``; and past ``max_bytes`` of cached bodies the
  least recently used entries are evicted.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from proto.api.endpoints import ETag

DEFAULT_TTL_SECONDS = 600.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Entry:
    etag: str
    body: bytes
    expires: float


class ETagCache:
    """Bounded ``(ETag, body)`` per key (see the module docstring)."""

    def __init__(
        self,
        config: ETag,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._ttl = float(config.cache_timeout_seconds or DEFAULT_TTL_SECONDS)
        cleanup = config.cache_cleanup_seconds
        self._cleanup = float(cleanup) if cleanup else self._ttl
        self._max_bytes = max_bytes
        self._clock = clock
        self._entries: collections.OrderedDict[Hashable, Entry] = collections.OrderedDict()
        self._bytes = 0
        self._next_sweep = clock() + self._cleanup

    def get(self, key: Hashable) -> Entry | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= self._clock():
            self._remove(key)
            return None
        self._entries.move_to_end(key)
        return entry

    def put(self, key: Hashable, etag: str, body: bytes) -> None:
        now = self._clock()
        if now >= self._next_sweep:
            self._sweep(now)
        self._remove(key)
        if len(body) > self._max_bytes:
            return
        self._entries[key] = Entry(etag, body, now + self._ttl)
        self._bytes += len(body)
        while self._bytes > self._max_bytes:
            oldest = next(iter(self._entries))
            self._remove(oldest)

    def drop(self, predicate: Callable[[Any], bool]) -> None:
        for key in [k for k in self._entries if predicate(k)]:
            self._remove(key)

    def _sweep(self, now: float) -> None:
        self._next_sweep = now + self._cleanup
        for key in [k for k, e in self._entries.items() if e.expires <= now]:
            self._remove(key)

    def _remove(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= len(entry.body)

    def __len__(self) -> int:
        return len(self._entries)
