"""The sharded runtime: routing and snapshot rates, reconciles/s with 1 and 2 workers, failover.

1. Coordinator routing (in process, the real ``Term`` on ipc sockets with two worker links):
   informer events -> parent keys -> KEYS received by the workers, in events/s; FETCH ->
   SNAPSHOT round trips/s (64 in flight, a parent with three ConfigMap children). Baseline:
   pre-encoded frames of the same sizes moved the same way, no codec and no link logic
   (``loadtest.bench._rawframes``), in the same process.
2. End to end (real processes on the embedded cluster): a cold start with N parents waiting,
   each reconciled once by a no-op reconciler (``loadtest.bench._noop``), with 1 and with 2 worker
   processes: reconciles/s, the ratio, and CPU per reconcile of all metashard processes.
3. Failover with the production timings: worker SIGKILL -> its slots owned by the others;
   leader SIGKILL -> the standby serving (/readyz); graceful leader hand-over (SIGTERM).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from loadtest.apiserver.background import ClusterProcess
from loadtest.bench import _rawframes
from loadtest.bench._report import header, row
from loadtest.bench._term import CONFIGMAPS, composite_controller, running_term
from loadtest.dev.crds import install, simple_crd
from loadtest.dev.processes import Proc, Processes
from manager.informers.store import Cached, Store
from proto.api.crds import load_crds
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.kube.session import Session
from proto.wire import Fetch, Keys, Snapshot
from workers.link.dealer import DealerLink

THINGS = Resource("bench.metashard.io", "v1", "things", "Thing", True, subresources=("status",))
CCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", "CompositeController", False
)
THING_CRD = simple_crd("bench.metashard.io", "Thing")


# --- 1. in process ----------------------------------------------------------------------------


def _obj(kind: str, name: str, owner: str | None, rv: int, size: int) -> Cached:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "bench",
        "uid": f"uid-{name}",
        "resourceVersion": str(rv),
        "generation": 1,
        "labels": {"controller-uid": owner or f"uid-{name}"},
    }
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "bench.metashard.io/v1",
                "kind": "Thing",
                "name": owner[4:],
                "uid": owner,
                "controller": True,
            }
        ]
    obj = {"apiVersion": "v1", "kind": kind, "metadata": meta, "data": {"x": "y" * size}}
    return Cached.from_object(obj, orjson.dumps(obj))


async def _in_process(parents: int, events: int) -> tuple[float, float]:
    parent_store, child_store = Store(), Store()
    for i in range(parents):
        parent_store.upsert(_obj("Thing", f"p{i}", None, i + 1, 300))
        for k in range(3):
            child_store.upsert(_obj("ConfigMap", f"p{i}-{k}", f"uid-p{i}", i + 1, 900))
    stores = {"things": parent_store, "configmaps": child_store}
    async with running_term(stores, parent=THINGS, workers=2) as (term, links):
        received = 0
        done = asyncio.Event()

        async def drain(link: DealerLink) -> None:
            nonlocal received
            while True:
                msg = await link.recv()
                if isinstance(msg, Keys):
                    received += len(msg.keys)
                    if received >= events:
                        done.set()

        drains = [asyncio.create_task(drain(link)) for link in links]
        handler = term.router.handler(CONFIGMAPS)
        children = list(child_store)
        started = time.perf_counter()
        for i in range(events):
            child = children[(i * 3) % len(children)]
            handler("MODIFIED", child, child, False)
            if i % 256 == 255:
                await asyncio.sleep(0)
        await asyncio.wait_for(done.wait(), 60)
        routing = events / (time.perf_counter() - started)
        for task in drains:
            task.cancel()
        # A link has one reader: the drains must have left recv() before the fetches read.
        await asyncio.gather(*drains, return_exceptions=True)

        link = links[0]
        keys = [k for k in term.keys.keys_of(term.membership.slots_of("w0"))]
        request_ids = itertools.count()

        async def fetch() -> None:
            request_id = next(request_ids)
            await link.send(Fetch(1, request_id, keys[request_id % len(keys)], {}))

        async def snapshot() -> None:
            while not isinstance(await link.recv(), Snapshot):
                pass  # a heartbeat

        fetches = await _rawframes.pump(20_000, fetch, snapshot)
    return routing, fetches


# --- 2 and 3. real processes ------------------------------------------------------------------


async def _install(kubeconfig: str, parents: int) -> None:
    async with Session(load_config(kubeconfig), qps=0) as session:
        client = Client(session)
        await install(client, [*load_crds(), THING_CRD])
        await client.create(
            Resource("", "v1", "namespaces", "Namespace", False),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}},
        )
        await client.create(CCS, composite_controller(THINGS) | {"metadata": {"name": "bench"}})
        sem = asyncio.Semaphore(64)

        async def one(i: int) -> None:
            async with sem:
                await client.create(
                    THINGS,
                    {
                        "apiVersion": "bench.metashard.io/v1",
                        "kind": "Thing",
                        "metadata": {"name": f"t{i}", "namespace": "bench"},
                        "spec": {"i": i},
                    },
                )

        await asyncio.gather(*(one(i) for i in range(parents)))


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _reconciled(workers: list[Proc]) -> float:
    total = 0.0
    for proc in workers:
        value = await proc.metric("controller_runtime_reconcile_total", {"result": "success"})
        total += value or 0.0
    return total


async def _cold_start(
    kubeconfig: str, parents: int, n_workers: int, workdir: Path
) -> tuple[float, float]:
    procs = Processes(kubeconfig=kubeconfig, workdir=workdir)
    try:
        coordinator = procs.coordinator()
        workers = [
            procs.worker(f"w{i}", concurrency=32, reconciler="loadtest.bench._noop:factory")
            for i in range(n_workers)
        ]

        async def some() -> bool:
            return await _reconciled(workers) > 0

        async def all_done() -> bool:
            return await _reconciled(workers) >= parents

        await _until(some)
        cpu0 = sum(_cpu(p.popen.pid) for p in [coordinator, *workers])
        seconds = await _until(all_done)
        cpu = sum(_cpu(p.popen.pid) for p in [coordinator, *workers]) - cpu0
        return parents / seconds, cpu / parents * 1e3
    finally:
        procs.close()


async def _owned_by(coordinator: Proc, workers: list[str]) -> bool:
    total = 0.0
    for wid in workers:
        total += (
            await coordinator.metric("metashard_coordinator_worker_slots", {"worker": wid}) or 0
        )
    return total == 1024


async def _until(condition: Any, limit: float = 120.0) -> float:
    started = time.perf_counter()
    while not await condition():
        if time.perf_counter() - started > limit:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.05)
    return time.perf_counter() - started


async def _failover(kubeconfig: str, workdir: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    procs = Processes(kubeconfig=kubeconfig, workdir=workdir / "worker-kill", fast=False)
    procs.workdir.mkdir(parents=True)
    try:
        coordinator = procs.coordinator()
        victim = procs.worker("a", reconciler="loadtest.bench._noop:factory")
        procs.worker("b", reconciler="loadtest.bench._noop:factory")
        await _until(lambda: _owned_by(coordinator, ["a", "b"]))
        procs.kill(victim)
        out["worker SIGKILL -> slots reassigned"] = await _until(
            lambda: _owned_by(coordinator, ["b"])
        )
    finally:
        procs.close()
    for mode in ("SIGKILL", "SIGTERM"):
        procs = Processes(kubeconfig=kubeconfig, workdir=workdir / mode, fast=False)
        procs.workdir.mkdir(parents=True)
        try:
            first = procs.coordinator("c1", leader_election=True)
            await _until(first.ready)
            second = procs.coordinator("c2", leader_election=True)
            procs.worker("a", reconciler="loadtest.bench._noop:factory")
            await _until(lambda c=first: _owned_by(c, ["a"]))
            await asyncio.sleep(1.0)
            if mode == "SIGKILL":
                procs.kill(first)
                label = "leader SIGKILL -> new leader ready"
            else:
                procs.stop(first)
                label = "graceful leader hand-over -> new leader ready"
            out[label] = await _until(second.ready)
            out[label.replace("ready", "assigning")] = out[label] + await _until(
                lambda c=second: _owned_by(c, ["a"])
            )
        finally:
            procs.close()
    return out


def main(quick: bool) -> None:
    parents, events = (2_000, 20_000) if quick else (10_000, 200_000)
    routing, fetches = asyncio.run(_in_process(parents, events))
    with tempfile.TemporaryDirectory() as tmp:
        raw_msgs = asyncio.run(_rawframes.messages(f"ipc://{tmp}/m.sock", b"k" * 200, 50_000))
        snapshot = b"s" * 3_500
        raw_rtt = asyncio.run(
            _rawframes.round_trips(f"ipc://{tmp}/r.sock", snapshot, b"f" * 120, 20_000)
        )
    header("coordinator, in process (real Term, ipc, 2 worker links)")
    row("informer events -> KEYS received", routing, "events/s", baseline=raw_msgs)
    row("raw frames ROUTER->DEALER (200 B) [baseline]", raw_msgs, "msg/s")
    row("FETCH -> SNAPSHOT round trips (64 in flight)", fetches, "trips/s", baseline=raw_rtt)
    row("raw frame round trips, 3.5 KB answers [baseline]", raw_rtt, "trips/s")

    cold = 500 if quick else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        cluster = ClusterProcess().start()
        try:
            kubeconfig = str(cluster.kubeconfig)
            asyncio.run(_install(kubeconfig, cold))
            results = {}
            for n in (1, 2):
                workdir = Path(tmp) / f"cold-{n}"
                workdir.mkdir()
                results[n] = asyncio.run(_cold_start(kubeconfig, cold, n, workdir))
            header(f"end to end: cold start, {cold} parents, no-op reconciler, embedded cluster")
            row("1 worker process", results[1][0], "reconciles/s")
            row("2 worker processes", results[2][0], "reconciles/s", baseline=results[1][0])
            row("metashard CPU per reconcile, 1 worker", results[1][1], "ms")
            row("metashard CPU per reconcile, 2 workers", results[2][1], "ms")
            if not quick:
                header("failover, production timings (worker timeout 5 s, lease 15/10/2 s)")
                for label, seconds in asyncio.run(_failover(kubeconfig, Path(tmp))).items():
                    row(label, seconds, "s")
        finally:
            cluster.stop()
