"""Informer ingest, store memory and relist cost, through the real client and informer.

A local aiohttp server in a separate process plays the API server for ``/api/v1/pods``:

- a streaming list (``sendInitialEvents=true``) gets N ADDED events of a realistic ~3 KB Pod,
  the ``initial-events-end`` BOOKMARK, then N MODIFIED events of the same Pods (new
  resourceVersions), and stays open;
- a plain watch gets the same 2N+1 lines and ends;
- ``/api/v1/relist-<run>`` serves N Pods then a 410 ERROR, and the relist after it.

Measured in the same run, alternating, median of the repeats:

- **ingest**: events/s the informer applies to its store (parse metadata, index, one cheap
  handler, metrics), for the initial list and for the live MODIFIED events, against the raw
  decode rate of ``Client.watch`` alone over the same bytes (no store). Targets: live ingest
  >= 0.5x the raw rate and >= 15k events/s.
- **memory**: bytes the store holds per object (tracemalloc: ``Cached`` + raw bytes +
  indexes) against the raw JSON size (target <= 1.5x), and what a cache of decoded dicts
  would hold.
- **cold start** (``loadtest.bench._coldstore``): the coordinator's cache after the initial
  lists of 100,000 Fanouts and their 300,000 ConfigMaps, in fresh processes: RSS after the
  sync and its peak during it, and tracemalloc's bytes, per object against the raw JSON, and
  the whole process's peak RSS against issue 31's bound (1.5x the raw JSON + 100 MB).
- **relist**: seconds for an informer holding 50k Pods to relist 50k changed Pods after a
  410 (streaming list, diff, store swap), with the GC guard (collector paused, survivors
  frozen) and without it (collector left on).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson
import uvloop
from aiohttp import web

from loadtest.bench._coldstore import MB, cold_start
from loadtest.bench._report import header, row
from loadtest.bench._served import served
from loadtest.bench._streaming import serve, stream
from loadtest.bench.watch_decode import pod
from manager.informers.gcguard import GcGuard
from manager.informers.informer import Informer, InformerOptions
from manager.informers.store import Cached, Store
from proto.kube.client import Client
from proto.kube.cluster import ClusterConfig
from proto.kube.resources import Resource
from proto.kube.session import Session
from proto.kube.watch import LineSplitter, decode_event
from proto.runtime.logs import configure

PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
GONE = {"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410}


def _line(kind: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


def _pods(count: int, first_rv: int) -> list[dict[str, Any]]:
    pods = [pod(i, large=False) for i in range(count)]
    for i, p in enumerate(pods):
        p["metadata"]["resourceVersion"] = str(first_rv + i)
    return pods


def _bookmark(rv: int, *, initial_end: bool) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return _line("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": meta})


def ingest_stream(count: int) -> bytes:
    """N ADDED, the initial-events-end bookmark, N MODIFIED: RVs 1..2N."""
    added = b"".join(_line("ADDED", p) for p in _pods(count, 1))
    modified = b"".join(_line("MODIFIED", p) for p in _pods(count, count + 1))
    return added + _bookmark(count, initial_end=True) + modified


def relist_streams(count: int) -> tuple[bytes, bytes]:
    """A first streaming list ending in 410, and the relist after it with every Pod changed."""
    first = b"".join(_line("ADDED", p) for p in _pods(count, 1))
    first += _bookmark(count, initial_end=True) + _line("ERROR", GONE)
    second = b"".join(_line("ADDED", p) for p in _pods(count, count + 1))
    return first, second + _bookmark(2 * count, initial_end=True)


def _serve(port_queue: Any, count: int, relist_count: int) -> None:
    ingest = ingest_stream(count)
    relists = relist_streams(relist_count)
    served: dict[str, int] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        # /api/v1/pods: the ingest stream; /api/v1/relist-<run>: that run's 410 then relist.
        resource = request.match_info["resource"]
        hold = request.query.get("sendInitialEvents") == "true"
        if resource.startswith("relist-"):
            n = served[resource] = served.get(resource, -1) + 1
            body = relists[min(n, 1)]
            hold = hold and n > 0
        else:
            body = ingest
        return await stream(request, body, hold=hold)

    serve(port_queue, "/api/v1/{resource}", handle, run=uvloop.run)


class _Counter:
    """The cheapest handler: counts calls; remembers when the first one after ``mark()`` came."""

    def __init__(self) -> None:
        self.calls = 0
        self._marked = False
        self.first_after_mark = 0.0

    def mark(self) -> None:
        self._marked = True

    def __call__(self, type: str, old: Cached | None, new: Cached | None, initial: bool) -> None:
        self.calls += 1
        if self._marked:
            self._marked = False
            self.first_after_mark = time.perf_counter()


async def _informer_rates(url: str, count: int) -> tuple[float, float]:
    """(initial-list events/s, live events/s) of one informer over the ingest stream."""
    async with Session(ClusterConfig(server=url), qps=0) as session:
        informer = Informer(Client(session), PODS, gc_guard=GcGuard())
        informer.add_handler(_Counter())
        started = time.perf_counter()
        task = asyncio.create_task(informer.run())
        await informer.wait_synced()
        synced = time.perf_counter()
        assert await informer.wait_for(str(2 * count), timeout=600)
        done = time.perf_counter()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return count / (synced - started), count / (done - synced)


async def _raw_rate(url: str, count: int) -> float:
    async with Session(ClusterConfig(server=url), qps=0) as session:
        started = time.perf_counter()
        seen = 0
        async for _event in Client(session).watch(PODS, timeout_seconds=600):
            seen += 1
        assert seen == 2 * count + 1, seen
        return seen / (time.perf_counter() - started)


async def _ingest(url: str, count: int, repeat: int) -> tuple[float, float, float]:
    await _raw_rate(url, count)  # warm up both paths
    await _informer_rates(url, count)
    initial: list[float] = []
    live: list[float] = []
    raw: list[float] = []
    for _ in range(repeat):
        raw.append(await _raw_rate(url, count))
        first, second = await _informer_rates(url, count)
        initial.append(first)
        live.append(second)
        gc.collect()
    return statistics.median(initial), statistics.median(live), statistics.median(raw)


class _LeaveOn:
    """A collector policy that pauses nothing and freezes nothing (the 'without' case)."""

    def isenabled(self) -> bool:
        return gc.isenabled()

    def enable(self) -> None:
        pass

    def disable(self) -> None:
        pass

    def freeze(self) -> None:
        pass


async def _relist_seconds(url: str, run: str, guard: GcGuard, count: int) -> float:
    """Seconds from the 410 until the relist of every (changed) Pod is in the store."""
    async with Session(ClusterConfig(server=url), qps=0) as session:
        informer = Informer(
            Client(session),
            Resource("", "v1", f"relist-{run}", "Pod", namespaced=True),
            options=InformerOptions(backoff_initial=0.001, backoff_cap=0.002),
            gc_guard=guard,
        )
        counter = _Counter()
        informer.add_handler(counter)
        task = asyncio.create_task(informer.run())
        await informer.wait_synced()
        counter.mark()  # the first stream ends in 410; the relist's first event marks the start
        assert await informer.wait_for(str(2 * count), timeout=600)
        done = time.perf_counter()
        started = counter.first_after_mark
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return done - started


async def _relists(url: str, count: int, repeat: int) -> tuple[float, float]:
    with_guard: list[float] = []
    without: list[float] = []
    for i in range(repeat):
        for label, guard, results in (
            ("off", GcGuard(_LeaveOn()), without),
            ("on", GcGuard(), with_guard),
        ):
            gc.unfreeze()
            gc.collect()
            results.append(await _relist_seconds(url, f"{label}-{i}", guard, count))
    gc.unfreeze()
    return statistics.median(with_guard), statistics.median(without)


def load_store(
    lines: list[bytes], then: Callable[[Store], object] = lambda _: None
) -> tuple[Store, float, float]:
    """(store, bytes held per object, raw JSON bytes per object) of ``lines`` decoded one by
    one into a store, and ``then(store)`` (what builds its indexes)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = Store()
    raw = 0
    for line in lines:
        event = decode_event(line)
        store.upsert(Cached.from_object(event.object, event.raw))
        raw += len(event.raw)
        del event
    then(store)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return store, held / len(lines), raw / len(lines)


