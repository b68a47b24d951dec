"""Hosted controllers as the coordinator manages them, with real processes.

- An invalid CompositeController (unknown resource, parent without the status subresource, no
  sync hook, bad selector) gets a Warning event and is not run; the others keep running.
- Editing one controller does not restart the informers another one uses.
- ``resyncPeriodSeconds`` resyncs a parent periodically.
- Customize hooks: related objects reach the sync hook (v1 and v2 keying and scoping) and
  changes of related objects resync their parents.
Nothing here depends on the embedded cluster.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.e2e.harness import Processes, eventually
from tests.e2e.hookserver import HookServer

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

THINGS = Resource("e2e.metashard.io", "v1", "things", "Thing", True, subresources=("status",))
SECRETS = Resource("", "v1", "secrets", "Secret", True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
EVENTS = Resource("", "v1", "events", "Event", True)
CCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", "CompositeController", False
)
SELECTED_BY = "e2e.metashard.io/controller"

Make = Callable[..., Awaitable[str]]


@pytest_asyncio.fixture
async def make_controller(kube: Client, hooks: HookServer, stack: Processes) -> AsyncIterator[Make]:
    made: list[str] = []

    async def make(
        spec: dict[str, Any] | Callable[[str], dict[str, Any]], *, name: str | None = None
    ) -> str:
        """Create a controller; ``spec`` may be a function of the generated name."""
        name = name or f"e2e-{secrets.token_hex(3)}"
        if callable(spec):
            spec = spec(name)
        body = {
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "CompositeController",
            "metadata": {"name": name},
            "spec": spec,
        }
        await kube.create(CCS, body)
        made.append(name)
        return name

    yield make
    for name in made:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CCS, name)


def things_spec(name: str, hooks: HookServer, **extra: Any) -> dict[str, Any]:
    return {
        "generateSelector": True,
        "parentResource": {
            "apiVersion": "e2e.metashard.io/v1",
            "resource": "things",
            "labelSelector": {"matchLabels": {SELECTED_BY: name}},
        },
        "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
        "hooks": {"sync": {"webhook": {"url": hooks.url(name, "sync")}}},
        **extra,
    }


async def thing(kube: Client, namespace: str, controller: str, name: str = "p") -> dict[str, Any]:
    return await kube.create(
        THINGS,
        {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Thing",
            "metadata": {"name": name, "namespace": namespace, "labels": {SELECTED_BY: controller}},
            "spec": {"v": 1},
        },
    )


async def status_of(kube: Client, namespace: str, name: str = "p") -> dict[str, Any]:
    obj = await kube.get(THINGS, name, namespace=namespace)
    return obj.get("status") or {}


async def warnings_about(kube: Client, name: str) -> list[dict[str, Any]]:
    events = await kube.list(
        EVENTS, namespace="default", field_selector=f"involvedObject.name={name}"
    )
    return [e for e in events.items if e.get("type") == "Warning"]


async def test_invalid_controllers_are_reported_and_not_run(
    kube: Client, namespace: str, hooks: HookServer, make_controller: Make
) -> None:
    sync_url = {"webhook": {"url": "http://127.0.0.1:9/never"}}
    bad = {
        "unknown-resource": {
            "parentResource": {"apiVersion": "nosuch.example.com/v1", "resource": "ghosts"},
            "hooks": {"sync": sync_url},
        },
        "no-status": {
            "parentResource": {"apiVersion": "e2e.metashard.io/v1", "resource": "plains"},
            "hooks": {"sync": sync_url},
        },
        "no-sync-hook": {
            "parentResource": {"apiVersion": "e2e.metashard.io/v1", "resource": "things"},
            "hooks": {},
        },
        "bad-selector": {
            "parentResource": {
                "apiVersion": "e2e.metashard.io/v1",
                "resource": "things",
                "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Sometimes"}]},
            },
            "hooks": {"sync": sync_url},
        },
    }
    names = {
        case: await make_controller(spec, name=f"e2e-{case}-{secrets.token_hex(2)}")
        for case, spec in bad.items()
    }
    good = await make_controller(lambda n: things_spec(n, hooks))
    hooks.program(good, lambda hook, request: {"status": {"ok": True}, "children": []})
    await thing(kube, namespace, good)

    async def good_converged() -> bool:
        return (await status_of(kube, namespace)).get("ok") is True

    await eventually(good_converged, within=30)
    for case, name in names.items():

        async def reported(name: str = name) -> bool:
            return bool(await warnings_about(kube, name))

        await eventually(reported, within=30, message=f"no Warning event for {case}")
        (event, *_) = await warnings_about(kube, name)
        assert event["reason"] in ("CreateError", "SyncError")
        assert event["source"]["component"] == "metacontroller"
        expected = {
            "unknown-resource": "ghosts",
            "no-status": "does not have subresource 'Status' enabled",
            "no-sync-hook": "sync",
            "bad-selector": "Sometimes",
        }[case]
        assert expected in event["message"], event["message"]


async def test_editing_one_controller_keeps_the_informers_of_others(
    kube: Client, namespace: str, hooks: HookServer, stack: Processes, make_controller: Make
) -> None:
    coordinator = stack.procs[0]
    a = await make_controller(lambda n: things_spec(n, hooks))
    b = await make_controller(lambda n: things_spec(n, hooks))
    for name in (a, b):
        hooks.program(name, lambda hook, request: {"status": {"seen": True}, "children": []})
    await thing(kube, namespace, a, "pa")
    await thing(kube, namespace, b, "pb")

    async def both() -> bool:
        return all([(await status_of(kube, namespace, n)).get("seen") for n in ("pa", "pb")])

    await eventually(both, within=30)

    async def relists() -> float:
        total = 0.0
        for resource in ("things.v1.e2e.metashard.io", "configmaps.v1"):
            for reason in ("initial", "expired"):
                total += (
                    await coordinator.metric(
                        "metashard_informer_relists_total", {"resource": resource, "reason": reason}
                    )
                    or 0.0
                )
        return total

    before = await relists()
    cc = await kube.get(CCS, a)
    cc["spec"]["resyncPeriodSeconds"] = 3600
    await kube.replace(CCS, cc)
    await thing(kube, namespace, b, "pb2")

    async def b_still_works() -> bool:
        return bool((await status_of(kube, namespace, "pb2")).get("seen"))

    await eventually(b_still_works, within=30)
    assert await relists() == before


async def test_resync_period_calls_the_hook_again(
    kube: Client, namespace: str, hooks: HookServer, make_controller: Make
) -> None:
    name = await make_controller(lambda n: things_spec(n, hooks, resyncPeriodSeconds=1))
    hooks.program(name, lambda hook, request: {"status": {}, "children": []})
    await thing(kube, namespace, name)

    async def resynced() -> bool:
        return len(hooks.calls(name)) >= 4

    await eventually(resynced, within=20, message=lambda: f"{len(hooks.calls(name))} calls")


@pytest_asyncio.fixture
async def other_namespace(kube: Client) -> AsyncIterator[str]:
    name = f"e2e-{secrets.token_hex(4)}"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    with contextlib.suppress(errors.NotFound):
        await kube.delete(NAMESPACES, name)


async def secret(kube: Client, namespace: str, name: str, group: str) -> None:
    await kube.create(
        SECRETS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": {"group": group}},
            "stringData": {"k": "v"},
        },
    )


@pytest.mark.parametrize("version", ["v1", "v2"])
async def test_customize_hook_brings_related_objects(
    kube: Client,
    namespace: str,
    other_namespace: str,
    hooks: HookServer,
    make_controller: Make,
    version: str,
) -> None:
    group = secrets.token_hex(3)
    name = f"e2e-cz-{version}-{secrets.token_hex(2)}"
    rule: dict[str, Any] = {
        "apiVersion": "v1",
        "resource": "secrets",
        "labelSelector": {"matchLabels": {"group": group}},
    }
    if version == "v2":
        rule["namespace"] = "*"

    def answer(hook: str, request: dict[str, Any]) -> dict[str, Any]:
        if hook == "customize":
            assert request["parent"]["metadata"]["name"] == "p"
            return {"relatedResources": [rule]}
        related = request["related"]
        return {"status": {"related": sorted(related.get("Secret.v1", {}))}, "children": []}

    hooks.program(name, answer)
    await make_controller(
        {
            **things_spec(name, hooks),
            "hooks": {
                "sync": {"webhook": {"url": hooks.url(name, "sync")}, "version": version},
                "customize": {"webhook": {"url": hooks.url(name, "customize")}, "version": version},
            },
        },
        name=name,
    )
    await secret(kube, namespace, "mine", group)
    await secret(kube, other_namespace, "elsewhere", group)
    await secret(kube, namespace, "unrelated", "not-" + group)
    await thing(kube, namespace, name)
    if version == "v1":  # v1: relative names, the parent's namespace only
        first, later = ["mine"], ["mine", "second"]
    else:  # v2: namespace/name keys, any namespace the rule allows
        first = sorted([f"{namespace}/mine", f"{other_namespace}/elsewhere"])
        later = sorted([*first, f"{namespace}/second"])

    async def related_is(expected: list[str]) -> bool:
        return (await status_of(kube, namespace)).get("related") == expected

    await eventually(
        lambda: related_is(first), within=30, message=lambda: f"status {hooks.calls(name)[-1:]}"
    )
    # A new related object is routed to the parent, which syncs again.
    await secret(kube, namespace, "second", group)
    await eventually(lambda: related_is(later), within=30)
    assert any(hook == "customize" for _, hook, _ in hooks.calls(name))
