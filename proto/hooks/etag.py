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
  least recently used entries are evicted (``proto.hooks.bodies``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from proto.api.endpoints import ETag
from proto.hooks.bodies import DEFAULT_MAX_BYTES, Bodies

DEFAULT_TTL_SECONDS = 600.0


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
        self._clock = clock
        self._entries: Bodies[Entry] = Bodies(max_bytes=max_bytes, clock=clock)
        self._next_sweep = clock() + self._cleanup

    def get(self, key: Hashable) -> Entry | None:
        return self._entries.get(key)

    def put(self, key: Hashable, etag: str, body: bytes) -> None:
        now = self._clock()
        if now >= self._next_sweep:
            self._next_sweep = now + self._cleanup
            self._entries.sweep(now)
        self._entries.put(key, Entry(etag, body, now + self._ttl))

    def drop(self, predicate: Callable[[Any], bool]) -> None:
        self._entries.drop(predicate)

    def __len__(self) -> int:
        return len(self._entries)
