"""One sync of a parent whose children roll out revision by revision: the I/O around the planner.

``Rollouts.sync(...)`` runs when some child type uses ``RollingRecreate`` or
``RollingInPlace`` (Metacontroller's ``syncRevisions``), after the children are claimed:

1. The parent's ControllerRevisions (from the snapshot: the coordinator watches them) are
   claimed: orphans the coordinator offers are adopted (guarded merge patch); a revision the
   parent controls stays claimed even when its labels no longer match the selector
   (Metacontroller releases it and then fails "already exists" forever, #194).
2. ``rollout.arrange`` finds the latest revision; the sync (or finalize) hook is called once
   per revision in ``Arrangement.hooked``, concurrently, each with the parent materialized
   from that revision's ``parentPatch`` (``revisions.apply_patch``) and the related objects
   the customize hook selected for that parent (the snapshot's ``revision_related``, where
   they differ from the live parent's ``related``: the coordinator calls customize once per
   revision, as Metacontroller does), and each answer's children are checked like a plain
   sync's.
3. Each answer's children of a rolling type get the ``controller-revision-hash`` label of
   the revision that answered; ``rollout.plan`` decides the move and the revisions.
4. The revision objects are written **before any child**: deletions (uid precondition), then
   updates (resourceVersion precondition), then the new latest revision. A create that finds
   its name taken by an object this parent cannot claim retries with the next collision count
   (``revisions.revision_name``); if the name was in fact our own revision not yet in the
   cache, the duplicate has the same patch and the next sync deletes one of the two. Any
   failed revision write fails the sync before a child is touched; a Conflict raises
   ``StaleSnapshot``.
5. The result: the children to apply, each at its own revision's desired state; the latest
   answer's status with the ``Updated`` condition (a status of ``null`` becomes ``{}``, a
   hook's own ``Updated`` condition, in its status or its ``conditions``, is replaced and a
   warning logged, once per controller); the latest answer's ``events`` and other
   ``conditions`` (older revisions' are not used); ``resyncAfterSeconds`` the smallest
   positive; ``finalized`` only when every answer says so. A Normal event on the parent
   names each change of the condition (rollout started or progressing, waiting, complete).

The history limit (childless revisions kept for ``rollout history``/``undo``) is the
controller's ``metashard.io/revision-history-limit`` annotation, else the worker's
``--revision-history-limit`` (default 5).

ControllerRevisions are namespaced: those of a namespaced parent live in its namespace, those
of a cluster-scoped parent in ``cluster_revision_namespace`` (``--cluster-revision-namespace``;
the coordinator offers only the revisions there, and a worker whose flag disagrees with the
revisions it is offered fails the sync saying so). They carry the controller ownerReference to
the cluster-scoped parent, so the garbage collector deletes them with it. Metacontroller
cannot roll out cluster-scoped parents at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import orjson

from proto.api import names
from proto.api.controllers import CompositeController, group_of
from proto.api.hooks import DesiredChild, SyncResponse
from proto.api.objectmap import TypeKey
from proto.api.revisions import (
    DEFAULT_HISTORY_LIMIT,
    Revision,
    apply_patch,
    make_patch,
    revision_hash,
)
from proto.kube import errors
from proto.kube.resources import Resource
from proto.runtime.logs import get_logger
from workers.apply import ControllerRef, ssa
from workers.kinds.composite import rollout_plan
from workers.kinds.composite.revisions import (
    new_revision_object,
    revision_labels,
    revision_name,
    revision_object,
)
from workers.reconcile import ReconcileRequest
from workers.sync import children
from workers.sync.claims import Claimant, claim
from workers.sync.errors import StaleSnapshot, SyncFailure
from workers.sync.hookcall import Events
from workers.sync.observed import Observed
from workers.sync.patches import adopt, describe
from workers.sync.template import Answer, Related
from workers.sync.writer import Writer

log = get_logger("metashard.rollout")

HISTORY_LIMIT_ANNOTATION = "metashard.io/revision-history-limit"
MAX_COLLISIONS = 10
REVISIONS = Resource(
    names.GROUP, names.VERSION, names.CONTROLLER_REVISIONS, names.CONTROLLER_REVISION, True
)
REVISIONS_TARGET = children.Target(REVISIONS, f"{names.CONTROLLER_REVISIONS}.{names.GROUP}")

Checked = tuple[SyncResponse, tuple[DesiredChild, ...]]
"""A hook's decoded answer and its checked desired children."""
CallHook = Callable[[dict[str, Any], bytes, Related, str | None], Awaitable[Checked]]
"""Calls the sync (or finalize) hook with one parent version (object, raw JSON), its related
objects and the name of the revision it was materialized from (``None``: the live parent, the
latest revision), and returns the decoded answer with its checked desired children."""


