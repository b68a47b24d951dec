"""A CompositeController, its parents and children in memory, for reconciler tests.

``World(...)`` holds a ``loadtest.apiserver.inprocess.MemoryCluster``, a scripted hook and the
events the reconciler emitted; ``await world.sync(name)`` runs one reconcile of a parent from a
fresh snapshot and returns its outcome (or raises what the reconcile raised). The hook answers with
``world.answer(request)``: by default the fanout job (``spec.children`` ConfigMaps named
``<parent>-<i>`` with ``data.value = spec.data``); tests replace it. ``world.wall`` is the
wall clock (seconds since the epoch) the steps stamp condition transitions with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from loadtest.apiserver.inprocess import MemoryCluster, ScriptedHooks
from proto.hooks.client import HookEndpoint
from proto.kube.resources import Resource
from proto.wire import ControllerDef, ControllerKind, ParentKey, ResourceInfo
from workers.kinds.composite.steps import CompositeSteps
from workers.reconcile import Claim, Outcome, Reconciler, ReconcileRequest
from workers.sync.template import SyncTemplate

THINGS = Resource("e2e.metashard.io", "v1", "things", "Thing", True, subresources=("status",))
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
NS = "ns"


def controller(
    *,
    method: str = "InPlace",
    generate_selector: bool = True,
    finalize: bool = False,
    version: str = "v1",
    label_selector: dict[str, Any] | None = None,
    secrets: bool = False,
) -> dict[str, Any]:
    hooks: dict[str, Any] = {"sync": {"version": version, "webhook": {"url": "http://hook/sync"}}}
    if finalize:
        hooks["finalize"] = {"version": version, "webhook": {"url": "http://hook/finalize"}}
    parent: dict[str, Any] = {"apiVersion": "e2e.metashard.io/v1", "resource": "things"}
    if label_selector is not None:
        parent["labelSelector"] = label_selector
    children = [
        {"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": method}}
    ]
    if secrets:
        children.append({"apiVersion": "v1", "resource": "secrets"})
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": "cc", "uid": "cc-uid"},
        "spec": {
            "generateSelector": generate_selector,
            "parentResource": parent,
            "childResources": children,
            "hooks": hooks,
        },
    }


def definition(
    cc: dict[str, Any], *, parent_subresources: tuple[str, ...] = ("status",)
) -> ControllerDef:
    children = [ResourceInfo("v1", "configmaps", "ConfigMap", True, ())]
    if len(cc["spec"]["childResources"]) > 1:
        children.append(ResourceInfo("v1", "secrets", "Secret", True, ()))
    return ControllerDef(
        ControllerKind.COMPOSITE,
        cc["metadata"]["name"],
        "cc-uid",
        "1",
        orjson.dumps(cc),
        (
            ResourceInfo("e2e.metashard.io/v1", "things", "Thing", True, parent_subresources),
            *children,
        ),
    )


def fanout(request: dict[str, Any]) -> dict[str, Any]:
    """The fanout job's hook: K ConfigMaps, status ``{children: K}``; finalize: nothing left."""
    if request["finalizing"]:
        return {"children": [], "finalized": True}
    parent = request["parent"]
    spec = parent.get("spec") or {}
    count = spec.get("children", 0)
    children = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{parent['metadata']['name']}-{i}"},
            "data": {"value": spec.get("data", ""), "index": str(i)},
        }
        for i in range(count)
    ]
    return {"status": {"children": count}, "children": children}


class Events:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str, str]] = []

    def emit(self, obj: Any, type: str, reason: str, message: str) -> None:
        self.emitted.append((obj["metadata"]["name"], type, reason, message))


class World:
    def __init__(self, **options: Any) -> None:
        self.cc = controller(**options)
        self.cluster = MemoryCluster()
        self.events = Events()
        self.answer: Callable[[dict[str, Any]], Any] = fanout
        self.hooks = ScriptedHooks(self._respond)
        self.wall = 1_767_225_600.0  # 2026-01-01T00:00:00Z, the steps' wall clock
        self.reconciler = self.built(definition(self.cc))
        self.last_request: ReconcileRequest | None = None

    def built(self, definition: ControllerDef, **options: Any) -> Reconciler:
        """A CompositeController reconciler of ``definition`` on this world's cluster, hook and
        events; ``options`` go to ``CompositeSteps``."""
        steps = CompositeSteps(
            definition,
            writer=self.cluster,
            events=self.events,
            wall_clock=lambda: self.wall,
            **options,
        )
        return SyncTemplate(
            definition, steps, writer=self.cluster, hooks=self.hooks, events=self.events
        )

    def _respond(self, request: dict[str, Any]) -> bytes:
        answer = self.answer(request)
        if isinstance(answer, Exception):
            raise answer
        return answer if isinstance(answer, bytes) else orjson.dumps(answer)

    @property
    def requests(self) -> list[tuple[HookEndpoint, dict[str, Any]]]:
        return self.hooks.requests

    async def parent(
        self, name: str = "p", *, spec: dict[str, Any] | None = None, **meta: Any
    ) -> dict[str, Any]:
        body = {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Thing",
            "metadata": {"name": name, "namespace": NS, **meta},
            "spec": spec if spec is not None else {"children": 2, "data": "one"},
        }
        return await self.cluster.create(THINGS, body)

    async def child(
        self, name: str, *, resource: Resource = CONFIGMAPS, **meta: Any
    ) -> dict[str, Any]:
        body = {
            "apiVersion": "v1",
            "kind": resource.kind,
            "metadata": {"name": name, "namespace": NS, **meta},
            "data": {"value": "foreign"},
        }
        return await self.cluster.create(resource, body)

    def get(self, name: str, resource: Resource = CONFIGMAPS) -> dict[str, Any] | None:
        return self.cluster.get(resource, NS, name)

    async def sync(
        self, name: str = "p", *, claim: Claim | None = None, **snapshot: Any
    ) -> Outcome:
        key = ParentKey("CompositeController", "cc", "things.e2e.metashard.io", NS, name)
        children = (
            [CONFIGMAPS, SECRETS] if len(self.cc["spec"]["childResources"]) > 1 else [CONFIGMAPS]
        )
        request = ReconcileRequest(
            key, self.cluster.snapshot(key, THINGS, children, **snapshot), claim or Claim()
        )
        self.last_request = request
        self.cluster.calls.clear()
        return await self.reconciler.reconcile(request)

    def writes(self) -> list[tuple[str, str, str, str, str]]:
        return self.cluster.writes()


def owner(parent: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "e2e.metashard.io/v1",
        "kind": "Thing",
        "name": parent["metadata"]["name"],
        "uid": parent["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
