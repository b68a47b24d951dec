"""A rolling update of N parents x K children, in-process: time and API writes per child moved.

The CompositeController reconciler (``workers.kinds.composite``) runs against the in-memory cluster
(``loadtest.apiserver.inprocess``) with a StatefulSet-like hook: K ConfigMap children
``<parent>-<i>``, highest ordinal first, ``RollingRecreate``, no status checks (a recreated child
counts as ready at once). Every parent is synced until its children match, then every parent's spec
changes and the parents are synced round-robin until all are on the latest revision again.

Reported: syncs and wall time of the rollout, CPU per sync, and API writes per child moved,
by resource, against the least a crash-safe rollout can write per child: 2 child writes
(delete, create) and 2 ControllerRevision writes (the claim moves from the old revision to
the latest, and both must be recorded before the child is touched). Status writes (the
``Updated`` condition changes as each child moves) come on top.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import orjson

from loadtest.apiserver.inprocess import MemoryCluster, ScriptedHooks
from loadtest.bench._report import header, row
from loadtest.bench.composite import definition
from proto.kube.resources import Resource
from proto.runtime.logs import configure
from proto.wire import ParentKey, ResourceInfo
from workers.kinds.composite.steps import CompositeSteps
from workers.reconcile import Reconciler, ReconcileRequest
from workers.sync.hookcall import Hooks
from workers.sync.template import SyncTemplate
from workers.sync.writer import Writer

THINGS = Resource("bench.metashard.io", "v1", "sets", "Set", True, subresources=("status",))
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
NS = "bench"
MIN_WRITES_PER_CHILD = 4
MAX_PASSES = 1000
CONTROLLER = {
    "apiVersion": "metacontroller.k8s.io/v1alpha1",
    "kind": "CompositeController",
    "metadata": {"name": "rollout-bench", "uid": "cc-uid"},
    "spec": {
        "generateSelector": True,
        "parentResource": {"apiVersion": "bench.metashard.io/v1", "resource": "sets"},
        "childResources": [
            {
                "apiVersion": "v1",
                "resource": "configmaps",
                "updateStrategy": {"method": "RollingRecreate"},
            }
        ],
        "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:8089/sync"}}},
    },
}
DEFINITION = definition(
    CONTROLLER, ResourceInfo("bench.metashard.io/v1", "sets", "Set", True, ("status",))
)


def _answer(request: dict[str, Any]) -> bytes:
    parent = request["parent"]
    spec = parent["spec"]
    children = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{parent['metadata']['name']}-{i}"},
            "data": {"image": spec["image"]},
        }
        for i in reversed(range(spec["replicas"]))
    ]
    return orjson.dumps({"status": {"replicas": spec["replicas"]}, "children": children})


class _Events:
    def emit(self, obj: Any, type: str, reason: str, message: str) -> None:
        pass


async def _sync_all(cluster: MemoryCluster, reconciler: Reconciler, names: list[str]) -> None:
    for name in names:
        key = ParentKey("CompositeController", "rollout-bench", "sets.bench.metashard.io", NS, name)
        await reconciler.reconcile(
            ReconcileRequest(key, cluster.snapshot(key, THINGS, [CONFIGMAPS]))
        )


def _done(cluster: MemoryCluster, names: list[str], image: str) -> bool:
    for name in names:
        parent = cluster.get(THINGS, NS, name) or {}
        conditions = (parent.get("status") or {}).get("conditions") or []
        if not any(c.get("reason") == "OnLatestRevision" for c in conditions):
            return False
    return all(o["data"]["image"] == image for o in cluster.of(CONFIGMAPS, NS))


async def _run(parents: int, children: int) -> None:
    cluster = MemoryCluster()
    hooks = ScriptedHooks(_answer, keep=False)
    reconciler = _reconciler(cluster, hooks)
    names = [f"set-{i}" for i in range(parents)]
    for name in names:
        await cluster.create(
            THINGS,
            {
                "apiVersion": "bench.metashard.io/v1",
                "kind": "Set",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"replicas": children, "image": "v1"},
            },
        )
    for _ in range(MAX_PASSES):
        if _done(cluster, names, "v1"):
            break
        await _sync_all(cluster, reconciler, names)
    else:
        raise RuntimeError("the parents never converged")
    for name in names:
        await cluster.patch(THINGS, name, {"spec": {"image": "v2"}}, namespace=NS)
    cluster.calls.clear()
    passes = 0
    wall, cpu = time.perf_counter(), time.process_time()
    while not _done(cluster, names, "v2"):
        if passes == MAX_PASSES:
            raise RuntimeError(f"no rollout after {passes} passes")
        await _sync_all(cluster, reconciler, names)
        passes += 1
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    writes = Counter(resource for verb, resource, _, _, _ in cluster.writes())
    moved = parents * children
    syncs = passes * parents
    header(f"{parents} parents x {children} children, RollingRecreate")
    row("passes over all parents", passes, "passes")
    row("rollout wall time", wall * 1e3, "ms")
    row("CPU per sync", cpu / syncs * 1e6, "us")
    row("child writes per child moved", writes["configmaps"] / moved, "writes", baseline=2)
    row(
        "ControllerRevision writes per child moved",
        writes["controllerrevisions"] / moved,
        "writes",
        baseline=2,
    )
    total = writes["configmaps"] + writes["controllerrevisions"]
    row(
        "child + revision writes per child moved",
        total / moved,
        "writes",
        baseline=MIN_WRITES_PER_CHILD,
    )
    row("status writes per child moved", writes["sets"] / moved, "writes")


def run(quick: bool = False) -> None:
    """The benchmark, leaving the process's logging configuration alone."""
    sizes = [(5, 3)] if quick else [(20, 3), (10, 10)]
    for parents, children in sizes:
        asyncio.run(_run(parents, children))


def main(quick: bool = False) -> None:
    configure(fmt="console", level="warning")  # the reconcilers' info lines are not results
    run(quick)


def _reconciler(writer: Writer, hooks: Hooks) -> Reconciler:
    """The CompositeController reconciler of ``DEFINITION``: the sync template with its steps."""
    events = _Events()
    steps = CompositeSteps(DEFINITION, writer=writer, events=events)
    return SyncTemplate(DEFINITION, steps, writer=writer, hooks=hooks, events=events)
