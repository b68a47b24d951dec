"""Parent keys on the coordinator: where they are sent (``KeySink``) and the index of them all
by slot (``KeyIndex``).

- ``KeySink.push(key, priority)`` hands a parent key to whoever sends it to the worker that
  owns its slot (``manager.term.dispatch.Dispatch``). The router, the customize hooks
  (``manager.routing.related``) and the resyncs (``manager.term.resync``) push through it.
- ``KeyIndex`` holds every parent key some controller handles, by slot: what ASSIGN carries
  (``manager.term.membership`` reads it, ``keys_of``) and what the router keeps up to date
  (``add``/``discard`` per event, ``clear`` before rebuilding it from the caches). State
  only: it sends nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from proto.wire import ParentKey, Priority, slot_of


class KeySink(Protocol):
    def push(self, key: ParentKey, priority: Priority) -> None:
        """Send ``key`` at ``priority`` to the worker that owns its slot."""
        ...


class KeyIndex:
    """Every handled parent key, by slot (see the module docstring)."""

    def __init__(self) -> None:
        self._by_slot: dict[int, set[ParentKey]] = {}

    def add(self, key: ParentKey) -> None:
        self._by_slot.setdefault(slot_of(key), set()).add(key)

    def discard(self, key: ParentKey) -> None:
        slot = slot_of(key)
        keys = self._by_slot.get(slot)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_slot[slot]

    def clear(self) -> None:
        self._by_slot = {}

    def keys_of(self, slots: Iterable[int]) -> tuple[ParentKey, ...]:
        """Every key of ``slots``, sorted."""
        keys: list[ParentKey] = []
        for slot in slots:
            keys.extend(self._by_slot.get(slot, ()))
        return tuple(sorted(keys))
