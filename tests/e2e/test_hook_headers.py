"""Every hook request says which attempt it belongs to: the fencing headers, end to end.

One coordinator and two workers (the module's ``stack``) run a CompositeController with
customize, sync and finalize hooks answered by ``tests.e2e.hookserver``; a Thing is created,
changed and deleted. Every request carries the six ``X-Metashard-*`` headers
(``proto.hooks.attempt``): the term's epoch (one for all, no leader change here), the slot
generation (0 on the coordinator's customize calls, positive on the workers' calls), an attempt
id (one per reconcile, so sync and finalize of different reconciles differ), and the uid,
resourceVersion and generation of the parent the request carries.
"""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

import pytest

from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.e2e.harness import Processes, eventually
from tests.e2e.hookserver import HookServer

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

THINGS = Resource(
    "e2e.metashard.io", "v1", "things", "Thing", namespaced=True, subresources=("status",)
)
CCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", "CompositeController", False
)
HEADERS = (
    "X-Metashard-Epoch",
    "X-Metashard-Slot-Generation",
    "X-Metashard-Attempt",
    "X-Metashard-Parent-Uid",
    "X-Metashard-Parent-Resource-Version",
    "X-Metashard-Parent-Generation",
)


def answer(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    if hook == "customize":
        return {"relatedResources": []}
    return {"status": {"seen": True}, "children": [], "finalized": True}


async def test_every_hook_request_carries_the_attempt_headers(
    kube: Client, namespace: str, hooks: HookServer, stack: Processes
) -> None:
    name = f"e2e-hdr-{secrets.token_hex(3)}"
    hooks.program(name, answer)
    webhook = {hook: {"webhook": {"url": hooks.url(name, hook)}} for hook in HOOKS}
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
                    "labelSelector": {"matchLabels": {"headers": name}},
                },
                "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
                "hooks": webhook,
            },
        },
    )
    try:
        body = {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Thing",
            "metadata": {"name": "p", "namespace": namespace, "labels": {"headers": name}},
            "spec": {"v": 1},
        }
        await kube.create(THINGS, body)

        async def called(*wanted: str) -> bool:
            return set(wanted) <= {r.hook for r in hooks.received(name)}

        await eventually(
            lambda: called("customize", "sync"),
            within=30,
            message=lambda: f"{[r.hook for r in hooks.received(name)]}\n{stack.logs()[-3000:]}",
        )
        await kube.patch(THINGS, "p", {"spec": {"v": 2}}, namespace=namespace)
        await eventually(
            lambda: _generation_called(hooks, name, "sync", 2), within=30, message="no sync of 2"
        )
        await kube.delete(THINGS, "p", namespace=namespace)
        await eventually(lambda: called("finalize"), within=30)
    finally:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CCS, name)

    received = hooks.received(name)
    epochs = set()
    for r in received:
        assert all(r.headers.get(h) for h in HEADERS), (r.hook, r.headers)
        meta = r.request["parent"]["metadata"]
        assert r.headers["X-Metashard-Parent-Uid"] == meta["uid"]
        assert r.headers["X-Metashard-Parent-Resource-Version"] == meta["resourceVersion"]
        assert r.headers["X-Metashard-Parent-Generation"] == str(meta["generation"])
        generation = int(r.headers["X-Metashard-Slot-Generation"])
        assert (generation == 0) == (r.hook == "customize"), (r.hook, generation)
        epochs.add(r.headers["X-Metashard-Epoch"])
    assert len(epochs) == 1
    worker_calls = [r for r in received if r.hook != "customize"]
    attempts = [r.headers["X-Metashard-Attempt"] for r in worker_calls]
    assert len(set(attempts)) == len(attempts)  # one call per reconcile here
    assert all(a.split("/")[0] in ("w-a", "w-b") for a in attempts)
    customizes = [r.headers["X-Metashard-Attempt"] for r in received if r.hook == "customize"]
    assert len(set(customizes)) == len(customizes)


HOOKS = ("customize", "sync", "finalize")


async def _generation_called(hooks: HookServer, name: str, hook: str, generation: int) -> bool:
    return any(
        r.hook == hook and r.headers.get("X-Metashard-Parent-Generation") == str(generation)
        for r in hooks.received(name)
    )
