"""A hook answering 200 with what is not a hook answer is counted as ``invalid-response``.

The workers decode a hook's answer inside the hook client's call, before it is counted, so
``metacontroller_sync_requests_total`` on the worker that owns the parent says
``code="invalid-response"`` for a 200 whose body is not JSON, or is JSON of the wrong shape,
and has no ``code="200"`` series for that controller; the parent gets its ``SyncError``
event. A controller whose hook answers properly is counted under ``"200"``. On the embedded
cluster or, with ``METASHARD_E2E_KUBECONFIG``, on a real one.
"""

from __future__ import annotations

from typing import Any

import pytest

from proto.kube.client import Client
from tests.e2e.harness import Processes, eventually
from tests.e2e.hookserver import Handler, HookServer, Reply
from tests.e2e.test_composite import CCS, fanout, make_controller, thing
from tests.e2e.test_hook_transport import _has_sync_error

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

ANSWERS = {
    "not-json": Reply(body=b"<html>502 from a proxy, sent as 200</html>"),
    "wrong-shape": Reply.json({"children": "none"}),
}


def always(reply: Reply) -> Handler:
    def answer(hook: str, request: dict[str, Any]) -> Reply:
        return reply

    return answer


async def test_a_200_that_is_no_hook_answer_counts_as_invalid_response(
    kube: Client, namespace: str, hooks: HookServer, stack: Processes
) -> None:
    names = {
        why: await make_controller(kube, hooks, always(reply)) for why, reply in ANSWERS.items()
    }
    names["fine"] = await make_controller(kube, hooks, fanout)
    workers = [p for p in stack.procs if p.name.startswith("worker")]

    async def counted(name: str, code: str) -> float | None:
        labels = {"controller_name": name, "code": code, "method": "post"}
        samples = [await w.metric("metacontroller_sync_requests_total", labels) for w in workers]
        found = [s for s in samples if s is not None]
        return sum(found) if found else None

    try:
        for why, name in names.items():
            await thing(kube, namespace, f"p-{why}", name, {"children": 1, "data": "one"})
        for why in ANSWERS:

            async def seen(name: str = names[why]) -> bool:
                return (await counted(name, "invalid-response") or 0) >= 1

            async def reported(why: str = why) -> bool:
                return await _has_sync_error(kube, namespace, f"p-{why}", "sync hook failed")

            await eventually(seen, within=20, message=f"{why}: no invalid-response counted")
            await eventually(reported, within=20, message=f"{why}: no SyncError")

        async def fine() -> bool:
            return (await counted(names["fine"], "200") or 0) >= 1

        await eventually(fine, within=20, message="the proper answers were not counted as 200")
        found = {why: await counted(names[why], "200") for why in ANSWERS}
        assert found == {why: None for why in ANSWERS}, found
    finally:
        for name in names.values():
            await kube.delete(CCS, name)
