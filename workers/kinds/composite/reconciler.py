"""The CompositeController reconciler: one sync of one parent, as Metacontroller does it.

``CompositeReconciler(definition, writer=..., hooks=..., events=...)`` runs one controller.
Each ``reconcile`` follows Metacontroller's ``syncParentObject``; the decisions are pure
functions in their own modules, the writes happen here:

1. No parent in the snapshot (deleted, or not selected by ``parentResource.labelSelector``),
   or a parent that is not selected and does not carry our finalizer: nothing to do.
2. Our finalizer is added or removed (``workers.sync.finalizer``).
3. The children selector: ``controller-uid=<parent uid>`` under ``generateSelector``, else
   the parent's ``spec.selector``, which must not be empty.
4. Children are claimed, adopted and released (``workers.sync.claims``).
5. The sync hook is called, or the finalize hook (``finalizing: true``) for a parent being
   deleted or unselected. The request embeds the snapshot's raw JSON
   (``workers.sync.hookrequest``). The hook's TLS material and credentials come resolved in
   the definition (``ControllerDef.connections``); the parent's key is the ETag cache key.
6. The response is decoded and its children checked (``proto.api.hooks``): namespaces
   defaulted, ``controller-uid`` added, types declared, labels matched by the selector.
7. ``finalized: true`` from the finalize hook removes our finalizer.
8. Children are created, updated and deleted (``workers.sync.children``, or
   ``workers.sync.ssa_writes`` under ``--apply-strategy server-side-apply``) while the parent is
   alive, or being deleted under our finalizer without a garbage-collector finalizer.
9. The status (``workers.sync.status``) is PUT to ``/status`` only when it differs, with the
   snapshot's resourceVersion as the precondition; NotFound and Conflict are let go (the
   parent is gone, or changed and will be synced again).
10. Child write errors fail the sync after the status write; ``resyncAfterSeconds`` becomes
    ``Outcome.requeue_after``.

Failures raise ``workers.sync.errors`` errors: a ``SyncFailure`` also emits a ``SyncError``
Warning event on the parent. A malformed hook response, a hook that times out, refuses the
connection or answers an error status fails before anything is written. A 429 raises
``RequeueAfter`` with the hook's ``Retry-After`` delay. Every successful write is reported to
``request.wrote`` (the read-your-writes barrier of the next snapshot).

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
- With a ``RollingRecreate`` or ``RollingInPlace`` child type, step 5 is
  ``workers.kinds.composite.rollouts``: ControllerRevisions are claimed and written, the hook
  is called per revision (the latest, and each older one owning children), and children
  move to the latest revision one at a time
  (``workers.kinds.composite.rollout_plan``). A parent being deleted without a finalize hook gets
  a plain sync, as in Metacontroller. A child whose only difference is its
  ``controller-revision-hash`` label is updated in place, never recreated.
"""

from __future__ import annotations

from typing import Any

import orjson

from proto.api import names
from proto.api.controllers import HookName, UpdateMethod, parse_composite_controller
from proto.api.errors import HookResponseError
from proto.api.hooks import ChildType, DesiredChild, SyncResponse, decode_sync_response
from proto.api.hooks import desired_children as check_children
from proto.api.objectmap import TypeKey
from proto.api.revisions import DEFAULT_HISTORY_LIMIT, REVISION_HASH_LABEL
from proto.api.selectors import Selector, SelectorError, from_label_selector, from_match_labels
from proto.kube import errors
from proto.runtime.logs import get_logger
from proto.wire import ControllerDef
from workers.apply import ControllerRef
from workers.kinds.composite import rollouts
from workers.reconcile import Outcome, ReconcileRequest
from workers.sync import children, finalizer, hookrequest, status
from workers.sync.claims import Claimant, adoption_patch, claim, release_patch
from workers.sync.errors import SyncFailure
from workers.sync.hookcall import Events, HookCaller, Hooks, resource_of
from workers.sync.observed import Observed
from workers.sync.patches import describe, guarded_patch, set_finalizers, sync_finalizer
from workers.sync.ssa_writes import ServerSideApply, applier_of, write_children
from workers.sync.writer import Writer