def history_limit(controller: Mapping[str, Any], default: int = DEFAULT_HISTORY_LIMIT) -> int:
    """The controller's history limit: its annotation, else ``default`` (the
    ``--revision-history-limit`` flag); a malformed annotation is logged and ignored."""
    annotations = (controller.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(HISTORY_LIMIT_ANNOTATION)
    if text is None:
        return default
    if isinstance(text, str) and text.isdigit():
        return int(text)
    log.warning(
        "ignoring a malformed revision history limit",
        annotation=HISTORY_LIMIT_ANNOTATION,
        value=text,
        default=default,
    )
    return default


def relative_name(parent_namespace: str, namespace: str, name: str) -> str:
    """A child's name in revision claims: bare when in the parent's namespace."""
    return name if not namespace or namespace == parent_namespace else f"{namespace}/{name}"


class Rollouts:
    """The rolling part of one CompositeController's syncs (see the module docstring)."""

    def __init__(
        self,
        spec: CompositeController,
        *,
        writer: Writer,
        events: Events,
        parent: Resource,
        kinds: Sequence[TypeKey],
        cluster_revision_namespace: str = "default",
        default_history_limit: int = DEFAULT_HISTORY_LIMIT,
        server_side: bool = False,
    ) -> None:
        """``kinds`` are the child types, in ``spec.children`` order;
        ``cluster_revision_namespace`` is where the revisions of cluster-scoped parents live;
        ``default_history_limit`` is the history limit unless the controller's annotation
        says otherwise; ``server_side``: the children are written by server-side apply (a
        child is "already updated" when it holds what would be applied,
        ``workers.apply.ssa.up_to_date``)."""
        self._spec = spec
        self._cluster_namespace = cluster_revision_namespace
        self._writer = writer
        self._events = events
        self._parent = parent
        self._paths = spec.parent.revision_field_paths
        self._history = history_limit(spec.raw, default_history_limit)
        self._updated: rollout_plan.Updated | None = ssa.up_to_date if server_side else None
        self._strategies: dict[rollout_plan.GroupKind, rollout_plan.Strategy] = {}
        for child, type_key in zip(spec.children, kinds, strict=True):
            strategy = child.update_strategy
            self._strategies[(group_of(type_key.api_version), type_key.kind)] = (
                rollout_plan.Strategy(strategy.method, strategy.status_checks)
            )
        self._warned_condition = False

    def _rolling(self, type_key: TypeKey) -> bool:
        strategy = self._strategies.get((group_of(type_key.api_version), type_key.kind))
        return strategy is not None and strategy.rolling

    async def sync(
        self,
        request: ReconcileRequest,
        *,
        parent: dict[str, Any],
        raw: bytes,
        claimant: Claimant,
        observed: Mapping[TypeKey, Sequence[Observed]],
        call: CallHook,
    ) -> Answer[dict[str, Any] | None]:
        """The answer of the rollout: the children to apply and the parent's status."""
        what = describe(self._parent.kind, parent)
        owner = ControllerRef(
            self._parent.api_version, self._parent.kind, parent["metadata"]["name"], claimant.uid
        )
        revisions = await self._claim(request, claimant, owner, what)
        latest_patch = make_patch(parent, self._paths)
        new_name = revision_name(self._parent.name, self._parent.group, claimant.uid, latest_patch)
        arrangement = rollout_plan.arrange(revisions, latest_patch, new_name)

        hooked = arrangement.hooked
        answers = await asyncio.gather(
            *(
                self._answer(request, parent, raw, revision, arrangement.latest, call)
                for revision in hooked
            )
        )
        namespace = parent["metadata"].get("namespace") or ""
        desired: dict[str, list[rollout_plan.Desired]] = {}
        by_id: dict[rollout_plan.ChildId, DesiredChild] = {}
        for revision, (_, wanted) in zip(hooked, answers, strict=True):
            listed = desired[revision.name] = []
            for child in wanted:
                child_id = self._child_id(namespace, child)
                obj = child.object
                if self._rolling(child.type):
                    obj = rollout_plan.labelled(obj, revision.hash)
                listed.append(rollout_plan.Desired(child_id, obj))
                if revision is arrangement.latest:
                    by_id[child_id] = child
        current = {
            (
                group_of(type_key.api_version),
                type_key.kind,
                relative_name(namespace, c.namespace, c.name),
            ): c.obj
            for type_key, found in observed.items()
            if self._rolling(type_key)
            for c in found
        }
        plan = rollout_plan.plan(
            arrangement,
            desired=desired,
            observed=current,
            strategies=self._strategies,
            history_limit=self._history,
            updated=self._updated,
        )
        latest_name = await self._write(request, plan, parent, owner, what)

        result: list[DesiredChild] = []
        for item, belongs in plan.children:
            obj = dict(item.obj)
            if belongs == plan.latest.name and latest_name != belongs:
                obj = rollout_plan.labelled(obj, revision_hash(latest_name))
            result.append(replace(by_id[item.id], object=obj))

        condition = plan.condition
        if latest_name != plan.latest.name:  # created under a collision count
            message = str(condition["message"]).replace(plan.latest.name, latest_name)
            condition = {**condition, "message": message}
        latest_response = answers[0][0]
        status, replaced = rollout_plan.with_condition(latest_response.status, condition)
        reports = latest_response.reports
        if any(c.type == names.CONDITION_UPDATED for c in reports.conditions):
            replaced = True
            kept = tuple(c for c in reports.conditions if c.type != names.CONDITION_UPDATED)
            reports = replace(reports, conditions=kept)
        if replaced and not self._warned_condition:
            self._warned_condition = True
            log.warning(
                "the sync hook's own Updated condition is replaced by the rollout's",
                controller=self._spec.name,
            )
        self._announce(parent, condition)
        resync = [
            r.resync_after_seconds
            for r, _ in answers
            if r.resync_after_seconds is not None and r.resync_after_seconds > 0
        ]
        return Answer(
            desired=tuple(result),
            resync_after_seconds=min(resync) if resync else None,
            finalized=all(r.finalized for r, _ in answers),
            update=status,
            reports=reports,
        )

    # --- steps --------------------------------------------------------------------------

    def _revision_namespace(self, parent: Mapping[str, Any]) -> str:
        """Where ``parent``'s ControllerRevisions live (see the module docstring)."""
        if self._parent.namespaced:
            return str(parent["metadata"].get("namespace") or "")
        return self._cluster_namespace

    def _child_id(self, namespace: str, child: DesiredChild) -> rollout_plan.ChildId:
        return (
            group_of(child.type.api_version),
            child.type.kind,
            relative_name(namespace, child.namespace, child.name),
        )

    async def _claim(
        self, request: ReconcileRequest, claimant: Claimant, owner: ControllerRef, what: str
    ) -> list[Revision]:
        candidates = [Observed.decode(raw) for raw in request.snapshot.revisions]
        if not self._parent.namespaced:
            elsewhere = sorted({c.namespace for c in candidates} - {self._cluster_namespace})
            if elsewhere:
                raise SyncFailure(
                    f"can't roll out {what}: the coordinator keeps its ControllerRevisions in "
                    f"{', '.join(elsewhere)} but this worker's --cluster-revision-namespace is "
                    f"{self._cluster_namespace}; give every process the same"
                )
        decision = claim(candidates, claimant)
        found = [*decision.owned, *decision.release]
        problems: list[str] = []
        for orphan in decision.adopt:
            adopted = await adopt(
                self._writer,
                REVISIONS_TARGET,
                orphan,
                owner.as_owner_reference(),
                what=f"adopt ControllerRevision {orphan.name}",
                request=request,
                problems=problems,
                controller=self._spec.name,
            )
            if adopted is not None:
                found.append(adopted)
        if problems:
            raise SyncFailure(f"can't claim ControllerRevisions of {what}: " + "; ".join(problems))
        try:
            return [Revision.decode(r.obj) for r in found]
        except ValueError as err:
            raise SyncFailure(f"can't read ControllerRevisions of {what}: {err}") from None

    async def _answer(
        self,
        request: ReconcileRequest,
        parent: dict[str, Any],
        raw: bytes,
        revision: Revision,
        latest: Revision,
        call: CallHook,
    ) -> Checked:
        snapshot = request.snapshot
        if revision is latest:
            return await call(parent, raw, snapshot.related, None)
        materialized = apply_patch(parent, revision.patch, self._paths)
        related = snapshot.revision_related.get(revision.name, snapshot.related)
        return await call(materialized, orjson.dumps(materialized), related, revision.name)

    async def _write(
        self,
        request: ReconcileRequest,
        plan: rollout_plan.Rollout,
        parent: dict[str, Any],
        owner: ControllerRef,
        what: str,
    ) -> str:
        """Write the revision objects; the latest revision's name as written."""
        namespace = self._revision_namespace(parent) or None
        writer = self._writer
        try:
            for gone in plan.deletes:
                assert gone.obj is not None
                uid = gone.obj["metadata"].get("uid")
                try:
                    await writer.delete(
                        REVISIONS,
                        gone.name,
                        namespace=namespace,
                        propagation_policy=children.BACKGROUND,
                        uid=uid,
                    )
                except errors.NotFound:
                    continue
                log.info("ControllerRevision deleted", parent=what, name=gone.name)
            for kept in plan.revisions:
                if kept.obj is None:
                    continue
                body = revision_object(kept)
                if body is None:
                    continue
                answer = await writer.replace(REVISIONS, body, namespace=namespace, name=kept.name)
                request.wrote(REVISIONS_TARGET.group_resource, answer)
            latest = plan.latest
            if latest.obj is not None:
                return latest.name
            return await self._create(request, latest, parent, owner, what)
        except errors.Conflict as err:
            raise StaleSnapshot(f"can't reconcile ControllerRevisions of {what}: {err}") from None
        except errors.KubeError as err:
            raise SyncFailure(f"can't reconcile ControllerRevisions of {what}: {err}") from None

    async def _create(
        self,
        request: ReconcileRequest,
        latest: Revision,
        parent: dict[str, Any],
        owner: ControllerRef,
        what: str,
    ) -> str:
        labels = revision_labels(
            parent,
            group=self._parent.group,
            resource=self._parent.name,
            generate_selector=self._spec.generate_selector,
        )
        namespace = self._revision_namespace(parent)
        name = latest.name
        for collisions in range(MAX_COLLISIONS + 1):
            if collisions:
                name = revision_name(
                    self._parent.name, self._parent.group, owner.uid, latest.patch, collisions
                )
            body = new_revision_object(
                replace(latest, name=name), namespace=namespace, owner=owner, labels=labels
            )
            try:
                answer = await self._writer.create(REVISIONS, body, namespace=namespace or None)
            except errors.AlreadyExists:
                log.info("ControllerRevision name taken", parent=what, name=name)
                continue
            log.info("ControllerRevision created", parent=what, name=name)
            request.wrote(REVISIONS_TARGET.group_resource, answer)
            return name
        raise SyncFailure(
            f"can't create a ControllerRevision for {what}: {MAX_COLLISIONS + 1} names taken"
        )

    def _announce(self, parent: dict[str, Any], condition: Mapping[str, Any]) -> None:
        status = parent.get("status")
        conditions = status.get("conditions") if isinstance(status, dict) else None
        before = next(
            (
                c
                for c in conditions or ()
                if isinstance(c, dict) and c.get("type") == names.CONDITION_UPDATED
            ),
            None,
        )
        if before is not None and (before.get("reason"), before.get("message")) == (
            condition["reason"],
            condition["message"],
        ):
            return
        self._events.emit(
            parent, names.EVENT_TYPE_NORMAL, str(condition["reason"]), str(condition["message"])
        )
