"""WATCH: streaming ADDED/MODIFIED/DELETED/BOOKMARK/ERROR events over a chunked response.

Invariants:
- A watcher subscribes to its table in the same step as it reads its starting state (the
  initial snapshot or the history replay): no change is lost or delivered twice.
- Events arrive in resourceVersion order; bytes are shared across watchers when the served
  shape is the stored one (``Change.line``).
- Selector watches follow the watch cache: an object that stops matching yields DELETED with
  its previous state at the new resourceVersion; one that starts matching yields ADDED.
- ``resourceVersion`` ""/"0" (or ``sendInitialEvents=true``) first sends the current state as
  ADDED events, then, with ``allowWatchBookmarks``, a BOOKMARK annotated
  ``k8s.io/initial-events-end``. A start below the history window is HTTP 200 + one ERROR
  event (410 Expired), then the stream ends.
- With bookmarks allowed, a BOOKMARK goes out every ``bookmark_interval`` and 2 s before the
  deadline; the stream ends at ``timeoutSeconds`` (default 30-60 min), on client disconnect,
  when dropped by a fault, or when the watcher falls ``queue_limit`` events behind.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from loadtest.apiserver import errors, render
from loadtest.apiserver.listing import ListOptions, parse_rv
from loadtest.apiserver.registry import ResourceType
from loadtest.apiserver.storage import ADDED, DELETED, Change, Entry, Storage, Table
from loadtest.apiserver.timers import call_later
from proto.runtime.clock import Clock

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class Watcher:
    """One watch stream's subscription and outgoing queue."""

    def __init__(
        self,
        rt: ResourceType,
        namespace: str,
        opts: ListOptions,
        *,
        min_rv: int,
        queue_limit: int,
    ) -> None:
        self.rt = rt
        self.namespace = namespace
        self.opts = opts
        self.min_rv = min_rv
        self.queue_limit = queue_limit
        self.native = render.native(rt)
        self.queue: deque[bytes] = deque()
        self.ready = asyncio.Event()
        self.done = False
        self.aborted = False

    def push(self, line: bytes) -> None:
        if self.done:
            return
        self.queue.append(line)
        if len(self.queue) > self.queue_limit:
            self.close(abort=True)
        self.ready.set()

    def close(self, *, abort: bool = False) -> None:
        self.done = True
        self.aborted = self.aborted or abort
        self.ready.set()

    def _line(self, change: Change, type_: str, entry: Entry) -> bytes:
        if self.native and type_ == change.type and entry is change.entry:
            return change.line()
        return render.event_line(self.rt, type_, entry)

    def offer(self, change: Change) -> None:
        if change.rv <= self.min_rv:
            return
        entry = change.entry
        if self.namespace and entry.namespace != self.namespace:
            return
        opts = self.opts
        if not opts.filtered:
            self.push(self._line(change, change.type, entry))
            return
        if change.type == ADDED:
            if opts.matches(entry):
                self.push(self._line(change, ADDED, entry))
            return
        assert change.prev is not None
        was = opts.matches(change.prev)
        if change.type == DELETED:
            if was:
                self.push(self._line(change, DELETED, entry))
            return
        now = opts.matches(entry)
        if now:
            self.push(self._line(change, change.type if was else ADDED, entry))
        elif was:
            if self.native:
                self.push(change.prev_deleted_line(self.rt.custom))
            else:
                obj = dict(render.view_dict(self.rt, change.prev.obj))
                obj["metadata"] = {**obj["metadata"], "resourceVersion": str(change.rv)}
                self.push(b'{"type":"DELETED","object":%s}\n' % orjson.dumps(obj))


