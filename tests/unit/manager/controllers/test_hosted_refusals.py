"""manager.controllers.hosted and .refusals: a request the API server refuses (403) is a Warning
event on each controller that needs it, once while it lasts, and why it does not run."""

from __future__ import annotations

import asyncio

import pytest

from manager.controllers.refusals import Refusals
from proto.kube.errors import Forbidden
from proto.kube.refusal import Refusal
from tests.unit.manager.controllers.test_hosted import (
    DCS,
    FINALIZER,
    PODS,
    SERVICES,
    World,
    cached,
    decorator,
)

USER = "system:serviceaccount:ms:metashard"
WATCH_PODS = Refusal("watch", "pods", "", None, USER)
LIST_SERVICES = Refusal("list", "services", "", "ns", USER)


def world(refusals: Refusals) -> World:
    return World(refusals=refusals)


def forbidden_events(w: World) -> list[str]:
    return [message for _, reason, message in w.recorder.events if reason == "Forbidden"]


@pytest.mark.asyncio
async def test_a_refused_watch_is_reported_on_the_controller_once_while_it_lasts() -> None:
    refusals = Refusals()
    w = world(refusals)
    w.put(decorator("a"))
    await w.sync()
    assert w.controllers.stalled == {}
    refusals.refused(PODS, WATCH_PODS)
    refusals.refused(PODS, WATCH_PODS)  # the informer retries: the same refusal
    w.hosted._report_refusals()
    w.hosted._report_refusals()
    assert forbidden_events(w) == [
        "ServiceAccount ms/metashard may not watch pods at the cluster scope (403 Forbidden), "
        "so the controller cannot run; `metashard rbac` prints the rules the controllers need"
    ]
    why = "ServiceAccount ms/metashard may not watch pods at the cluster scope (403 Forbidden)"
    assert w.controllers.stalled == {("DecoratorController", "dc"): why}
    # A second refusal is reported too; once both end, nothing is stalled.
    refusals.refused(SERVICES, LIST_SERVICES)
    w.hosted._report_refusals()
    assert len(forbidden_events(w)) == 2
    assert "may not list services in namespace ns" in forbidden_events(w)[1]
    refusals.allowed(PODS)
    refusals.allowed(SERVICES)
    w.hosted._report_refusals()
    assert w.controllers.stalled == {}
    # Refused again later: a new refusal, reported again.
    refusals.refused(PODS, WATCH_PODS)
    w.hosted._report_refusals()
    assert len(forbidden_events(w)) == 3


@pytest.mark.asyncio
async def test_the_running_loop_reports_a_refusal_at_once() -> None:
    refusals = Refusals(credentials="ServiceAccount ms/from-the-token")
    w = world(refusals)
    w.put(decorator("a"))
    task = asyncio.create_task(w.hosted.run())
    try:
        for _ in range(100):
            if w.controllers.views:
                break
            await asyncio.sleep(0.01)
        refusals.refused(PODS, WATCH_PODS)
        for _ in range(100):
            if forbidden_events(w):
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    (message,) = forbidden_events(w)
    assert message.startswith("ServiceAccount ms/from-the-token may not watch pods")


@pytest.mark.asyncio
async def test_a_refused_finalizer_removal_is_reported_on_the_deleted_controller() -> None:
    refusals = Refusals()
    w = world(refusals)
    w.put(decorator("a"))
    await w.sync()
    pod = {"metadata": {"name": "p", "namespace": "ns", "finalizers": [FINALIZER]}}
    w.informers.acquire(PODS).store.upsert(cached(pod))

    async def refuse(*_: object, **__: object) -> dict[str, object]:
        message = (
            f'pods "p" is forbidden: User "{USER}" cannot patch resource "pods" in API group "" '
            'in the namespace "ns"'
        )
        raise Forbidden(403, {"message": message}, method="PATCH")

    w.writer.patch = refuse  # type: ignore[method-assign]
    w.informers.acquire(DCS).store.delete("", "dc")
    await w.sync()
    assert forbidden_events(w) == [
        "ServiceAccount ms/metashard may not patch pods in namespace ns (403 Forbidden), so the "
        f"finalizer {FINALIZER} stays on 1 objects; `metashard rbac` prints the rules the "
        "controllers need"
    ]
