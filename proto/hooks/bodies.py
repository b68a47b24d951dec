"""Kept hook answers that expire, bounded by their bytes: ``Bodies``, what the ETag cache
(``proto.hooks.etag``) and the answer cache (``proto.hooks.answers``) both keep.

Contract:
- An entry is anything with a ``body`` (bytes) and an ``expires`` time (of the injected
  clock), one per key.
- ``get(key)`` returns the entry unless it has expired (then it is removed), and makes it the
  most recently used; ``put(key, entry)`` replaces the key's entry; a body longer than
  ``max_bytes`` is not kept (and the key's old entry is gone all the same).
- Past ``max_bytes`` of bodies, the least recently used entries are removed. ``sweep(now)``
  removes the expired ones, ``drop(predicate)`` those whose key matches, ``remove(key)`` one.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar


class Expiring(Protocol):
    @property
    def body(self) -> bytes: ...

    @property
    def expires(self) -> float: ...


E = TypeVar("E", bound=Expiring)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""The caches' default ``max_bytes`` (each cache of each controller's hook has its own)."""


class Bodies(Generic[E]):
    """Entries per key, least recently used first, at most ``max_bytes`` of bodies."""

    def __init__(self, *, max_bytes: int, clock: Callable[[], float]) -> None:
        self._max_bytes = max_bytes
        self._clock = clock
        self._entries: collections.OrderedDict[Hashable, E] = collections.OrderedDict()
        self._bytes = 0

    def get(self, key: Hashable) -> E | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= self._clock():
            self.remove(key)
            return None
        self._entries.move_to_end(key)
        return entry

    def put(self, key: Hashable, entry: E) -> None:
        self.remove(key)
        if len(entry.body) > self._max_bytes:
            return
        self._entries[key] = entry
        self._bytes += len(entry.body)
        while self._bytes > self._max_bytes:
            self.remove(next(iter(self._entries)))

    def sweep(self, now: float) -> None:
        for key in [k for k, e in self._entries.items() if e.expires <= now]:
            self.remove(key)

    def drop(self, predicate: Callable[[Any], bool]) -> None:
        for key in [k for k in self._entries if predicate(k)]:
            self.remove(key)

    def remove(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= len(entry.body)

    def __len__(self) -> int:
        return len(self._entries)
