"""What a CompositeController supplies to the sync template (``workers.sync.template``).

``CompositeSteps(definition, writer=..., events=...)`` are one controller's steps; the
template (``SyncTemplate(definition, steps, ...)``) runs them:

- The parent is the controller's ``parentResource``, selected by its ``labelSelector``; it
  must have the status subresource. The finalizer is
  ``metacontroller.io/compositecontroller-<name>``.
- Claim: the children selector is ``controller-uid=<parent uid>`` under ``generateSelector``,
  else the parent's ``spec.selector``, which must not be empty. Children are claimed, adopted
  and released before the hook is called (``workers.sync.claims``).
- The hook's answer is checked (``proto.api.hooks``): namespaces defaulted,
  ``controller-uid`` added, types declared, labels matched by the selector.
- The phases run as in Metacontroller: ``FINALIZER`` (``finalized: true`` from the finalize
  hook removes our finalizer), ``CHILDREN``, then ``PARENT``: the status
  (``workers.sync.status``), with the answer's ``conditions`` merged in by type
  (``workers.sync.conditions``), is PUT to ``/status`` only when it differs, with the
  snapshot's resourceVersion as the precondition; NotFound and Conflict are let go (the
  parent is gone, or changed and will be synced again).

In ``loose`` mode, unknown or duplicate fields in hook answers are logged once per distinct
problem and controller, not on every sync.

Differences from Metacontroller, on purpose:

- No GET: not of the parent before a status update or an adoption, not of a child before an
  adoption or release. The snapshot is as fresh as the coordinator's cache, and every such
  write carries a resourceVersion precondition; a conflict raises ``StaleSnapshot``.
- The hook's children are all checked before any write; Metacontroller removes the finalizer
  of a ``finalized`` parent before it finds a bad child.
- ``finalized`` counts only in an answer of the finalize hook. Metacontroller also honours it
  from sync, removing the finalizer only to add it back on the next sync.
- A parent that the finalizer removal let go (deleting, no finalizer left) gets no status
  write: it no longer exists.
- With a ``RollingRecreate`` or ``RollingInPlace`` child type, the hook is called through
  ``workers.kinds.composite.rollouts``: ControllerRevisions are claimed and written, the hook
  is called per revision (the latest, and each older one owning children), and children
  move to the latest revision one at a time
  (``workers.kinds.composite.rollout_plan``). A parent being deleted without a finalize hook gets
  a plain sync, as in Metacontroller. A child whose only difference is its
  ``controller-revision-hash`` label is updated in place, never recreated.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from proto.api import names
from proto.api.controllers import HookName, parse_composite_controller
from proto.api.hooks import SyncResponse, decode_sync_response
from proto.api.objectmap import TypeKey
from proto.api.revisions import DEFAULT_HISTORY_LIMIT, REVISION_HASH_LABEL
from proto.api.selectors import Selector, SelectorError, from_label_selector, from_match_labels
from proto.kube import errors
from proto.runtime.logs import get_logger
from proto.wire import ControllerDef, ParentKey
from workers.apply import ControllerRef
from workers.kinds.composite import rollouts
from workers.reconcile import ReconcileRequest
from workers.sync import children, conditions, hookrequest, status
from workers.sync.children import Target
from workers.sync.claims import Claimant, claim, release_patch
from workers.sync.errors import SyncFailure
from workers.sync.hookcall import Events
from workers.sync.observed import Observed
from workers.sync.patches import adopt, describe, guarded_patch
from workers.sync.template import (
    Answer,
    Children,
    HookCall,
    KindSpec,
    Parent,
    Phase,
    Related,
    desired_children,
)
from workers.sync.writer import Writer

log = get_logger("metashard.composite")

IN_PLACE_LABELS = frozenset((REVISION_HASH_LABEL,))
"""A change of only these labels is written in place, whatever the update method."""

Status = dict[str, Any] | None
"""The hook's status: what a CompositeController answer asks of its parent."""


