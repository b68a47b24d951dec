"""Read-your-writes barriers: per parent key, the resourceVersions its last reconcile wrote.

A key's next FETCH carries its barrier, so that the coordinator answers only once its cache
has seen those writes (``manager.term.snapshots``), and while a key has one, a change of it
is most likely the echo of its own writes (``workers.runner.runner``).

Contract:
- ``put(key, writes)`` sets the barrier of ``key`` (group-resource -> resourceVersion).
  ``take(key)`` removes it and returns it (``{}``: none) for a fetch; a fetch that failed
  puts it back (``put``), one that returned has done its job: the barrier is gone.
- A barrier is forgotten ``ttl`` seconds after it was put (default ``BARRIER_TTL``, far
  beyond the coordinator's 5 s wait for a barrier and the arrival of any echo), so the map
  holds the keys written within the last ``ttl`` whose next fetch has not returned yet, not
  every key ever written: a key whose writes caused no event that queued it again (a write
  that changed nothing the coordinator maps back to it) would keep its barrier for ever.
  Expired barriers are swept on every ``put`` and ``sweep()`` (the runner calls it when it
  queues a key), oldest first, in constant time per barrier.
- ``discard(predicate)`` forgets the barriers of matching keys (their slot was revoked, or
  the worker fenced).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.wire import ParentKey

BARRIER_TTL: Final = 20.0
"""Seconds a barrier is kept at most: four times the coordinator's wait for one, and longer
than a watch takes to bring back the echo of a write under load; a key whose echo waits at
the coordinator behind a start's parents gets its next fetch later than this, when its writes
are long in the coordinator's cache."""


class Barriers:
    """The read-your-writes barrier of each key written recently (module docstring)."""

    __slots__ = ("_clock", "_entries", "_ttl")

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK, ttl: float = BARRIER_TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        # In the order they were put, the oldest first (a dict keeps its insertion order).
        self._entries: dict[ParentKey, tuple[float, Mapping[str, int]]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: ParentKey) -> bool:
        return key in self._entries

    def put(self, key: ParentKey, writes: Mapping[str, int]) -> None:
        """``key``'s writes are the barrier of its next fetch."""
        now = self._clock.now()
        self._entries.pop(key, None)
        self._entries[key] = (now, writes)
        self._expire(now)

    def take(self, key: ParentKey) -> Mapping[str, int]:
        """Remove and return the barrier of ``key`` (``{}`` if it has none)."""
        entry = self._entries.pop(key, None)
        return {} if entry is None else entry[1]

    def sweep(self) -> None:
        """Forget the barriers older than the TTL."""
        if self._entries:
            self._expire(self._clock.now())

    def discard(self, predicate: Callable[[ParentKey], bool]) -> None:
        """Forget the barriers of the keys ``predicate`` accepts."""
        for key in [k for k in self._entries if predicate(k)]:
            del self._entries[key]

    def _expire(self, now: float) -> None:
        entries, oldest = self._entries, now - self._ttl
        while entries:
            key, (at, _) = next(iter(entries.items()))
            if at > oldest:
                return
            del entries[key]
