"""Events and conditions from hook answers, run by real metashard processes.

A sync or finalize answer's ``events`` go on the parent through the worker's event recorder
(repeats aggregated), its ``conditions`` are merged into ``status.conditions`` with
``lastTransitionTime`` kept while a condition's status holds (so an unchanged answer writes
nothing), and a malformed entry is a ``SyncError`` event naming it while the rest applies.
One coordinator and two workers serve the module; each test has its own
CompositeController. Nothing here depends on the embedded cluster.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from proto.kube.client import Client
from tests.e2e.harness import Processes, eventually
from tests.e2e.hookserver import HookServer
from tests.e2e.test_composite import EVENTS, THINGS, composite_controller, get, thing

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


def ready(status: str, reason: str) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": f"{reason} now"}


async def events_of(kube: Client, namespace: str, name: str) -> list[dict[str, Any]]:
    listed = await kube.list(EVENTS, namespace=namespace)
    return [e for e in listed.items if e["involvedObject"]["name"] == name]


async def test_events_and_conditions_reach_the_parent_and_repeats_write_nothing(
    kube: Client, namespace: str, hooks: HookServer, stack: Processes
) -> None:
    answer: dict[str, Any] = {
        "status": {"phase": "Up"},
        "events": [{"type": "Normal", "reason": "Provisioned", "message": "db-1 is up"}],
        "conditions": [ready("True", "Serving")],
    }

    async def condition() -> dict[str, Any] | None:
        parent = await get(kube, THINGS, namespace, "p")
        conditions = ((parent or {}).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c.get("type") == "Ready"), None)

    async def reason_is(reason: str) -> bool:
        found = await condition()
        return found is not None and found["reason"] == reason

    async with composite_controller(kube, hooks, lambda hook, request: answer, resync=1) as name:
        await thing(kube, namespace, "p", name, {})
        await eventually(lambda: reason_is("Serving"), message=stack.logs)
        first = await condition()
        assert first is not None and first["status"] == "True" and first["lastTransitionTime"]
        parent = await get(kube, THINGS, namespace, "p")
        assert parent is not None and parent["status"]["phase"] == "Up"
        version = parent["metadata"]["resourceVersion"]

        # Resyncs every second answer the same: no write, one Event (repeats aggregated).
        calls = len(hooks.calls(name, "sync"))

        async def resynced() -> bool:
            return len(hooks.calls(name, "sync")) >= calls + 3

        await eventually(resynced, message="no resyncs")
        parent = await get(kube, THINGS, namespace, "p")
        assert parent is not None and parent["metadata"]["resourceVersion"] == version
        events = await events_of(kube, namespace, "p")
        (event,) = [e for e in events if e["reason"] == "Provisioned"]
        assert (event["type"], event["message"]) == ("Normal", "db-1 is up")
        assert event["source"]["component"] == "metacontroller"
        assert event["involvedObject"]["uid"] == parent["metadata"]["uid"]

        # A new reason with the same status keeps the transition time; a new status moves it.
        await asyncio.sleep(1.1)  # timestamps are whole seconds
        answer["conditions"] = [ready("True", "StillServing")]
        await eventually(lambda: reason_is("StillServing"), message="the reason did not follow")
        still = await condition()
        assert still is not None and still["lastTransitionTime"] == first["lastTransitionTime"]
        answer["conditions"] = [ready("False", "Down")]
        await eventually(lambda: reason_is("Down"), message="the status did not follow")
        down = await condition()
        assert down is not None and down["lastTransitionTime"] > first["lastTransitionTime"]


async def test_a_malformed_entry_is_a_sync_error_and_the_rest_applies(
    kube: Client, namespace: str, hooks: HookServer, stack: Processes
) -> None:
    def answer(hook: str, request: dict[str, Any]) -> dict[str, Any]:
        return {
            "status": {"phase": "Up"},
            "events": [{"type": "Info", "reason": "Odd"}, {"type": "Warning", "reason": "Kept"}],
            "conditions": [{"type": "Ready", "status": "yes", "reason": "X"}, ready("True", "Ok")],
        }

    async def reported() -> bool:
        events = {e["reason"] for e in await events_of(kube, namespace, "p")}
        return {"SyncError", "Kept"} <= events

    async def applied() -> bool:
        parent = await get(kube, THINGS, namespace, "p")
        status = (parent or {}).get("status") or {}
        reasons = [c["reason"] for c in status.get("conditions") or ()]
        return status.get("phase") == "Up" and reasons == ["Ok"]

    async with composite_controller(kube, hooks, answer) as name:
        await thing(kube, namespace, "p", name, {})
        await eventually(reported, message=stack.logs)
        await eventually(applied, message=stack.logs)
    events = {e["reason"]: e for e in await events_of(kube, namespace, "p")}
    message = events["SyncError"]["message"]
    assert events["SyncError"]["type"] == "Warning"
    assert "events[0].type" in message and "conditions[0].status" in message
    assert events["Kept"]["type"] == "Warning"