class CompositeSteps:
    """A CompositeController's steps of the sync template (see the module docstring)."""

    def __init__(
        self,
        definition: ControllerDef,
        *,
        writer: Writer,
        events: Events,
        cluster_revision_namespace: str = "default",
        revision_history_limit: int = DEFAULT_HISTORY_LIMIT,
        server_side: bool = False,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """``wall_clock``: seconds since the epoch, the ``lastTransitionTime`` of a condition
        that changes."""
        spec = parse_composite_controller(orjson.loads(definition.object))
        if len(definition.resources) != 1 + len(spec.children):
            raise ValueError(
                f"{spec.name}: {len(definition.resources)} resources for 1 parent and "
                f"{len(spec.children)} child types"
            )
        parent, *child_infos = definition.resources
        if "status" not in parent.subresources:
            raise ValueError(
                f"{spec.name}: parent resource {parent.group_resource} has no status "
                "subresource (a CompositeController parent must be a custom resource with it)"
            )
        types = children.ChildTypes.of(
            child_infos, [child.update_strategy.method for child in spec.children]
        )
        self.spec = KindSpec(
            kind=names.COMPOSITE_CONTROLLER,
            name=spec.name,
            finalizer=spec.finalizer,
            hooks={HookName.SYNC: spec.hooks.sync, HookName.FINALIZE: spec.hooks.finalize},
            children=types,
            phases=(Phase.FINALIZER, Phase.CHILDREN, Phase.PARENT),
            encode=hookrequest.encode,
            decode=decode_sync_response,
            in_place_labels=IN_PLACE_LABELS,
        )
        self._controller = spec
        self._writer = writer
        self._wall_clock = wall_clock
        self._parent = Target.of(parent)
        self._rollouts = (
            rollouts.Rollouts(
                spec,
                writer=writer,
                events=events,
                parent=self._parent.resource,
                kinds=list(types.targets),
                cluster_revision_namespace=cluster_revision_namespace,
                default_history_limit=revision_history_limit,
                server_side=server_side,
            )
            if spec.rolling
            else None
        )

    def target(self, key: ParentKey) -> Target:
        return self._parent

    def selected(self, target: Target, obj: dict[str, Any]) -> bool:
        return self._controller.parent.label_selector.matches(obj["metadata"].get("labels"))

    async def observe(self, request: ReconcileRequest, parent: Parent) -> Children:
        """The claimed children of each declared type, after adoptions and releases."""
        selector = self._selector(parent)
        claimant = Claimant(parent.uid, parent.namespace, parent.deleting, selector)
        snapshot = request.snapshot.children
        owner = self._owner_reference(parent)
        claimed: dict[TypeKey, list[Observed]] = {}
        problems: list[str] = []
        for type_key, target in self.spec.children.targets.items():
            candidates = [Observed.decode(raw) for raw in snapshot.get(type_key.group_key, ())]
            decision = claim(candidates, claimant)
            found = claimed[type_key] = list(decision.owned)
            for child in decision.release:
                await guarded_patch(
                    self._writer,
                    target,
                    child,
                    release_patch(child, claimant.uid),
                    what="release " + children.describe(type_key, child.namespace, child.name),
                    request=request,
                    problems=problems,
                    controller=self.spec.name,
                )
            for child in decision.adopt:
                adopted = await adopt(
                    self._writer,
                    target,
                    child,
                    owner,
                    what="adopt " + children.describe(type_key, child.namespace, child.name),
                    request=request,
                    problems=problems,
                    controller=self.spec.name,
                )
                if adopted is not None:
                    found.append(adopted)
        if problems:
            raise SyncFailure(
                f"can't claim children of {parent.describe()}: " + "; ".join(problems)
            )
        return Children(claimed, selector=selector)

    async def answer(
        self,
        request: ReconcileRequest,
        parent: Parent,
        children: Children,
        call: HookCall[SyncResponse],
    ) -> Answer[Status]:
        """One call with the parent as it is, or a rollout's calls, one per revision."""

        async def checked(
            version: dict[str, Any], raw: bytes, related: Related, revision: str | None
        ) -> rollouts.Checked:
            response = await call(version, raw, related, revision)
            wanted = desired_children(
                response.children,
                parent,
                children,
                self.spec.children,
                generate_selector=self._controller.generate_selector,
            )
            return response, wanted

        has_finalize = self._controller.hooks.finalize is not None
        if self._rollouts is not None and not (parent.deleting and not has_finalize):
            claimant = Claimant(parent.uid, parent.namespace, parent.deleting, children.selector)
            return await self._rollouts.sync(
                request,
                parent=parent.obj,
                raw=parent.raw,
                claimant=claimant,
                observed=children.owned,
                call=checked,
            )
        response, desired = await checked(parent.obj, parent.raw, request.snapshot.related, None)
        return Answer(
            desired,
            response.resync_after_seconds,
            response.finalized,
            update=response.status,
            reports=response.reports,
        )

    async def update_parent(
        self, request: ReconcileRequest, target: Target, obj: dict[str, Any], answer: Answer[Status]
    ) -> dict[str, Any]:
        """The status, with the answer's conditions, PUT to ``/status`` when it differs."""
        metadata = obj["metadata"]
        wanted = status.desired(answer.update, metadata.get("generation"))
        if answer.reports.conditions:
            wanted = conditions.merged(
                wanted,
                answer.reports.conditions,
                observed=obj.get("status"),
                now=conditions.timestamp(self._wall_clock()),
            )
        if not status.changed(obj, wanted):
            return obj
        try:
            written = await self._writer.replace(
                target.resource,
                status.body(obj, wanted),
                namespace=metadata.get("namespace") or None,
                name=metadata["name"],
                subresource="status",
            )
        except (errors.NotFound, errors.Conflict) as err:
            what = describe(target.resource.kind, obj)
            log.debug("status not written", parent=what, reason=err.reason)
            return obj
        except errors.KubeError as err:
            what = describe(target.resource.kind, obj)
            raise SyncFailure(f"can't update status for {what}: {err}") from None
        request.wrote(target.group_resource, written, action="update status of")
        return written

    # --- helpers --------------------------------------------------------------------------

    def _selector(self, parent: Parent) -> Selector:
        if self._controller.generate_selector:
            return from_match_labels({names.CONTROLLER_UID_LABEL: parent.uid})
        parent_spec = parent.obj.get("spec")
        found = parent_spec.get("selector") if isinstance(parent_spec, dict) else None
        if not isinstance(found, dict) or not (
            found.get("matchLabels") or found.get("matchExpressions")
        ):
            raise SyncFailure(
                f"can't get label selector of {parent.describe()}: .spec.selector must "
                "have either matchLabels, matchExpressions, or both"
            )
        try:
            return from_label_selector(found)
        except SelectorError as err:
            raise SyncFailure(
                f"can't convert label selector of {parent.describe()}: {err}"
            ) from None

    def _owner_reference(self, parent: Parent) -> dict[str, Any]:
        resource = self._parent.resource
        return ControllerRef(
            api_version=resource.api_version,
            kind=resource.kind,
            name=parent.obj["metadata"]["name"],
            uid=parent.uid,
        ).as_owner_reference()
