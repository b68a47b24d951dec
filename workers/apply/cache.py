"""The server-side apply cache: which body was last applied to which child, to skip the PATCH.

Metacontroller keeps an in-memory map child -> (uid, generation, resourceVersion, hash of the
last applied body) and skips an apply when the body's hash, the uid and the generation (or,
for objects without a generation, the resourceVersion) are unchanged (``isCacheInvalid``).
This is the same check, with the ownership metashard needs:

- Entries are grouped by an *owner* (the parent's key): ``discard(predicate)`` drops the
  entries of every owner that matches, which a worker does when a slot is revoked, so a slot
  moving to another worker starts cold there and leaves nothing behind here.
- ``record(owner, child, version, body_hash)`` stores what an apply answered (or what a
  dry run found equal); ``fresh(owner, child, version, body_hash)`` says whether the body is
  already applied to that version of the child.
- Bounded: at most ``max_entries`` entries, the least recently used dropped first. A miss only
  costs one apply.
- ``Version.of(obj)``: generation when the object has one > 0, else the resourceVersion; an
  object without a uid is never fresh. An edit of the metadata (a label removed) moves no
  generation, so a hit says nothing about it: ``workers.sync.ssa_writes`` also asks that the
  child still holds the body's metadata (``workers.apply.ssa.holds_metadata``).

Not thread-safe; one event loop uses it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Owner = TypeVar("Owner", bound=Hashable)

DEFAULT_MAX_ENTRIES = 100_000


@dataclass(frozen=True, slots=True)
class Version:
    """What identifies one state of a child for the cache."""

    uid: str
    generation: int
    resource_version: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Version:
        metadata = obj.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        generation = metadata.get("generation")
        return cls(
            uid=str(metadata.get("uid") or ""),
            generation=generation if isinstance(generation, int) else 0,
            resource_version=str(metadata.get("resourceVersion") or ""),
        )

    def matches(self, other: Version) -> bool:
        """``isCacheInvalid`` negated: same uid, and same generation (same resourceVersion
        when the generation is 0)."""
        if not self.uid or self.uid != other.uid or self.generation != other.generation:
            return False
        return self.generation != 0 or self.resource_version == other.resource_version


@dataclass(frozen=True, slots=True)
class _Entry:
    version: Version
    body_hash: str


class AppliedCache(Generic[Owner]):
    """Last applied body per child, grouped by owner (see the module docstring)."""

    def __init__(self, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max = max_entries
        self._entries: OrderedDict[tuple[Owner, Hashable], _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def fresh(self, owner: Owner, child: Hashable, version: Version, body_hash: str) -> bool:
        """Whether ``body_hash`` was the last body applied to this version of ``child``."""
        key = (owner, child)
        entry = self._entries.get(key)
        if entry is None:
            return False
        self._entries.move_to_end(key)
        return entry.body_hash == body_hash and entry.version.matches(version)

    def record(self, owner: Owner, child: Hashable, version: Version, body_hash: str) -> None:
        """Remember that ``body_hash`` is applied to ``version`` of ``child``."""
        key = (owner, child)
        self._entries[key] = _Entry(version, body_hash)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def forget(self, owner: Owner, child: Hashable) -> None:
        """Drop one child's entry (it was deleted, or the apply failed)."""
        self._entries.pop((owner, child), None)

    def discard(self, predicate: Callable[[Owner], bool]) -> int:
        """Drop the entries of every owner ``predicate`` accepts; return how many."""
        gone = [key for key in self._entries if predicate(key[0])]
        for key in gone:
            del self._entries[key]
        return len(gone)
