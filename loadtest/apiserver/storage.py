"""In-memory versioned object storage: the emulator's etcd plus its watch cache.

Invariants:
- One global resourceVersion counter for every resource (like etcd's revision); each
  write takes the next value. ``Storage.rv`` is the latest.
- A stored ``Entry`` is immutable: its ``obj`` dict is never mutated after it is stored, and
  ``raw`` is that dict serialized once. Writers build a new dict (``Entry.copy()``).
- Every write of a table is a ``Change`` appended to two histories: ``mvcc`` (everything
  since the last compaction: historical LISTs and continue tokens read it) and the bounded
  ``log`` (the watch cache: watches from an old resourceVersion replay it). A ``DELETED``
  change carries the last stored state at the deletion's resourceVersion.
- Memory stays bounded under sustained writes: besides the periodic compaction, a table
  holding more than ``revisions`` changes compacts away its older half (as etcd's
  revision-based auto-compaction would).
- Watchers are notified synchronously at write time, in resourceVersion order; a change's
  bytes are encoded once and shared by every watcher (``Change.line``).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import orjson

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


def encode(obj: dict[str, Any], sort_keys: bool) -> bytes:
    """``obj`` as JSON, in a right-sized buffer (orjson's own stays over-allocated)."""
    raw = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS) if sort_keys else orjson.dumps(obj)
    return bytes(memoryview(raw))


class Entry:
    """One stored version of one object."""

    __slots__ = ("key", "labels", "name", "namespace", "obj", "raw", "rv", "uid")

    def __init__(self, obj: dict[str, Any], raw: bytes, rv: int) -> None:
        meta = obj["metadata"]
        self.obj = obj
        self.raw = raw
        self.rv = rv
        self.name: str = meta["name"]
        self.namespace: str = meta.get("namespace") or ""
        self.key = f"{self.namespace}/{self.name}" if self.namespace else self.name
        self.uid: str = meta.get("uid", "")
        self.labels: dict[str, str] = meta.get("labels") or {}

    @property
    def meta(self) -> dict[str, Any]:
        return self.obj["metadata"]

    def copy(self) -> dict[str, Any]:
        """A deep, mutable copy of the stored object (decoded from its bytes)."""
        return orjson.loads(self.raw)


class Change:
    """One write as watchers see it. ``prev`` is the state before (MODIFIED, DELETED)."""

    __slots__ = ("_line", "_prev_line", "entry", "prev", "rv", "type")

    def __init__(self, type_: str, entry: Entry, prev: Entry | None) -> None:
        self.type = type_
        self.entry = entry
        self.prev = prev
        self.rv = entry.rv
        self._line: bytes | None = None
        self._prev_line: bytes | None = None

    def line(self) -> bytes:
        """``{"type":...,"object":...}\\n`` with the stored object, encoded once."""
        if self._line is None:
            self._line = b'{"type":"%s","object":%s}\n' % (self.type.encode(), self.entry.raw)
        return self._line

    def prev_deleted_line(self, sort_keys: bool) -> bytes:
        """A DELETED event with the previous object at this change's resourceVersion."""
        if self._prev_line is None:
            assert self.prev is not None
            obj = dict(self.prev.obj)
            obj["metadata"] = {**self.prev.meta, "resourceVersion": str(self.rv)}
            self._prev_line = b'{"type":"DELETED","object":%s}\n' % encode(obj, sort_keys)
        return self._prev_line


class Subscriber(Protocol):
    def offer(self, change: Change) -> None: ...


class Table:
    """All objects of one stored resource (e.g. ``core/configmaps``)."""

    def __init__(self, name: str, *, history: int, watch_cache: bool, sort_keys: bool) -> None:
        self.name = name
        self.watch_cache = watch_cache
        self.sort_keys = sort_keys
        self.objects: dict[str, Entry] = {}
        self.by_namespace: dict[str, dict[str, Entry]] = {}
        self.mvcc: list[Change] = []
        self.log: deque[Change] = deque(maxlen=max(history, 1))
        self.log_start = 0
        self.subscribers: set[Subscriber] = set()
        self._sorted: list[str] | None = None

    def get(self, namespace: str, name: str) -> Entry | None:
        return self.objects.get(f"{namespace}/{name}" if namespace else name)

    def entries(self, namespace: str = "") -> list[Entry]:
        """Current objects in key order (namespace/name byte order, as etcd lists them)."""
        if namespace:
            scope = self.by_namespace.get(namespace)
            return [scope[n] for n in sorted(scope)] if scope else []
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        objects = self.objects
        return [objects[k] for k in self._sorted]

    def count(self, namespace: str = "") -> int:
        if namespace:
            return len(self.by_namespace.get(namespace, ()))
        return len(self.objects)

    def at(self, rv: int) -> dict[str, Entry]:
        """The objects as they were at ``rv`` (undoing the MVCC history after it)."""
        state = dict(self.objects)
        for change in reversed(self.mvcc):
            if change.rv <= rv:
                break
            key = change.entry.key
            if change.type == ADDED:
                state.pop(key, None)
            elif change.prev is not None:
                state[key] = change.prev
        return state

    def _put(self, entry: Entry) -> None:
        if entry.key not in self.objects:
            self._sorted = None
        self.objects[entry.key] = entry
        if entry.namespace:
            self.by_namespace.setdefault(entry.namespace, {})[entry.name] = entry

    def _drop(self, entry: Entry) -> None:
        del self.objects[entry.key]
        self._sorted = None
        if entry.namespace:
            scope = self.by_namespace[entry.namespace]
            del scope[entry.name]
            if not scope:
                del self.by_namespace[entry.namespace]

    def _record(self, change: Change) -> None:
        self.mvcc.append(change)
        if len(self.log) == self.log.maxlen:
            self.log_start = self.log[0].rv
        self.log.append(change)
        if self.subscribers:
            for subscriber in tuple(self.subscribers):
                subscriber.offer(change)
            change._line = None  # shared during the fan-out only; replays re-encode

    def since(self, rv: int) -> Iterator[Change]:
        """The changes after ``rv`` from the source a watch reads (cache or MVCC)."""
        source: Iterable[Change] = self.log if self.watch_cache else self.mvcc
        return (c for c in source if c.rv > rv)


