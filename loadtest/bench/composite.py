"""CPU per reconcile of a CompositeController parent, in-process.

The workload is the fanout job of ``../shared/bench``: a ``Fanout`` parent with 3 ConfigMap
children (InPlace, ``generateSelector``), objects shaped as kube-apiserver returns them
(managedFields included). The CompositeController reconciler (``workers.kinds.composite``)
runs against a writer that answers at once and a hook that returns the fanout hook's answer, so
what is measured is the reconcile's own CPU (``time.process_time``), in two states:

- steady: the parent's children and status already match: no write;
- create: no children yet: 3 creates and 1 status write.

Baseline, measured in the same run and alternated with the figures: the least any reconcile
of this parent must do in Python, decoding the snapshot (parent and children) with orjson,
encoding a hook request from the decoded objects and decoding the hook's answer. The ratio says
what everything else (claims, response validation, dynamic apply, status diff, writes) costs
on top. Breakdown rows time parts of the steady reconcile alone, against the same baseline.

Target: a steady reconcile within 10x the baseline, and well under the per-parent budget of
1 ms of metashard CPU across all processes.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson

from loadtest.bench._report import header, row
from proto.api.controllers import HookName, ResponseMode, parse_composite_controller
from proto.api.hooks import decode_sync_response
from proto.hooks.client import HookEndpoint
from proto.kube.resources import Resource
from proto.runtime.logs import configure
from proto.wire import ControllerDef, ControllerKind, ParentKey, ResourceInfo, Snapshot
from workers.apply import apply_update
from workers.kinds.composite.steps import CompositeSteps
from workers.reconcile import Reconciler, ReconcileRequest
from workers.sync.hookcall import Hooks
from workers.sync.hookrequest import HookRequest, encode, object_map
from workers.sync.observed import Observed
from workers.sync.template import SyncTemplate
from workers.sync.writer import Writer

K = 3
DATA = "create-" + "x" * 93
NAMESPACE = "bench"
UID = "0b3f6c1e-8d4a-4f0e-9a51-6f2d0c7e5a10"
ROUNDS = 7
MANAGED = [
    {
        "manager": "harness",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-11-22T03:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {".": {}, "f:index": {}, "f:value": {}}},
    }
]

CONTROLLER = {
    "apiVersion": "metacontroller.k8s.io/v1alpha1",
    "kind": "CompositeController",
    "metadata": {"name": "fanout-bench", "uid": "cc-uid", "resourceVersion": "1", "generation": 1},
    "spec": {
        "generateSelector": True,
        "parentResource": {"apiVersion": "bench.metashard.io/v1", "resource": "fanouts"},
        "childResources": [
            {"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}
        ],
        "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:8089/sync", "timeout": "10s"}}},
    },
}


def definition(controller: dict[str, Any], parent: ResourceInfo) -> ControllerDef:
    """What a coordinator sends for the CompositeController object ``controller`` of ``parent``
    with ConfigMap children, at resourceVersion 1."""
    metadata = controller["metadata"]
    children = ResourceInfo("v1", "configmaps", "ConfigMap", True, ())
    return ControllerDef(
        ControllerKind.COMPOSITE,
        metadata["name"],
        metadata["uid"],
        "1",
        orjson.dumps(controller),
        (parent, children),
    )


DEFINITION = definition(
    CONTROLLER, ResourceInfo("bench.metashard.io/v1", "fanouts", "Fanout", True, ("status",))
)
SPEC = parse_composite_controller(CONTROLLER)
ENDPOINT = HookEndpoint(HookName.SYNC, SPEC.hooks.sync.webhook, "CompositeController", SPEC.name)
KEY = ParentKey("CompositeController", "fanout-bench", "fanouts.bench.metashard.io", NAMESPACE, "p")


def _parent(with_status: bool) -> dict[str, Any]:
    parent: dict[str, Any] = {
        "apiVersion": "bench.metashard.io/v1",
        "kind": "Fanout",
        "metadata": {
            "name": "p",
            "namespace": NAMESPACE,
            "uid": UID,
            "resourceVersion": "1041",
            "generation": 1,
            "creationTimestamp": "2026-11-22T03:00:00Z",
            "managedFields": MANAGED,
        },
        "spec": {"children": K, "data": DATA},
    }
    if with_status:
        parent["status"] = {"children": K, "observedGeneration": 1}
    return parent


def _hook_children() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"p-{i}"},
            "data": {"value": DATA, "index": str(i)},
        }
        for i in range(K)
    ]


ANSWER = orjson.dumps({"status": {"children": K}, "children": _hook_children()})


async def _observed_children(cluster: _Writer) -> tuple[bytes, ...]:
    """The children as our create path writes them, plus what the API server adds."""
    reconciler = _reconciler(cluster, _Hook())
    await reconciler.reconcile(ReconcileRequest(KEY, _snapshot(False, ())))
    created = []
    for i, body in enumerate(cluster.created):
        meta = {
            **body["metadata"],
            "uid": f"child-{i}",
            "resourceVersion": str(2000 + i),
            "creationTimestamp": "2026-11-22T03:00:01Z",
            "managedFields": MANAGED,
        }
        created.append(orjson.dumps({**body, "metadata": meta}))
    return tuple(created)


def _snapshot(with_status: bool, children: tuple[bytes, ...]) -> Snapshot:
    return Snapshot(
        1, 1, KEY, orjson.dumps(_parent(with_status)), {"ConfigMap.v1": children}, (), {}
    )


class _Writer:
    """Answers every write at once; keeps created bodies and counts writes."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.count = 0
        self._answer = {"metadata": {"resourceVersion": "5000"}}

    async def create(self, resource: Resource, body: Any, *, namespace: str | None = None) -> Any:
        self.count += 1
        if len(self.created) < K:
            self.created.append(body)
        return self._answer

    async def replace(self, resource: Resource, body: Any, **_: Any) -> Any:
        self.count += 1
        return self._answer

    async def patch(self, resource: Resource, name: str, patch: Any, **_: Any) -> Any:
        self.count += 1
        return self._answer

    async def delete(self, resource: Resource, name: str, **_: Any) -> Any:
        self.count += 1
        return self._answer


