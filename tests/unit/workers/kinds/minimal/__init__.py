"""A test-only controller kind, the least a kind supplies to the sync template.

``MinimalController``: its definition's first resource is the parent, the others its child
types. The controller object names one sync hook (``spec.hook``, a URL; v2, strict). The
parent's children are the objects of those types it controls; every parent is selected; there
is no finalize hook and nothing is written to the parent itself. It lives with the tests, and
reaches the workers as a plug-in: ``workers.kinds.registry(minimal)``, or ``--reconciler
tests.unit.workers.kinds.minimal:builder``.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

from proto.api.controllers import Hook, HookName, HookVersion, ResponseMode, UpdateMethod, Webhook
from proto.api.hooks import SyncResponse, decode_sync_response
from proto.wire import ControllerDef, ParentKey
from workers.kinds import registry
from workers.kinds.plugins import Reconcilers, WorkerContext
from workers.reconcile import ReconcileRequest, ReconcilerFactory
from workers.sync import hookrequest
from workers.sync.children import ChildTypes, Target
from workers.sync.observed import Observed
from workers.sync.template import (
    Answer,
    Children,
    HookCall,
    KindSpec,
    Parent,
    Phase,
    desired_children,
)

KIND = "MinimalController"


def steps(definition: ControllerDef, context: WorkerContext) -> MinimalSteps:
    return MinimalSteps(definition)


def builder(context: WorkerContext) -> ReconcilerFactory:
    """For ``--reconciler``: the built-in kinds and this one."""
    return Reconcilers(context, registry(sys.modules[__name__]))


class MinimalSteps:
    def __init__(self, definition: ControllerDef) -> None:
        parent, *types = definition.resources
        hook = Hook(
            HookVersion.V2,
            Webhook(orjson.loads(definition.object)["spec"]["hook"]),
            ResponseMode.STRICT,
        )
        self.spec = KindSpec(
            kind=KIND,
            name=definition.name,
            finalizer=f"test.metashard.io/minimal-{definition.name}",
            hooks={HookName.SYNC: hook},
            children=ChildTypes.of(types, [UpdateMethod.IN_PLACE] * len(types)),
            phases=(Phase.PARENT, Phase.CHILDREN, Phase.FINALIZER),
            encode=hookrequest.encode,
            decode=decode_sync_response,
        )
        self._parent = Target.of(parent)

    def target(self, key: ParentKey) -> Target:
        return self._parent

    def selected(self, target: Target, obj: dict[str, Any]) -> bool:
        return True

    async def observe(self, request: ReconcileRequest, parent: Parent) -> Children:
        snapshot = request.snapshot.children
        owned: dict[Any, list[Observed]] = {}
        for type_key in self.spec.children.targets:
            found = (Observed.decode(raw) for raw in snapshot.get(type_key.group_key, ()))
            owned[type_key] = [c for c in found if c.controller_uid == parent.uid]
        return Children(owned)

    async def answer(
        self,
        request: ReconcileRequest,
        parent: Parent,
        children: Children,
        call: HookCall[SyncResponse],
    ) -> Answer[None]:
        response = await call(parent.obj, parent.raw, request.snapshot.related)
        desired = desired_children(response.children, parent, children, self.spec.children)
        return Answer(desired, response.resync_after_seconds, response.finalized, update=None)

    async def update_parent(
        self, request: ReconcileRequest, target: Target, obj: dict[str, Any], answer: Answer[None]
    ) -> dict[str, Any]:
        return obj
