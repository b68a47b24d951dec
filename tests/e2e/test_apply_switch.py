"""Switching a running controller from dynamic apply to server-side apply.

A coordinator and a worker with ``--apply-strategy dynamic-apply`` converge a child; the worker
is replaced by one with ``--apply-strategy server-side-apply`` while the hook stops returning
a field. The child must lose that field (its managed fields were migrated from the old Update
manager), lose the last-applied annotation, and keep its uid (updated in place).
"""

from __future__ import annotations

from typing import Any

import pytest

from proto.api.names import LAST_APPLIED_ANNOTATION
from proto.kube.client import Client
from tests.e2e.harness import Processes, eventually
from tests.e2e.hookserver import HookServer
from tests.e2e.test_composite import CCS, CONFIGMAPS, get, make_controller, thing

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


async def test_switching_to_server_side_apply_leaves_no_stale_field(
    kube: Client, namespace: str, hooks: HookServer, procs: Processes
) -> None:
    data = {"kept": "1", "dropped": "soon"}

    def answer(hook: str, request: dict[str, Any]) -> dict[str, Any]:
        child = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{request['parent']['metadata']['name']}-child"},
            "data": dict(data),
        }
        return {"children": [] if request["finalizing"] else [child]}

    name = await make_controller(kube, hooks, answer)
    try:
        procs.coordinator()
        dynamic = procs.worker("w-dynamic", extra=["--apply-strategy", "dynamic-apply"])
        await thing(kube, namespace, "p", name, {})

        async def child_is(wanted: dict[str, str]) -> bool:
            child = await get(kube, CONFIGMAPS, namespace, "p-child")
            return child is not None and child.get("data") == wanted

        await eventually(lambda: child_is(data), message=procs.logs)
        before = await get(kube, CONFIGMAPS, namespace, "p-child")
        assert before is not None
        assert LAST_APPLIED_ANNOTATION in before["metadata"]["annotations"]

        procs.stop(dynamic)
        del data["dropped"]
        procs.worker("w-ssa", extra=["--apply-strategy", "server-side-apply"])
        await eventually(lambda: child_is({"kept": "1"}), message=procs.logs)
        after = await get(kube, CONFIGMAPS, namespace, "p-child")
        assert after is not None
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert LAST_APPLIED_ANNOTATION not in (after["metadata"].get("annotations") or {})
        managers = {(e["manager"], e["operation"]) for e in after["metadata"]["managedFields"]}
        assert ("metacontroller", "Apply") in managers
        assert ("metashard", "Update") not in managers
    finally:
        await kube.delete(CCS, name)