T = TypeVar("T")


class _Hook:
    """Answers every call at once with ``ANSWER``; the cache and header options are moot."""

    async def call_decoded(
        self, endpoint: HookEndpoint, body: bytes, *, decode: Callable[[bytes], T], **_: Any
    ) -> T:
        return decode(ANSWER)


class _Events:
    def emit(self, obj: Any, type: str, reason: str, message: str) -> None:
        raise AssertionError(f"unexpected event: {reason} {message}")


async def _per_call(fn: Callable[[], Awaitable[object]], count: int) -> float:
    """CPU microseconds per call of ``fn``."""
    started = time.process_time()
    for _ in range(count):
        await fn()
    return (time.process_time() - started) / count * 1e6


async def _run(quick: bool) -> None:
    count = 200 if quick else 3000
    writer = _Writer()
    children = await _observed_children(writer)
    steady_snapshot = _snapshot(True, children)
    create_snapshot = _snapshot(False, ())
    reconciler = _reconciler(writer, _Hook())

    async def steady() -> None:
        await reconciler.reconcile(ReconcileRequest(KEY, steady_snapshot))

    async def create() -> None:
        await reconciler.reconcile(ReconcileRequest(KEY, create_snapshot))

    async def baseline() -> None:
        parent = orjson.loads(steady_snapshot.parent or b"")
        group = {}
        for raw in steady_snapshot.children["ConfigMap.v1"]:
            child = orjson.loads(raw)
            group[child["metadata"]["name"]] = child
        body = {
            "controller": CONTROLLER,
            "parent": parent,
            "children": {"ConfigMap.v1": group},
            "related": {},
            "finalizing": False,
        }
        await _Hook().call_decoded(ENDPOINT, orjson.dumps(body), decode=orjson.loads)

    decoded_children = [orjson.loads(raw) for raw in children]
    desired_children = _hook_children()

    async def decode_answer() -> None:
        decode_sync_response(ANSWER, mode=ResponseMode.LOOSE)

    async def request_body() -> None:
        observed = [Observed.decode(raw) for raw in children]
        children_map = object_map(
            SPEC.hooks.sync.version, parent_namespace=NAMESPACE, groups={"ConfigMap.v1": observed}
        )
        encode(
            HookRequest(DEFINITION.object, steady_snapshot.parent or b"", children_map, {}, False)
        )

    async def apply_k() -> None:
        for observed, desired in zip(decoded_children, desired_children, strict=True):
            desired = {
                **desired,
                "metadata": {
                    **desired["metadata"],
                    "namespace": NAMESPACE,
                    "labels": {"controller-uid": UID},
                },
            }
            _, changed = apply_update(observed, desired)
            assert not changed

    writer.count = 0
    await steady()
    assert writer.count == 0, f"a steady reconcile wrote {writer.count} times"
    await create()
    assert writer.count == K + 1, f"a create reconcile wrote {writer.count} times, not {K + 1}"

    cases = {
        "baseline": baseline,
        "steady": steady,
        "create": create,
        "decode": decode_answer,
        "request": request_body,
        "apply": apply_k,
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, fn in cases.items():
            samples[name].append(await _per_call(fn, count))
    us = {name: statistics.median(values) for name, values in samples.items()}
    base = us["baseline"]

    header(f"CompositeController reconcile of a fanout parent (K={K}), CPU per reconcile")
    row("baseline: orjson decode snapshot, encode request", base, "us")
    row("steady: no change, 0 writes", us["steady"], "us", baseline=base, target="<= 10x")
    row(f"create: {K} children and status, {K + 1} writes", us["create"], "us", baseline=base)
    header("parts of the steady reconcile")
    row("decode_sync_response of the answer", us["decode"], "us", baseline=base)
    row("request from raw JSON (decode children, encode)", us["request"], "us", baseline=base)
    row(f"apply_update no-op check x{K}", us["apply"], "us", baseline=base)


def run(quick: bool = False) -> None:
    """The benchmark, leaving the process's logging configuration alone."""
    asyncio.run(_run(quick))


def main(quick: bool = False) -> None:
    configure(fmt="console", level="warning")
    run(quick)


def _reconciler(writer: Writer, hooks: Hooks) -> Reconciler:
    """The CompositeController reconciler of ``DEFINITION``: the sync template with its steps."""
    events = _Events()
    steps = CompositeSteps(DEFINITION, writer=writer, events=events)
    return SyncTemplate(DEFINITION, steps, writer=writer, hooks=hooks, events=events)
