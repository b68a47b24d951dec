"""Two installations with disjoint ``--target-label-selector``s, side by side.

Each runs a leader-elected coordinator and one worker, selecting the controllers labelled
with its own shard. Neither may touch the other's controllers (their ``Started`` events come
from one coordinator only), parents (finalizers) or Lease (each has its own default one); a
controller neither selects is run by nobody. Nothing here depends on the embedded cluster.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from manager.settings import default_lease_name
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.e2e.harness import Processes, eventually
from tests.e2e.hookserver import HookServer
from tests.e2e.test_decorator import (
    DCS,
    EVENTS,
    PODS,
    SELECTED_BY,
    SERVICE_ATTACHMENT,
    SERVICES,
    get,
    pod,
    pods_of,
    service_per_pod,
)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
SHARD = "e2e.metashard.io/shard"
FAST_LEASE = [
    "--leader-election-lease-duration",
    "3s",
    "--leader-election-renew-deadline",
    "2s",
    "--leader-election-retry-period",
    "0.4s",
]


@pytest.fixture
def second(cluster: str, tmp_path: Path) -> Iterator[Processes]:
    processes = Processes(kubeconfig=cluster, workdir=tmp_path / "second")
    processes.workdir.mkdir()
    yield processes
    processes.close()


def install(processes: Processes, namespace: str, selector: str) -> None:
    processes.coordinator(
        extra=[
            "--leader-election",
            "--leader-election-namespace",
            namespace,
            "--target-label-selector",
            selector,
            *FAST_LEASE,
        ]
    )
    processes.worker(f"w-{secrets.token_hex(2)}")


async def started_by(kube: Client, name: str) -> set[str]:
    events = await kube.list(
        EVENTS, namespace="default", field_selector=f"involvedObject.name={name}"
    )
    return {e.get("reportingInstance", "") for e in events.items if e.get("reason") == "Started"}


async def test_disjoint_installations_leave_each_other_alone(
    kube: Client, namespace: str, hooks: HookServer, procs: Processes, second: Processes
) -> None:
    token = secrets.token_hex(3)
    selectors = {"a": f"{SHARD}={token}-a", "b": f"{SHARD}={token}-b"}
    made: list[str] = []

    async def make(shard: str | None) -> str:
        name = f"e2e-{shard or 'none'}-{token}"
        hooks.program(name, service_per_pod)
        labels = {SHARD: f"{token}-{shard}"} if shard else {}
        await kube.create(
            DCS,
            {
                "apiVersion": "metacontroller.k8s.io/v1alpha1",
                "kind": "DecoratorController",
                "metadata": {"name": name, "labels": labels},
                "spec": {
                    "resources": pods_of(name),
                    "attachments": SERVICE_ATTACHMENT,
                    "hooks": {
                        "sync": {"webhook": {"url": hooks.url(name, "sync")}},
                        "finalize": {"webhook": {"url": hooks.url(name, "finalize")}},
                    },
                },
            },
        )
        made.append(name)
        await pod(
            kube,
            namespace,
            f"pod-{shard or 'none'}",
            labels={SELECTED_BY: name},
            annotations={"service-per-pod": "true"},
        )
        return name

    try:
        nobody = await make(None)
        install(procs, namespace, selectors["a"])
        install(second, namespace, selectors["b"])
        dc_a, dc_b = await make("a"), await make("b")

        async def decorated() -> bool:
            return all(
                [
                    await get(kube, SERVICES, "pod-a", namespace) is not None,
                    await get(kube, SERVICES, "pod-b", namespace) is not None,
                ]
            )

        await eventually(decorated, within=60, message="each installation runs its controller")

        holders: dict[str, str] = {}
        for shard, selector in selectors.items():
            lease = await get(kube, LEASES, default_lease_name(selector), namespace)
            assert lease is not None, f"no Lease of installation {shard}"
            holders[shard] = lease["spec"]["holderIdentity"]
        assert holders["a"] != holders["b"]  # both lead, each its own Lease

        async def announced() -> bool:
            return bool(await started_by(kube, dc_a)) and bool(await started_by(kube, dc_b))

        await eventually(announced, within=30, message="Started events of both controllers")
        assert await started_by(kube, dc_a) == {holders["a"]}
        assert await started_by(kube, dc_b) == {holders["b"]}
        assert await started_by(kube, nobody) == set()
        assert hooks.calls(nobody) == []
        assert await get(kube, SERVICES, "pod-none", namespace) is None

        # B's controller moves to A: B stops running it but leaves its finalizers in place.
        moved = {"metadata": {"labels": {SHARD: f"{token}-a"}}}
        await kube.patch(DCS, dc_b, moved)

        async def taken_over() -> bool:
            return holders["a"] in await started_by(kube, dc_b)

        await eventually(taken_over, within=30, message="A starts the controller B ran")
        pod_b: dict[str, Any] = await get(kube, PODS, "pod-b", namespace)
        assert f"metacontroller.io/decoratorcontroller-{dc_b}" in pod_b["metadata"]["finalizers"]

        # Deleting A's controller releases A's finalizers; B's stay where they are.
        await kube.delete(DCS, dc_a)

        async def released() -> bool:
            found = await get(kube, PODS, "pod-a", namespace)
            return f"decoratorcontroller-{dc_a}" not in str(found["metadata"].get("finalizers"))

        await eventually(released, within=60, message="A's finalizer leaves pod-a")
        pod_b = await get(kube, PODS, "pod-b", namespace)
        assert f"metacontroller.io/decoratorcontroller-{dc_b}" in pod_b["metadata"]["finalizers"]
    finally:
        for name in made:
            with contextlib.suppress(errors.NotFound):
                await kube.delete(DCS, name)