log = get_logger("metashard.composite")

IN_PLACE_LABELS = frozenset((REVISION_HASH_LABEL,))
"""A change of only these labels is written in place, whatever the update method."""


class CompositeReconciler:
    """Reconciles the parents of one CompositeController (see the module docstring)."""

    def __init__(
        self,
        definition: ControllerDef,
        *,
        writer: Writer,
        hooks: Hooks,
        events: Events,
        cluster_revision_namespace: str = "default",
        revision_history_limit: int = DEFAULT_HISTORY_LIMIT,
        ssa: ServerSideApply | None = None,
    ) -> None:
        """``cluster_revision_namespace``: where the ControllerRevisions of cluster-scoped
        parents live (``--cluster-revision-namespace``); ``revision_history_limit``: the
        childless revisions a parent keeps unless the controller's annotation says otherwise
        (``--revision-history-limit``); ``ssa``: apply children server-side through it
        instead of dynamic apply."""
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
        self._spec = spec
        self._writer = writer
        self._events = events
        self._controller = definition.object
        self._parent = resource_of(parent)
        self._parent_target = children.Target(self._parent, parent.group_resource)
        targets: dict[TypeKey, children.Target] = {}
        self._methods: dict[TypeKey, UpdateMethod] = {}
        self._child_types: list[ChildType] = []
        for info, child in zip(child_infos, spec.children, strict=True):
            type_key = TypeKey(info.api_version, info.kind)
            targets[type_key] = children.Target(resource_of(info), info.group_resource)
            self._methods[type_key] = child.update_strategy.method
            self._child_types.append(ChildType(info.api_version, info.kind, info.namespaced))
        self._targets = targets
        self._child_writer = children.ChildWriter(writer, targets)
        self._applier = applier_of(ssa, definition, targets)
        self._rollouts = (
            rollouts.Rollouts(
                spec,
                writer=writer,
                events=events,
                parent=self._parent,
                kinds=list(targets),
                cluster_revision_namespace=cluster_revision_namespace,
                default_history_limit=revision_history_limit,
                server_side=ssa is not None,
            )
            if spec.rolling
            else None
        )
        self._hooks = HookCaller(
            hooks,
            controller_type=names.COMPOSITE_CONTROLLER,
            controller_name=spec.name,
            defined={HookName.SYNC: spec.hooks.sync, HookName.FINALIZE: spec.hooks.finalize},
            connections=definition.connections,
        )

    async def reconcile(self, request: ReconcileRequest) -> Outcome:
        raw = request.snapshot.parent
        if raw is None:
            return Outcome()
        parent: dict[str, Any] = orjson.loads(raw)
        try:
            return await self._sync(request, raw, parent)
        except SyncFailure as err:
            self._events.emit(
                parent, names.EVENT_TYPE_WARNING, names.REASON_SYNC_ERROR, f"Sync error: {err}"
            )
            raise

    async def _sync(self, request: ReconcileRequest, raw: bytes, parent: dict[str, Any]) -> Outcome:
        spec = self._spec
        ours = spec.finalizer
        metadata = parent["metadata"]
        selected = spec.parent.label_selector.matches(metadata.get("labels"))
        has_finalize = spec.hooks.finalize is not None
        current = await sync_finalizer(
            self._writer,
            self._parent_target,
            parent,
            raw,
            name=ours,
            wanted=has_finalize,
            selected=selected,
            request=request,
        )
        if current is None:
            return Outcome()
        parent, raw, finalizers, deleting = (
            current.obj,
            current.raw,
            current.finalizers,
            current.deleting,
        )

        uid = metadata.get("uid") or ""
        namespace = (metadata.get("namespace") or "") if self._parent.namespaced else ""
        selector = self._selector(parent, uid)
        observed = await self._claim(request, Claimant(uid, namespace, deleting, selector), parent)

        finalizing = finalizer.finalizing(
            has_finalize_hook=has_finalize, deleting=deleting, selected=selected
        )

        async def answer(
            version: dict[str, Any],
            version_raw: bytes,
            related: rollouts.Related,
            revision: str | None,
        ) -> rollouts.Answer:
            response = await self._call(
                request, version, version_raw, observed, namespace, finalizing, related, revision
            )
            return response, self._check(response, namespace, uid, selector)

        claimant = Claimant(uid, namespace, deleting, selector)
        hook_status: dict[str, Any] | None
        if self._rollouts is not None and not (deleting and not has_finalize):
            synced = await self._rollouts.sync(
                request, parent=parent, raw=raw, claimant=claimant, observed=observed, call=answer
            )
            desired, hook_status = synced.desired, synced.status
            resync_after, finalized = synced.resync_after_seconds, synced.finalized
        else:
            response, desired = await answer(parent, raw, request.snapshot.related, None)
            hook_status, finalized = response.status, response.finalized
            resync_after = response.resync_after_seconds

        gone = False
        if finalizing and finalized and ours in finalizers:
            updated = await self._set_finalizers(
                request, parent, finalizer.updated(finalizers, ours, finalizer.Change.REMOVE)
            )
            if updated is None:
                return Outcome(requeue_after=resync_after)
            parent = updated
            finalizers = finalizer.finalizers_of(parent["metadata"])
            gone = deleting and not finalizers

        problems: list[str] = []
        if finalizer.manages_children(
            deleting=deleting, finalizers=finalizers, name=ours, has_finalize_hook=has_finalize
        ):
            problems = await self._manage(request, parent, uid, observed, desired)
        if not gone:
            await self._write_status(request, parent, hook_status)
        if problems:
            raise SyncFailure(
                f"can't reconcile children for {self._describe(parent)}: " + "; ".join(problems)
            )
        return Outcome(requeue_after=resync_after)

    # --- steps --------------------------------------------------------------------------

    def _check(
        self, response: SyncResponse, namespace: str, uid: str, selector: Selector
    ) -> tuple[DesiredChild, ...]:
        try:
            return check_children(
                list(response.children),
                parent_namespace=namespace,
                parent_uid=uid,
                child_types=self._child_types,
                selector=selector,
                generate_selector=self._spec.generate_selector,
            )
        except HookResponseError as err:
            raise SyncFailure(str(err)) from None

    def _describe(self, parent: dict[str, Any]) -> str:
        return describe(self._parent.kind, parent)

    def _selector(self, parent: dict[str, Any], uid: str) -> Selector:
        if self._spec.generate_selector:
            return from_match_labels({names.CONTROLLER_UID_LABEL: uid})
        parent_spec = parent.get("spec")
        found = parent_spec.get("selector") if isinstance(parent_spec, dict) else None
        if not isinstance(found, dict) or not (
            found.get("matchLabels") or found.get("matchExpressions")
        ):
            raise SyncFailure(
                f"can't get label selector of {self._describe(parent)}: .spec.selector must "
                "have either matchLabels, matchExpressions, or both"
            )
        try:
            return from_label_selector(found)
        except SelectorError as err:
            raise SyncFailure(
                f"can't convert label selector of {self._describe(parent)}: {err}"
            ) from None

    async def _set_finalizers(
        self, request: ReconcileRequest, parent: dict[str, Any], wanted: list[str]
    ) -> dict[str, Any] | None:
        """The parent with ``wanted`` as its finalizers; ``None`` when it is gone."""
        return await set_finalizers(self._writer, self._parent_target, parent, wanted, request)

    async def _claim(
        self, request: ReconcileRequest, claimant: Claimant, parent: dict[str, Any]
    ) -> dict[TypeKey, list[Observed]]:
        """The claimed children of each declared type, after adoptions and releases."""
        snapshot = request.snapshot.children
        owner = self._owner(parent, claimant.uid).as_owner_reference()
        claimed: dict[TypeKey, list[Observed]] = {}
        problems: list[str] = []
        for type_key, target in self._targets.items():
            candidates = [Observed.decode(raw) for raw in snapshot.get(type_key.group_key, ())]
            decision = claim(candidates, claimant)
            found = claimed[type_key] = list(decision.owned)
            for child in decision.release:
                what = "release " + children.describe(type_key, child.namespace, child.name)
                patch = release_patch(child, claimant.uid)
                await self._guarded(request, target, child, patch, what, problems)
            for child in decision.adopt:
                what = "adopt " + children.describe(type_key, child.namespace, child.name)
                patch = adoption_patch(child, owner)
                adopted = await self._guarded(request, target, child, patch, what, problems)
                if adopted is not None:  # as written: its resourceVersion is current
                    found.append(Observed.of(orjson.dumps(adopted), adopted))
        if problems:
            raise SyncFailure(
                f"can't claim children of {self._describe(parent)}: " + "; ".join(problems)
            )
        return claimed

    async def _guarded(
        self,
        request: ReconcileRequest,
        target: children.Target,
        child: Observed,
        patch: dict[str, Any],
        what: str,
        problems: list[str],
    ) -> dict[str, Any] | None:
        return await guarded_patch(
            self._writer,
            target,
            child,
            patch,
            what=what,
            request=request,
            problems=problems,
            controller=self._spec.name,
        )

    def _owner(self, parent: dict[str, Any], uid: str) -> ControllerRef:
        return ControllerRef(
            api_version=self._parent.api_version,
            kind=self._parent.kind,
            name=parent["metadata"]["name"],
            uid=uid,
        )

    async def _call(
        self,
        request: ReconcileRequest,
        parent: dict[str, Any],
        raw: bytes,
        observed: dict[TypeKey, list[Observed]],
        namespace: str,
        finalizing: bool,
        related: rollouts.Related,
        revision: str | None,
    ) -> SyncResponse:
        name = HookName.FINALIZE if finalizing else HookName.SYNC
        children, related_map = hookrequest.maps(
            self._hooks.hook(name).version,
            parent_namespace=namespace,
            observed=observed,
            related=related,
        )
        body = hookrequest.encode(
            controller=self._controller,
            parent=raw,
            children=children,
            related=related_map,
            finalizing=finalizing,
        )
        return await self._hooks.call(
            name,
            body,
            request=request,
            decode=lambda answer, mode: decode_sync_response(answer, mode=mode),
            failed=f"{name.value} hook failed for {self._describe(parent)}",
            cache_key=request.key,
            cache_variant=revision,
        )

    async def _manage(
        self,
        request: ReconcileRequest,
        parent: dict[str, Any],
        uid: str,
        observed: dict[TypeKey, list[Observed]],
        desired: tuple[DesiredChild, ...],
    ) -> list[str]:
        return await write_children(
            self._applier,
            self._child_writer,
            key=request.key,
            parent=parent,
            observed=observed,
            desired=desired,
            methods=self._methods,
            owner=self._owner(parent, uid),
            wrote=request.wrote,
            in_place_labels=IN_PLACE_LABELS,
        )

    async def _write_status(
        self, request: ReconcileRequest, parent: dict[str, Any], hook_status: dict[str, Any] | None
    ) -> None:
        metadata = parent["metadata"]
        wanted = status.desired(hook_status, metadata.get("generation"))
        if not status.changed(parent, wanted):
            return
        try:
            answer = await self._writer.replace(
                self._parent,
                status.body(parent, wanted),
                namespace=metadata.get("namespace") or None,
                name=metadata["name"],
                subresource="status",
            )
        except (errors.NotFound, errors.Conflict) as err:
            log.debug("status not written", parent=self._describe(parent), reason=err.reason)
            return
        except errors.KubeError as err:
            raise SyncFailure(f"can't update status for {self._describe(parent)}: {err}") from None
        request.wrote(self._parent_target.group_resource, answer, action="update status of")