def store_memory(count: int) -> tuple[float, float, float]:
    """(store bytes per object, dict-cache bytes per object, raw JSON bytes per object)."""
    stream = b"".join(_line("ADDED", p) for p in _pods(count, 1))
    lines = [bytes(line) for line in LineSplitter().feed(stream)]
    store, held, raw = load_store(lines)
    del store
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    dicts = [orjson.loads(line)["object"] for line in lines]
    dict_held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del dicts
    return held, dict_held / count, raw


def report_cold_start(parents: int) -> None:
    """The coordinator's cache after a cold start of ``parents`` Fanouts and their ConfigMaps
    (``loadtest.bench._coldstore``), per cached object against its raw JSON."""
    plain, traced = cold_start(parents)
    raw = plain.raw / plain.objects
    header(
        f"coordinator cache after a cold start: {parents} Fanouts + {3 * parents} ConfigMaps "
        f"({plain.objects} objects, {plain.raw / MB:.1f} MB of raw JSON, fresh processes)"
    )
    row(
        "RSS after the sync, per object",
        (plain.rss_after - plain.rss_before) / plain.objects,
        "bytes",
        baseline=raw,
        target="<= 1.5x",
    )
    row(
        "peak RSS during the sync, per object",
        (plain.rss_peak - plain.rss_before) / plain.objects,
        "bytes",
        baseline=raw,
    )
    row(
        "tracemalloc after the sync, per object",
        traced.traced / traced.objects,
        "bytes",
        baseline=raw,
    )
    row("baseline: raw JSON bytes", raw, "bytes")
    row(
        "process peak RSS (issue 31: <= 1.5x raw + 100 MB)",
        plain.rss_peak / MB,
        "MB",
        baseline=(1.5 * plain.raw + 100 * MB) / MB,
    )
    row("cold-start ingest (both informers)", plain.objects / plain.seconds, "objects/s")


