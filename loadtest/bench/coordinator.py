"""The coordinator at scale, in this process: memory per cached object, and a fresh key behind
a resync.

1. **Memory per cached object** (tracemalloc), for the scale benchmark's objects
   (``loadtest.bench._scale_objects``: N Fanout parents, 3 ConfigMaps each), decoded from
   watch lines one by one as the informer does: what each store holds per object (``Cached``,
   raw bytes, what is shared, indexes; the ConfigMaps' indexes built as the first snapshot
   builds them) against the raw JSON bytes, and what the key index (``KeyIndex``, the slots
   of the keys included) adds per parent. Target: everything together <= 1.5x the JSON (the
   issue's "coordinator RSS <= 1.5x the raw JSON it caches + 100 MB").
2. **A LIVE key behind a resync** (the real ``Term``, ipc, 2 worker links in this process,
   ``loadtest.bench._term``): 100,000 LOW keys are pushed in one loop turn (as a full resync
   does), then, one turn later, one LIVE key; measured from that push until a worker link
   has received it. Baseline: the same LIVE key with nothing queued. Also printed: how long
   the LOW keys take to be received. The worker links read at once, and answer every KEYS
   with a HEARTBEAT saying their queue is empty (a worker that keeps up).
3. **Coordinator CPU per FETCH and per event** (process time, the real ``Term`` whose send
   loop encodes every message, no socket): a FETCH of every parent answered (snapshot built,
   encoded), against encoding the same SNAPSHOT; a MODIFIED event of every ConfigMap and of
   every Fanout decoded, cached and routed (its key's KEYS encoded), against decoding the
   same line. And what that makes per reconcile of the scale benchmark's cold start.
"""

from __future__ import annotations

import asyncio
import gc
import random
import statistics
import time
import tracemalloc
from dataclasses import dataclass
from typing import cast

import orjson
import uvloop

from loadtest.bench._report import header, row
from loadtest.bench._scale_objects import configmap, fanout, watch_line
from loadtest.bench._term import (
    CONFIGMAPS,
    Informers,
    assigned,
    composite_view,
    running_term,
    term_over,
)
from loadtest.bench.informer import load_store
from manager.informers.store import Cached, Store
from manager.link.router import RouterLink, SendResult
from manager.routing.router import KeyIndex, Router
from proto.kube.resources import Resource
from proto.kube.watch import decode_event
from proto.runtime.logs import configure
from proto.wire import (
    SLOT_COUNT,
    Fetch,
    Heartbeat,
    Keys,
    Message,
    ParentKey,
    Priority,
    Snapshot,
    encode,
    slot_of,
)
from workers.link.dealer import DealerLink

FANOUTS = Resource("bench.metashard.io", "v1", "fanouts", "Fanout", True, subresources=("status",))
NAMESPACE = "scale-bench"


# --- 1. memory ---------------------------------------------------------------------------------


class _NoSink:
    def push(self, key: ParentKey, priority: Priority) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Memory:
    """Bytes per object held, and raw JSON bytes per object."""

    parent_held: float
    parent_raw: float
    child_held: float
    child_raw: float
    key_index: float  # per parent

    @property
    def per_object(self) -> tuple[float, float]:
        """(held, raw JSON) per object, all together."""
        held = self.parent_held + self.key_index + 3 * self.child_held
        return held / 4, (self.parent_raw + 3 * self.child_raw) / 4


def memory(n: int) -> Memory:
    """What the stores and the key index hold for ``n`` Fanouts x 3 ConfigMaps."""
    rng = random.Random(31)
    parents = [fanout(i, NAMESPACE, rng) for i in range(n)]
    parent_lines = [watch_line("ADDED", p) for p in parents]
    child_lines = [watch_line("ADDED", configmap(p, k)) for p in parents for k in range(3)]
    del parents
    view = composite_view(FANOUTS)
    parent_store, parent_held, parent_raw = load_store(parent_lines)
    first = next(iter(parent_store))
    child_store, child_held, child_raw = load_store(
        child_lines, lambda store: view.children_of(first, CONFIGMAPS, store)
    )
    informers = Informers({"fanouts": parent_store, "configmaps": child_store})
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    keys = KeyIndex()
    Router(sink=_NoSink(), keys=keys, stores=informers).controllers_changed([view], [view])
    key_held = (tracemalloc.get_traced_memory()[0] - before) / n
    tracemalloc.stop()
    return Memory(parent_held, parent_raw, child_held, child_raw, key_held)


# --- 2. a LIVE key behind a resync -------------------------------------------------------------


LIVE_KEY = ParentKey("CompositeController", "bench", "fanouts.bench.metashard.io", "x", "live")