class Storage:
    """Every table, the global resourceVersion, compaction and uid lookups."""

    def __init__(
        self, *, history: int = 10_000, revisions: int = 200_000, first_rv: int = 1
    ) -> None:
        self.history = history
        self.revisions = revisions
        self.tables: dict[str, Table] = {}
        self.rv = first_rv
        self.compacted = 0
        self.by_uid: dict[str, tuple[Table, Entry]] = {}
        self._listeners: list[Callable[[Table, Change], None]] = []
        self._counter = itertools.count(first_rv + 1)

    def table(self, name: str, *, watch_cache: bool = True, sort_keys: bool = False) -> Table:
        table = self.tables.get(name)
        if table is None:
            table = Table(name, history=self.history, watch_cache=watch_cache, sort_keys=sort_keys)
            self.tables[name] = table
        return table

    def drop_table(self, name: str) -> None:
        table = self.tables.pop(name, None)
        if table is not None:
            for entry in table.objects.values():
                self.by_uid.pop(entry.uid, None)

    def listen(self, callback: Callable[[Table, Change], None]) -> None:
        """Call ``callback`` after every write (the controllers' informer)."""
        self._listeners.append(callback)

    def next_rv(self) -> int:
        self.rv = next(self._counter)
        return self.rv

    def entry(self, table: Table, obj: dict[str, Any], rv: int | None = None) -> Entry:
        """Stamp ``obj`` with a new (or given) resourceVersion and encode it."""
        rv = self.next_rv() if rv is None else rv
        obj["metadata"]["resourceVersion"] = str(rv)
        return Entry(obj, encode(obj, table.sort_keys), rv)

    def create(self, table: Table, obj: dict[str, Any]) -> Entry:
        entry = self.entry(table, obj)
        table._put(entry)
        self.by_uid[entry.uid] = (table, entry)
        self._notify(table, Change(ADDED, entry, None))
        return entry

    def update(self, table: Table, prev: Entry, obj: dict[str, Any]) -> Entry:
        entry = self.entry(table, obj)
        table._put(entry)
        self.by_uid[entry.uid] = (table, entry)
        self._notify(table, Change(MODIFIED, entry, prev))
        return entry

    def delete(self, table: Table, prev: Entry) -> Entry:
        """Remove ``prev``; the DELETED change shows it at the deletion's resourceVersion."""
        obj = dict(prev.obj)
        obj["metadata"] = dict(prev.meta)
        entry = self.entry(table, obj)
        table._drop(prev)
        self.by_uid.pop(prev.uid, None)
        self._notify(table, Change(DELETED, entry, prev))
        return entry

    def _notify(self, table: Table, change: Change) -> None:
        table._record(change)
        if len(table.mvcc) > self.revisions:
            self.compact(table.mvcc[len(table.mvcc) // 2].rv)
        for listener in self._listeners:
            listener(table, change)

    def lookup_uid(self, uid: str) -> tuple[Table, Entry] | None:
        return self.by_uid.get(uid)

    def compact(self, rv: int | None = None) -> None:
        """Forget MVCC history up to ``rv`` (default: now), like an etcd compaction."""
        self.compacted = max(self.compacted, self.rv if rv is None else rv)
        for table in self.tables.values():
            keep = [c for c in table.mvcc if c.rv > self.compacted]
            table.mvcc = keep

    def expire_history(self) -> None:
        """Empty every watch cache: watches from any older resourceVersion get 410."""
        for table in self.tables.values():
            table.log.clear()
            table.log_start = self.rv
