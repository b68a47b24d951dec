"""Chaos: the whole runtime under random disruption, then every parent must converge.

Two coordinators (leader election) and three workers run a CompositeController whose sync hook
makes one ConfigMap per Thing and reports ``status.v``; the test keeps changing the Things
while, for ``METASHARD_CHAOS_SECONDS`` (default 30; ``make chaos`` runs longer), it picks
disruptions at random: worker SIGKILL (and restart under the same id), graceful worker stop
and restart, worker stalls (SIGSTOP) around the fence timeout and the worker timeout, workers
added and removed, the leader killed and replaced, watches dropped, watch history expired (410)
and storms of 429 and 500 answers from the API server. Then it stops disturbing and asserts:
- every Thing converges: its status and its ConfigMap carry its last written ``spec.v`` (no
  update is lost);
- the hook server never saw two calls for one parent at overlapping times (no parent is ever
  reconciled by two workers at once).
It prints how many disruptions of each kind it made and how long convergence took.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from loadtest.apiserver.faults import FaultControl
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.e2e.harness import Proc, Processes, eventually
from tests.e2e.hookserver import HookServer, Reply

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.asyncio]

THINGS = Resource(
    "e2e.metashard.io", "v1", "things", "Thing", namespaced=True, subresources=("status",)
)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
CCS = Resource(
    "metacontroller.k8s.io",
    "v1alpha1",
    "compositecontrollers",
    "CompositeController",
    namespaced=False,
)
PARENTS = 30
SECONDS = float(os.environ.get("METASHARD_CHAOS_SECONDS", "30"))
# Everything but the test's own writes to Things (so that storms hit metashard only).
NOT_THE_TEST = r"^(?!/apis/e2e\.metashard\.io/v1/namespaces/[^/?]+/things/[^/?]+$)"


def sync(_: str, request: dict[str, Any]) -> Reply:
    parent = request["parent"]
    meta = parent["metadata"]
    value = str(parent.get("spec", {}).get("v", ""))
    child = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{meta['name']}-c", "namespace": meta["namespace"]},
        "data": {"v": value},
    }
    return Reply.json({"status": {"v": value}, "children": [child]}, delay=0.03)


@pytest_asyncio.fixture
async def chaos_controller(kube: Client, hooks: HookServer) -> AsyncIterator[str]:
    name = f"chaos-{secrets.token_hex(3)}"
    hooks.program(name, sync)
    await kube.create(
        CCS,
        {
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "CompositeController",
            "metadata": {"name": name},
            "spec": {
                "generateSelector": True,
                "parentResource": {
                    "apiVersion": "e2e.metashard.io/v1",
                    "resource": "things",
                    "labelSelector": {"matchLabels": {"chaos": name}},
                },
                "childResources": [
                    {
                        "apiVersion": "v1",
                        "resource": "configmaps",
                        "updateStrategy": {"method": "InPlace"},
                    }
                ],
                "hooks": {"sync": {"webhook": {"url": hooks.url(name)}}},
            },
        },
    )
    yield name
    with contextlib.suppress(errors.NotFound):
        await kube.delete(CCS, name)


class Chaos:
    """The processes, and the disruptions made to them and to the cluster."""

    def __init__(self, procs: Processes, faults: FaultControl, rng: random.Random) -> None:
        self.procs = procs
        self.faults = faults
        self.rng = rng
        self.counts: Counter[str] = Counter()
        self.coordinators: list[Proc] = []
        self.workers: dict[str, Proc] = {}
        self.next_worker = 0
        self.next_coordinator = 0

    def coordinator(self) -> None:
        self.next_coordinator += 1
        name = f"coordinator-{self.next_coordinator}"
        self.coordinators.append(self.procs.coordinator(name, leader_election=True))

    def worker(self, worker_id: str | None = None) -> None:
        if worker_id is None:
            worker_id = f"w{self.next_worker}"
            self.next_worker += 1
        self.workers[worker_id] = self.procs.worker(worker_id)

    def live_workers(self) -> list[str]:
        return [w for w, p in self.workers.items() if p.alive]

    async def leader(self) -> Proc | None:
        for proc in self.coordinators:
            if proc.alive and await proc.ready():
                return proc
        return None

    async def disrupt(self) -> None:
        kind = self.rng.choice(
            [
                "worker_kill",
                "worker_restart",
                "worker_stall",
                "worker_stall",
                "worker_add",
                "worker_remove",
                "leader_kill",
                "watch_drop",
                "watch_gone",
                "storm_429",
                "storm_500",
            ]
        )
        live = self.live_workers()
        if kind in ("worker_kill", "worker_restart", "worker_stall") and live:
            victim = self.rng.choice(live)
            proc = self.workers[victim]
            if kind == "worker_stall":
                # Around the fence (0.8 s) and worker (1.2 s) timeouts of the fast timings.
                proc.popen.send_signal(signal.SIGSTOP)
                await asyncio.sleep(self.rng.uniform(0.6, 1.6))
                proc.popen.send_signal(signal.SIGCONT)
            else:
                if kind == "worker_kill":
                    self.procs.kill(proc)
                else:
                    await asyncio.to_thread(self.procs.stop, proc)
                await asyncio.sleep(self.rng.uniform(0.0, 1.0))
                self.worker(victim)
        elif kind == "worker_add" and len(live) < 4:
            self.worker()
        elif kind == "worker_remove" and len(live) > 1:
            await asyncio.to_thread(self.procs.stop, self.workers[self.rng.choice(live)])
        elif kind == "leader_kill":
            leader = await self.leader()
            if leader is None:
                return
            self.procs.kill(leader)
            self.coordinator()
        elif kind == "watch_drop":
            await asyncio.to_thread(self.faults.drop_watches)
        elif kind == "watch_gone":
            await asyncio.to_thread(self.faults.expire_history)
            await asyncio.to_thread(self.faults.drop_watches)
        elif kind in ("storm_429", "storm_500"):
            status = 429 if kind == "storm_429" else 500
            await asyncio.to_thread(
                self.faults.fail, 1_000_000, status=status, path=NOT_THE_TEST, retry_after=1
            )
            await asyncio.sleep(self.rng.uniform(0.5, 3.0))
            await asyncio.to_thread(self.faults.clear)
        else:
            return
        self.counts[kind] += 1

    async def heal(self) -> None:
        await asyncio.to_thread(self.faults.clear)
        for proc in self.workers.values():
            if proc.alive:
                proc.popen.send_signal(signal.SIGCONT)
        if not any(p.alive for p in self.coordinators):
            self.coordinator()
        while len(self.live_workers()) < 2:
            self.worker()


async def converged(kube: Client, namespace: str, expected: dict[str, int]) -> str | None:
    """None when every Thing and its ConfigMap carry the last value written; else why not."""
    things = await kube.list(THINGS, namespace=namespace)
    maps = await kube.list(CONFIGMAPS, namespace=namespace)
    status = {t["metadata"]["name"]: (t.get("status") or {}).get("v") for t in things.items}
    data = {m["metadata"]["name"]: (m.get("data") or {}).get("v") for m in maps.items}
    late = [
        (name, value, status.get(name), data.get(f"{name}-c"))
        for name, value in expected.items()
        if status.get(name) != str(value) or data.get(f"{name}-c") != str(value)
    ]
    return f"{len(late)} parents behind, e.g. {late[:3]}" if late else None


async def test_chaos(
    kube: Client,
    namespace: str,
    procs: Processes,
    hooks: HookServer,
    faults: FaultControl,
    chaos_controller: str,
) -> None:
    rng = random.Random(int(os.environ.get("METASHARD_CHAOS_SEED", "0")) or None)
    names = [f"t{i:02d}" for i in range(PARENTS)]
    expected: dict[str, int] = {}
    for name in names:
        body = {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Thing",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"chaos": chaos_controller},
            },
            "spec": {"v": 0},
        }
        await kube.create(THINGS, body)
        expected[name] = 0
    chaos = Chaos(procs, faults, rng)
    chaos.coordinator()
    chaos.coordinator()
    for _ in range(3):
        chaos.worker()

    async def first_pass() -> bool:
        return await converged(kube, namespace, expected) is None

    await eventually(first_pass, within=60, message=procs.logs)

    stop = asyncio.Event()
    counter = [0]

    async def churn() -> None:
        while not stop.is_set():
            name = rng.choice(names)
            counter[0] += 1
            try:
                await kube.patch(THINGS, name, {"spec": {"v": counter[0]}}, namespace=namespace)
            except errors.KubeError:
                pass  # not written: the expectation stays
            else:
                expected[name] = counter[0]
            await asyncio.sleep(0.05)

    writer = asyncio.create_task(churn())
    deadline = time.monotonic() + SECONDS
    try:
        while time.monotonic() < deadline:
            await chaos.disrupt()
            await asyncio.sleep(rng.uniform(0.2, 1.5))
    finally:
        stop.set()
        await writer
        await chaos.heal()
    healed = time.monotonic()
    why: list[str | None] = [None]

    async def settled() -> bool:
        why[0] = await converged(kube, namespace, expected)
        return why[0] is None

    await eventually(settled, within=120, message=lambda: f"{why[0]}\n{procs.logs()}")
    took = time.monotonic() - healed
    print(
        f"\nchaos: {sum(chaos.counts.values())} disruptions in {SECONDS:g}s "
        f"({dict(sorted(chaos.counts.items()))}), {counter[0]} parent writes; "
        f"converged {took:.1f}s after the last one"
    )
    assert hooks.overlaps(chaos_controller) == [], "a parent's hook was called twice at once"