class _Arrivals:
    """When the LIVE key, and the last of the LOW keys expected, reached a worker link."""

    def __init__(self) -> None:
        self.live = self.low = 0.0
        self._low_expected = self._low_seen = 0
        self._done = asyncio.Event()

    def expect(self, low: int) -> None:
        self.live = self.low = 0.0
        self._low_expected, self._low_seen = low, 0
        self._done.clear()

    async def drain(self, link: DealerLink) -> None:
        while True:
            msg = await link.recv()
            if not isinstance(msg, Keys):
                continue
            now = time.perf_counter()
            if msg.priority is Priority.LIVE and LIVE_KEY in msg.keys:
                self.live = now
            else:
                self._low_seen += len(msg.keys)
                if self._low_seen >= self._low_expected:
                    self.low = now
                # A worker that keeps up: its queue is empty whenever it says.
                await link.send(Heartbeat(msg.epoch, 0, 0))
            if self.live and (self.low or not self._low_expected):
                self._done.set()

    async def wait(self) -> None:
        await self._done.wait()


async def live_latency(low: int, repeat: int) -> tuple[float, float, float]:
    """(median seconds until the LIVE key arrives behind ``low`` LOW keys, the same with
    nothing queued, median seconds until every LOW key arrived)."""
    parent_store = Store()
    rng = random.Random(7)
    for i in range(64):
        parent_store.upsert(Cached.from_object(fanout(i, NAMESPACE, rng), b"{}"))
    stores = {"fanouts": parent_store, "configmaps": Store()}
    async with running_term(stores, parent=FANOUTS, workers=2) as (term, links):
        arrivals = _Arrivals()
        drains = [asyncio.create_task(arrivals.drain(link)) for link in links]
        behind: list[float] = []
        alone: list[float] = []
        low_done: list[float] = []
        try:
            for run in range(repeat):
                for queued, results in ((low, behind), (0, alone)):
                    keys = [ParentKey(*LIVE_KEY[:4], f"low-{run}-{i}") for i in range(queued)]
                    for key in keys:
                        term.keys.add(key)  # parents the router indexed, as a resync's are
                    arrivals.expect(queued)
                    started = time.perf_counter()
                    for key in keys:
                        term.dispatch.push(key, Priority.LOW)
                    await asyncio.sleep(0)  # the LOW keys are queued as KEYS messages
                    pushed = time.perf_counter()
                    term.dispatch.push(LIVE_KEY, Priority.LIVE)
                    await asyncio.wait_for(arrivals.wait(), 120)
                    results.append(arrivals.live - pushed)
                    if queued:
                        low_done.append(arrivals.low - started)
        finally:
            for task in drains:
                task.cancel()
            await asyncio.gather(*drains, return_exceptions=True)
    return statistics.median(behind), statistics.median(alone), statistics.median(low_done)


# --- 3. CPU per FETCH and per event ----------------------------------------------------------


class _EncodingLink:
    """The term's link, minus the socket: each message is encoded as ``RouterLink.send`` does,
    then dropped; ``sent`` counts them by type, ``snapshots`` keeps the SNAPSHOTs."""

    def __init__(self) -> None:
        self.sent: dict[type, int] = {}
        self.snapshots: list[Snapshot] = []
        self._changed = asyncio.Event()

    def bind(self, endpoint: str) -> str:
        return endpoint

    def close(self) -> None:
        pass

    async def send(self, route: bytes, msg: Message) -> SendResult:
        encode(msg)
        self.sent[type(msg)] = self.sent.get(type(msg), 0) + 1
        if isinstance(msg, Snapshot):
            self.snapshots.append(msg)
        self._changed.set()
        return SendResult.SENT

    async def until(self, kind: type, count: int) -> None:
        while self.sent.get(kind, 0) < count:
            self._changed.clear()
            await self._changed.wait()


@dataclass(frozen=True, slots=True)
class Cpu:
    """Microseconds of CPU per FETCH answered (snapshot built and encoded), per ConfigMap and
    per Fanout watch event (decoded, cached, routed, its key's KEYS encoded); and their
    baselines: encoding the same SNAPSHOT, decoding the same event line."""

    fetch: float
    encode: float
    child_event: float
    parent_event: float
    decode: float

    @property
    def reconcile(self) -> float:
        """Per reconcile of the scale benchmark's cold start: 2 FETCHes, the events of its
        3 children and of its status."""
        return 2 * self.fetch + 3 * self.child_event + self.parent_event


def _per(count: int, started: float) -> float:
    """Microseconds of this process's CPU per item since ``started`` (``process_time``)."""
    return (time.process_time() - started) / count * 1e6


