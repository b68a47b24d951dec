"""A disturbed ``controller-revision-hash`` label mid-rollout is repaired in place.

A CompositeController rolls out Members (a custom resource: it has a generation, which a label
edit does not move) three at a time, highest ordinal first, each move gated by a ``Ready=True``
status check; the test plays the Members' own controller, so it decides when the rollout may
go on. While the rollout waits on the first moved Member, someone removes its label, sets the
next one's to the latest revision's hash and the last one's to a wrong value. metashard must
put every label back as its revision says, in place (no Member is deleted), must not count
the moved Member as not updated meanwhile, and the rollout must then complete. Under both
rolling methods and both apply strategies, on the embedded cluster or, with
``METASHARD_E2E_KUBECONFIG``, on a real one (Members need no node).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from loadtest.dev.crds import install, simple_crd
from proto.api.revisions import REVISION_HASH_LABEL, revision_hash
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.kube.session import Session
from tests.e2e.conftest import BOTH_APPLY_STRATEGIES
from tests.e2e.harness import Processes, eventually
from tests.e2e.hookserver import HookServer
from tests.e2e.test_composite import CCS, THINGS, make_controller, thing

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio, BOTH_APPLY_STRATEGIES]

MEMBERS = Resource(
    "e2e.metashard.io", "v1", "members", "Member", namespaced=True, subresources=("status",)
)
REVISIONS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "controllerrevisions", "ControllerRevision", True
)
NAMES = ("m-2", "m-1", "m-0")
WAITING = {
    "RollingRecreate": (
        'child Member m-2 failed status check: required condition type missing: "Ready"'
    ),
    "RollingInPlace": (
        "child Member m-2 with RollingInPlace update strategy hasn't observed latest spec"
    ),
}
"""What the rollout waits on once m-2 moved, while the test holds it."""


@pytest.fixture(scope="module")
def members(cluster: str) -> None:
    """The Member CRD, installed once."""

    async def setup() -> None:
        async with Session(load_config(cluster), qps=0) as session:
            await install(Client(session), [simple_crd("e2e.metashard.io", "Member")])

    asyncio.run(setup())


def answer(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    """Members ``m-2``, ``m-1``, ``m-0`` running the parent's ``spec.image``."""
    image = request["parent"]["spec"]["image"]
    children = [
        {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Member",
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"image": image},
        }
        for name in NAMES
    ]
    return {"status": {}, "children": children}


async def listed(kube: Client, namespace: str) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in (await kube.list(MEMBERS, namespace=namespace)).items}


def observed(member: dict[str, Any]) -> dict[str, Any]:
    """The status the Members' controller gives ``member``: Ready, its generation observed."""
    return {
        "observedGeneration": member["metadata"]["generation"],
        "conditions": [{"type": "Ready", "status": "True"}],
    }


async def play_members(kube: Client, namespace: str) -> dict[str, dict[str, Any]]:
    """The Members' controller: each Member reports ``observed``; the Members as they are
    now (a status write that lost a race is made on the next call)."""
    found = await listed(kube, namespace)
    for name, member in found.items():
        if member.get("status") == observed(member):
            continue
        with contextlib.suppress(errors.Conflict, errors.NotFound):
            found[name] = await kube.replace(
                MEMBERS,
                {**member, "status": observed(member)},
                namespace=namespace,
                subresource="status",
            )
    return found


def updated(parent: dict[str, Any]) -> tuple[str, str]:
    """The reason and message of the parent's ``Updated`` condition (empty when none)."""
    conditions = (parent.get("status") or {}).get("conditions") or []
    found: dict[str, Any] = next((c for c in conditions if c.get("type") == "Updated"), {})
    return str(found.get("reason", "")), str(found.get("message", ""))


@contextlib.asynccontextmanager
async def conditions(kube: Client, namespace: str) -> AsyncIterator[list[tuple[str, str]]]:
    """Every ``Updated`` condition the parent ``set`` is written with while the block runs."""
    start = await kube.list(THINGS, namespace=namespace)
    seen: list[tuple[str, str]] = []

    async def follow() -> None:
        async for event in kube.watch(
            THINGS, namespace=namespace, resource_version=start.resource_version
        ):
            if event.type in ("ADDED", "MODIFIED"):
                seen.append(updated(event.object))

    following = asyncio.ensure_future(follow())
    try:
        yield seen
        await asyncio.sleep(0.2)  # let the watch catch up
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following


@pytest.mark.usefixtures("members")
@pytest.mark.parametrize("method", ["RollingRecreate", "RollingInPlace"])
async def test_disturbed_revision_labels_are_repaired_in_place_mid_rollout(
    kube: Client, namespace: str, hooks: HookServer, stack: Processes, method: str
) -> None:
    strategy = {
        "method": method,
        "statusChecks": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    child = {"apiVersion": "e2e.metashard.io/v1", "resource": "members", "updateStrategy": strategy}
    name = await make_controller(kube, hooks, answer, child=child)
    seen: dict[str, Any] = {}

    async def rolled_out(image: str) -> bool:
        found = await play_members(kube, namespace)
        parent = await kube.get(THINGS, "set", namespace=namespace)
        seen.update(members=found, updated=updated(parent))
        return (
            sorted(found) == sorted(NAMES)
            and all(
                m["spec"]["image"] == image and m.get("status") == observed(m)
                for m in found.values()
            )
            and updated(parent)[0] == "OnLatestRevision"
        )

    async def waiting_on_m2() -> bool:
        parent = await kube.get(THINGS, "set", namespace=namespace)
        seen.update(updated=updated(parent))
        return updated(parent) == ("RolloutWaiting", WAITING[method])

    async def hashes() -> dict[str, str | None]:
        found = await listed(kube, namespace)
        seen.update(members=found)
        return {
            n: m["metadata"].get("labels", {}).get(REVISION_HASH_LABEL) for n, m in found.items()
        }

    def report() -> str:
        return f"last seen: {seen!r}\n{stack.logs()}"

    try:
        await thing(kube, namespace, "set", name, {"image": "v1"})
        await eventually(lambda: rolled_out("v1"), within=60, message=report)
        await kube.patch(THINGS, "set", {"spec": {"image": "v2"}}, namespace=namespace)
        await eventually(waiting_on_m2, within=60, message=report)

        revisions = (await kube.list(REVISIONS, namespace=namespace)).items
        by_image = {
            r["parentPatch"]["spec"]["image"]: revision_hash(r["metadata"]["name"])
            for r in revisions
        }
        old, new = by_image["v1"], by_image["v2"]
        assert await hashes() == {"m-2": new, "m-1": old, "m-0": old}
        uids = {n: m["metadata"]["uid"] for n, m in (await listed(kube, namespace)).items()}

        async with conditions(kube, namespace) as written:
            for member, label in (("m-2", None), ("m-1", new), ("m-0", "wrong")):
                patch = {"metadata": {"labels": {REVISION_HASH_LABEL: label}}}
                await kube.patch(MEMBERS, member, patch, namespace=namespace)

            async def repaired() -> bool:
                return await hashes() == {"m-2": new, "m-1": old, "m-0": old}

            await eventually(repaired, within=30, message=report)
            found = await listed(kube, namespace)
            now = {n: m["metadata"]["uid"] for n, m in found.items()}
            assert now == uids, f"recreated: {now} != {uids}\n{report()}"
            assert await waiting_on_m2(), report()

            await eventually(lambda: rolled_out("v2"), within=90, message=report)
        counted = [m for _, m in written if m == "child Member m-2 is not updated yet"]
        assert counted == [], f"m-2 counted as not updated while repaired: {written}"
    finally:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CCS, name)