def bookmark(rt: ResourceType, rv: int, *, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    obj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
    return b'{"type":"BOOKMARK","object":%s}\n' % orjson.dumps(obj)


def error_line(err: errors.ApiError) -> bytes:
    return b'{"type":"ERROR","object":%s}\n' % orjson.dumps(err.status())


class WatchHub:
    """Starts watches and keeps the set of open ones (for faults and shutdown)."""

    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        *,
        bookmark_interval: float = 60.0,
        queue_limit: int = 100_000,
    ) -> None:
        self.storage = storage
        self.clock = clock
        self.bookmark_interval = bookmark_interval
        self.queue_limit = queue_limit
        self.active: set[Watcher] = set()

    def drop_all(self) -> int:
        """Cut every open watch connection (clients see the stream break)."""
        watchers = list(self.active)
        for watcher in watchers:
            watcher.close(abort=True)
        return len(watchers)

    def close_all(self) -> None:
        for watcher in list(self.active):
            watcher.close()

    def _start(
        self, rt: ResourceType, table: Table, namespace: str, opts: ListOptions
    ) -> tuple[Watcher, list[bytes]]:
        """Subscribe and compute what to send first. Raises ApiError (410) for old RVs."""
        storage = self.storage
        initial = opts.send_initial is True or (opts.send_initial is None and opts.rv in ("", "0"))
        min_rv = 0
        if not initial and opts.rv not in ("", "0"):
            min_rv = parse_rv(opts.rv)
            if table.watch_cache:
                if min_rv < table.log_start:
                    raise errors.expired(f"too old resource version: {min_rv} ({table.log_start})")
            elif min_rv < max(storage.compacted, table.log_start):
                raise errors.expired("The resourceVersion for the provided watch is too old.")
        watcher = Watcher(rt, namespace, opts, min_rv=min_rv, queue_limit=self.queue_limit)
        first: list[bytes] = []
        if initial:
            watcher.min_rv = storage.rv
            for entry in table.entries(namespace):
                if opts.matches(entry):
                    first.append(render.event_line(rt, ADDED, entry))
            if opts.bookmarks:
                first.append(bookmark(rt, storage.rv, initial_end=True))
        elif min_rv < storage.rv:
            replay = Watcher(rt, namespace, opts, min_rv=min_rv, queue_limit=1 << 62)
            for change in table.since(min_rv):
                replay.offer(change)
            first.extend(replay.queue)
            watcher.min_rv = storage.rv
        table.subscribers.add(watcher)
        return watcher, first

    async def serve(
        self,
        request: web.BaseRequest,
        rt: ResourceType,
        table: Table,
        namespace: str,
        opts: ListOptions,
        *,
        transform: Callable[[bytes], bytes] | None = None,
    ) -> web.StreamResponse:
        """Stream the watch; ``transform`` rewrites each event line (Tables) if given."""
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            watcher, first = self._start(rt, table, namespace, opts)
        except errors.ApiError as err:
            if err.code != 410:
                raise
            await response.prepare(request)
            await response.write(error_line(err))
            await response.write_eof()
            return response
        timers: list[asyncio.Task[None]] = []
        self.active.add(watcher)
        try:
            await response.prepare(request)
            watcher.queue_limit += len(first)  # the limit is on live events falling behind
            watcher.queue.extend(first)
            watcher.ready.set()
            timeout = opts.timeout if opts.timeout else 1800.0 * (1 + random.random())
            timers.append(call_later(self.clock, timeout, watcher.close))
            if opts.bookmarks:
                self._schedule_bookmarks(watcher, timeout, timers)
            await self._pump(watcher, response, transform)
            if not watcher.aborted:
                await response.write_eof()
            elif request.transport is not None:
                request.transport.abort()
        except ConnectionResetError:
            pass
        finally:
            for timer in timers:
                timer.cancel()
            table.subscribers.discard(watcher)
            self.active.discard(watcher)
        return response

    def _schedule_bookmarks(
        self, watcher: Watcher, timeout: float, timers: list[asyncio.Task[None]]
    ) -> None:
        def send() -> None:
            if self.storage.rv >= watcher.min_rv:
                watcher.push(bookmark(watcher.rt, self.storage.rv))

        def periodic() -> None:
            send()
            timers.append(call_later(self.clock, self.bookmark_interval, periodic))

        timers.append(call_later(self.clock, self.bookmark_interval, periodic))
        if timeout > 2:
            timers.append(call_later(self.clock, timeout - 2, send))

    async def _pump(
        self,
        watcher: Watcher,
        response: web.StreamResponse,
        transform: Callable[[bytes], bytes] | None,
    ) -> None:
        while True:
            await watcher.ready.wait()
            watcher.ready.clear()
            if watcher.aborted:
                return
            if watcher.queue:
                lines = watcher.queue if transform is None else map(transform, watcher.queue)
                data = b"".join(lines)
                watcher.queue.clear()
                await response.write(data)
            if watcher.done:
                return