def main(quick: bool) -> None:
    configure(fmt="console", level="warning")  # the informers' info lines are not results
    count = 2000 if quick else 20000
    relist_count = 2000 if quick else 50000
    repeat = 1 if quick else 5
    with served(_serve, count, relist_count, timeout=300) as url:
        size = len(orjson.dumps(pod(0, large=False)))
        header(
            f"informer ingest, {size / 1024:.1f} KB Pods ({count} initial + {count} live "
            f"events, uvloop, server in another process, median of {repeat})"
        )
        initial, live, raw = uvloop.run(_ingest(url, count, repeat))
        row(
            "informer: live events into the store",
            live,
            "events/s",
            baseline=raw,
            target=">= 15k/s and >= 0.5x",
        )
        row("informer: initial-list events into the store", initial, "events/s", baseline=raw)
        row("baseline: Client.watch decode alone (no store)", raw, "events/s")

        header(f"store memory per object ({count} Pods, tracemalloc)")
        held, dict_held, raw_size = store_memory(count)
        row(
            "store: Cached + raw bytes + indexes",
            held,
            "bytes",
            baseline=raw_size,
            target="<= 1.5x",
        )
        row("a cache of decoded dicts (for comparison)", dict_held, "bytes", baseline=raw_size)
        row("baseline: raw JSON bytes", raw_size, "bytes")

        report_cold_start(2000 if quick else 100_000)

        relist_repeat = 1 if quick else 3
        header(
            f"relist after 410 of {relist_count} changed Pods into a store of "
            f"{relist_count} (median of {relist_repeat})"
        )
        on, off = uvloop.run(_relists(url, relist_count, relist_repeat))
        row("relist with the GC guard (paused, then frozen)", on, "s", baseline=off)
        row("baseline: relist with the collector left on", off, "s")