async def cpu(n: int) -> Cpu:
    """Coordinator CPU per FETCH and per event, over ``n`` Fanouts x 3 ConfigMaps (the term's
    send loop runs; its link encodes and drops)."""
    rng = random.Random(5)
    parents = [fanout(i, NAMESPACE, rng) for i in range(n)]
    children = [configmap(p, k) for p in parents for k in range(3)]
    stores = {"fanouts": Store(), "configmaps": Store()}
    for name, objects in (("fanouts", parents), ("configmaps", children)):
        for obj in objects:
            stores[name].upsert(Cached.from_object(obj, orjson.dumps(obj)))
    link = _EncodingLink()
    term = term_over(stores, parent=FANOUTS, link=cast(RouterLink, link))
    assigned(term, ["w0", "w1"])
    sender = asyncio.create_task(term.sessions.send())
    try:
        keys = term.keys.keys_of(range(SLOT_COUNT))
        fetches = [Fetch(1, i, key, {}) for i, key in enumerate(keys)]
        owners = [term.membership.owner(slot_of(key)) or "" for key in keys]
        gc.collect()
        started = time.process_time()
        for i, (owner, msg) in enumerate(zip(owners, fetches, strict=True)):
            term.snapshots.fetch(owner, msg)
            if i % 64 == 63:
                await asyncio.sleep(0)  # the send loop takes its turn, as with FETCHes arriving
        await link.until(Snapshot, len(fetches))
        per_fetch = _per(len(fetches), started)
        started = time.process_time()
        for snapshot in link.snapshots:
            encode(snapshot)
        per_encode = _per(len(link.snapshots), started)

        per_event: list[float] = []
        decoded: list[float] = []
        for resource, objects in ((CONFIGMAPS, children), (FANOUTS, parents)):
            lines = []
            for obj in objects:
                meta = obj["metadata"]
                meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 10_000_000)
                lines.append(watch_line("MODIFIED", obj))
            store, handler = stores[resource.name], term.router.handler(resource)
            keys_sent = link.sent.get(Keys, 0)
            gc.collect()
            started = time.process_time()
            for i, line in enumerate(lines):
                event = decode_event(line)
                new = Cached.from_object(event.object, event.raw)
                handler("MODIFIED", store.upsert(new), new, False)
                if i % 256 == 255:
                    await asyncio.sleep(0)  # a chunk of the watch stream
            await asyncio.sleep(0)
            await link.until(Keys, keys_sent + 1)
            per_event.append(_per(len(lines), started))
            started = time.process_time()
            for line in lines:
                decode_event(line)
            decoded.append(_per(len(lines), started))
        return Cpu(per_fetch, per_encode, per_event[0], per_event[1], statistics.mean(decoded))
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)


def main(quick: bool) -> None:
    configure(fmt="console", level="warning")  # the term's info lines are not results
    n = 2_000 if quick else 20_000
    m = memory(n)
    header(f"memory per cached object, {n} Fanouts x 3 ConfigMaps (tracemalloc)")
    row("Fanout parent: store", m.parent_held, "bytes", baseline=m.parent_raw, vs="its JSON")
    row(
        "ConfigMap child: store, indexes built",
        m.child_held,
        "bytes",
        baseline=m.child_raw,
        vs="its JSON",
    )
    row("key index, per parent", m.key_index, "bytes")
    held, raw = m.per_object
    row(
        "all: stores + key index, per object",
        held,
        "bytes",
        baseline=raw,
        vs="the JSON",
        target="<= 1.5x",
    )
    row("baseline: raw JSON, per object", raw, "bytes")

    low = 10_000 if quick else 100_000
    repeat = 1 if quick else 5
    behind, alone, low_done = uvloop.run(live_latency(low, repeat))
    header(f"a LIVE key pushed after {low:,} LOW keys (real Term, ipc, 2 worker links)")
    row(
        f"LIVE key received, {low:,} LOW keys queued before it",
        behind * 1000,
        "ms",
        baseline=alone * 1000,
        vs="nothing queued",
    )
    row("baseline: LIVE key received, nothing queued", alone * 1000, "ms")
    row(f"all {low:,} LOW keys received", low_done * 1000, "ms")

    c = uvloop.run(cpu(n))
    header(f"coordinator CPU, {n} Fanouts x 3 ConfigMaps (process time; send loop encodes)")
    row("FETCH answered: SNAPSHOT built and encoded", c.fetch, "us", baseline=c.encode)
    row("baseline: encoding the same SNAPSHOT", c.encode, "us")
    row("ConfigMap event: decoded, cached, routed, KEYS", c.child_event, "us", baseline=c.decode)
    row("Fanout event: decoded, cached, routed, KEYS", c.parent_event, "us", baseline=c.decode)
    row("baseline: decoding the event line", c.decode, "us")
    row("per reconcile: 2 FETCHes, 3 ConfigMap + 1 Fanout events", c.reconcile, "us")
