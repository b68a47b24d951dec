"""The coordinator's cache after a cold start of the fanout job: resident memory per object.

A stand-in API server in another process streams N Fanouts and their 3N ConfigMaps (the
scale benchmark's shapes, ``loadtest.bench._scale_objects``: managedFields, uid,
creationTimestamp, the children's ownerReference and last-applied annotation) as two
streaming lists that stay open. A fresh process, set up as the coordinator is
(``gctune.settle()``, the process's ``GcGuard``), runs one real ``Informer`` per resource
through the real client until both are synced, asks the ConfigMaps' store for the children
of a parent (so it builds its indexes, as the first sync of a parent does), and reports:

- **RSS**: the process's resident memory after the sync and its peak during it (``VmRSS``,
  ``VmHWM``), less what it held before the informers started, per cached object;
- **tracemalloc** (a second fresh process, the same feed, tracing on): the bytes Python holds
  after the sync, per cached object. RSS less this is what the allocator keeps beyond the
  live objects (fragmentation, free lists, arenas kept alive by a few survivors);
- the raw JSON bytes the stores hold (``len(Cached.raw)``), which both are set against, and
  the process's whole RSS against issue 31's bound: 1.5x the raw JSON + 100 MB.

The numbers are per fresh process, so runs compare; the load and the server's writes share
the machine, so the ingest rate here is a cross-check, not the informer benchmark's figure.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import random
import time
import tracemalloc
from dataclasses import dataclass
from typing import Any

import uvloop
from aiohttp import web

from loadtest.bench._proc import memory, reset_peak
from loadtest.bench._scale_objects import API_VERSION, configmap, fanout, watch_line
from loadtest.bench._served import served
from loadtest.bench._streaming import serve, stream
from manager.informers.informer import Informer
from proto.kube.client import Client
from proto.kube.cluster import ClusterConfig
from proto.kube.resources import Resource
from proto.kube.session import Session
from proto.runtime import gctune
from proto.runtime.logs import configure

NAMESPACE = "bench"
CHILDREN = 3
FANOUTS = Resource("bench.metashard.io", "v1", "fanouts", "Fanout", namespaced=True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
MB = 1 << 20


def _bookmark(kind: str, rv: int) -> bytes:
    meta = {"resourceVersion": str(rv), "annotations": {"k8s.io/initial-events-end": "true"}}
    return watch_line("BOOKMARK", {"kind": kind, "apiVersion": API_VERSION, "metadata": meta})


def bodies(parents: int) -> dict[str, bytes]:
    """The two streaming lists by resource plural: every object ADDED, then the bookmark."""
    rng = random.Random(31)
    fanouts: list[bytes] = []
    children: list[bytes] = []
    for i in range(parents):
        parent = fanout(i, NAMESPACE, rng)
        fanouts.append(watch_line("ADDED", parent))
        children.extend(watch_line("ADDED", configmap(parent, k)) for k in range(CHILDREN))
    end = 1_000_000 + 4 * parents
    fanouts.append(_bookmark("Fanout", end))
    children.append(_bookmark("ConfigMap", end))
    return {"fanouts": b"\n".join(fanouts) + b"\n", "configmaps": b"\n".join(children) + b"\n"}


def _serve(port_queue: Any, parents: int) -> None:
    served = bodies(parents)

    async def handle(request: web.Request) -> web.StreamResponse:
        return await stream(request, served[request.match_info["plural"]], hold=True)

    serve(port_queue, "/{prefix:.*}/namespaces/bench/{plural}", handle, run=uvloop.run)


@dataclass(frozen=True, slots=True)
class Load:
    """One cold start, bytes: RSS before the informers, after the sync, and the peak between
    (0 where not readable); what tracemalloc traced after the sync (0 when not tracing)."""

    objects: int
    raw: int
    rss_before: int
    rss_after: int
    rss_peak: int
    traced: int
    seconds: float


async def _load(url: str, *, traced: bool) -> Load:
    async with Session(ClusterConfig(server=url), qps=0) as session:
        client = Client(session)
        informers = [Informer(client, r, namespace=NAMESPACE) for r in (FANOUTS, CONFIGMAPS)]
        gc.collect()
        if traced:
            tracemalloc.start()
        before = memory(os.getpid())
        reset_peak(os.getpid())
        started = time.perf_counter()
        tasks = [asyncio.create_task(informer.run()) for informer in informers]
        for informer in informers:
            await informer.wait_synced()
        seconds = time.perf_counter() - started
        # The first sync of a parent asks for its children: the ConfigMaps' indexes get built.
        informers[1].store.owned_by("")
        held = tracemalloc.get_traced_memory()[0] if traced else 0
        tracemalloc.stop()
        after = memory(os.getpid())
        stores = [informer.store for informer in informers]
        loaded = Load(
            objects=sum(len(store) for store in stores),
            raw=sum(len(obj.raw) for store in stores for obj in store),
            rss_before=before.rss if before else 0,
            rss_after=after.rss if after else 0,
            rss_peak=after.peak if after else 0,
            traced=held,
            seconds=seconds,
        )
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return loaded


def _measure(url: str, traced: bool, results: Any) -> None:
    configure(fmt="console", level="warning")
    gctune.settle()
    results.put(uvloop.run(_load(url, traced=traced)))


def cold_start(parents: int) -> tuple[Load, Load]:
    """(the untraced load, the traced load), each in a fresh process, of ``parents`` Fanouts
    and their ConfigMaps."""
    ctx = multiprocessing.get_context("spawn")
    with served(_serve, parents, timeout=1200) as url:
        loads: list[Load] = []
        for traced in (False, True):
            results = ctx.Queue()
            child = ctx.Process(target=_measure, args=(url, traced, results))
            child.start()
            loads.append(results.get(timeout=1800))
            child.join(timeout=60)
        return loads[0], loads[1]
