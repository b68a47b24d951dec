"""Making a parent's children match under server-side apply: the writes around the planner.

``ServerSideApply`` is one per worker process (``--apply-strategy server-side-apply``): the
field manager, the apply cache (``workers.apply.cache``, entries grouped by parent key and
dropped with the parent's slot: ``discard``), the counts (``workers.sync.apply_metrics``) and the
event recorder. ``for_controller(...)`` gives one controller's ``ChildApplier``, the
``children.Applier`` that replaces ``children.DynamicApplier`` (``applier_of(...)`` gives the
one the worker's strategy says):

1. Observed children that are not desired are deleted as under dynamic apply (background
   propagation, uid precondition; ``children.ChildWriter``).
2. Each desired child becomes an apply body (``workers.apply.ssa.apply_body``). A new child is
   created by an apply.
3. An existing child goes through ``workers.apply.ssa.plan_update``, with the cache's verdict:
   a hit counts only while the child still holds the metadata of the body
   (``workers.apply.ssa.holds_metadata``), since a label or annotation edit moves neither
   its uid nor its generation; a removed or changed ``controller-revision-hash`` label is
   thus applied back (in place: ``in_place_labels``).
   Before its first apply or dry run, a child written by dynamic apply is migrated
   (``workers.apply.upgrade``: the old Update managers' fields move to our Apply entry, and
   the last-applied annotation is removed) with one JSON patch carrying the observed
   resourceVersion; a conflict there leaves the child for the next sync. Metacontroller
   removes the annotation under ``InPlace``/``RollingInPlace`` only; removing it under
   ``Recreate`` too keeps the migration from making the dry run differ (the annotation,
   now ours, would be dropped by the apply), which would recreate every child once.
4. ``Recreate``/``RollingRecreate`` run the apply with ``dryRun=All`` first; a 400 or 403
   from the dry run skips the child (logged); a result for a newer child than the snapshot
   waits for the next sync; a different result deletes it (uid precondition), an equal one
   is remembered in the cache.
5. Applies are sent with ``force`` as the controller says: the annotation
   ``metashard.io/apply-force: "false"`` on the controller object turns it off (default
   true, as Metacontroller). Without force, a 409 conflict becomes an ``ApplyConflict``
   Warning event on the parent naming the other managers and fields (from the Status
   causes); it does not fail the sync, and the other children proceed.
6. Every sent apply and dry run is counted, and every PATCH the cache saved (``skipped``).

As with ``ChildWriter``, the children are written concurrently and each failure is one
message in the returned list; a child that is gone (404) or changed (409 on the migration)
is not an error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from proto.api import names
from proto.api.controllers import UpdateMethod
from proto.api.hooks import DesiredChild
from proto.api.objectmap import TypeKey
from proto.kube import errors
from proto.kube.client import PatchType
from proto.runtime.logs import get_logger
from proto.wire import ControllerDef, ParentKey
from workers.apply import ApplyError
from workers.apply.cache import AppliedCache, Version
from workers.apply.ssa import Step, apply_body, body_hash, holds_metadata, plan_update
from workers.apply.upgrade import upgrade_patch
from workers.sync.apply_metrics import ApplyMetrics, ApplyResult, NoApplyMetrics
from workers.sync.children import (
    Action,
    Applier,
    ChildTypes,
    ChildWriter,
    DynamicApplier,
    Wanted,
    Write,
    Wrote,
    describe,
    pair,
)
from workers.sync.hookcall import Events
from workers.sync.observed import Observed
from workers.sync.writer import ApplyWriter, Writer

log = get_logger("metashard.ssa")

FORCE_ANNOTATION = "metashard.io/apply-force"
_SKIP_DRY_RUN = (errors.BadRequest, errors.Forbidden)


def apply_force(controller: Mapping[str, Any]) -> bool:
    """The controller object's choice of ``force`` (``metashard.io/apply-force``: ``"true"``
    or ``"false"``, default true); any other value is logged and ignored."""
    metadata = controller.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    text = annotations.get(FORCE_ANNOTATION) if isinstance(annotations, dict) else None
    if text is None or text == "true":
        return True
    if text == "false":
        return False
    log.warning(
        "ignoring a malformed apply-force annotation: forcing",
        annotation=FORCE_ANNOTATION,
        value=text,
        controller=metadata.get("name") if isinstance(metadata, dict) else None,
    )
    return True


def conflict_message(child: str, err: errors.ApiError) -> str:
    """The event text of an apply conflict: each field with the manager owning it, as the
    Status causes say (``conflict with "other" using v1``)."""
    fields = [
        f"{cause.field or '?'} ({cause.message or 'conflict'})"
        for cause in err.causes
        if cause.type == "FieldManagerConflict" or cause.field
    ]
    listed = "; ".join(fields) if fields else err.message
    return f"apply of {child} conflicts with another field manager: {listed}"


class ServerSideApply:
    """The worker process's server-side apply: manager, cache, counts (module docstring)."""

    def __init__(
        self,
        writer: ApplyWriter,
        *,
        field_manager: str,
        events: Events,
        metrics: ApplyMetrics | None = None,
    ) -> None:
        self.writer = writer
        self.field_manager = field_manager
        self.events = events
        self.metrics = metrics or NoApplyMetrics()
        self.cache: AppliedCache[ParentKey] = AppliedCache()

    def discard(self, predicate: Callable[[ParentKey], bool]) -> None:
        """Drop the cache entries of the parents ``predicate`` accepts (a revoked slot)."""
        self.cache.discard(predicate)

    def forget_controller(self, controller: str) -> None:
        self.metrics.forget_controller(controller)

    def for_controller(
        self,
        *,
        controller: Mapping[str, Any],
        queue: str,
        types: ChildTypes,
        in_place_labels: frozenset[str] = frozenset(),
    ) -> ChildApplier:
        """The applier of one controller: ``controller`` is its object (for the force
        annotation), ``queue`` its work queue's name (the metrics label), ``types`` its child
        types; a change of only ``in_place_labels`` is applied in place."""
        return ChildApplier(
            self,
            force=apply_force(controller),
            queue=queue,
            types=types,
            in_place_labels=in_place_labels,
        )


def applier_of(
    ssa: ServerSideApply | None,
    definition: ControllerDef,
    types: ChildTypes,
    *,
    writer: Writer,
    in_place_labels: frozenset[str] = frozenset(),
) -> Applier:
    """The applier of a controller definition's children: through ``ssa``, or dynamic apply
    through ``writer`` when it is None (a controller that sets ``metashard.io/apply-force``
    then gets a warning: it has no effect)."""
    controller = orjson.loads(definition.object)
    if ssa is None:
        annotations = (controller.get("metadata") or {}).get("annotations") or {}
        if FORCE_ANNOTATION in annotations:
            log.warning(
                "the apply-force annotation has no effect under dynamic-apply",
                annotation=FORCE_ANNOTATION,
                controller=definition.name,
            )
        return DynamicApplier(writer, types, in_place_labels=in_place_labels)
    return ssa.for_controller(
        controller=controller,
        queue=f"{definition.kind}-{definition.name}",
        types=types,
        in_place_labels=in_place_labels,
    )


@dataclass(frozen=True, slots=True)
class _Child:
    desired: DesiredChild
    current: Observed | None
    body: dict[str, Any]
    method: UpdateMethod

    def describe(self) -> str:
        return describe(self.desired.type, self.desired.namespace, self.desired.name)

    @property
    def ident(self) -> tuple[TypeKey, str, str]:
        return (self.desired.type, self.desired.namespace, self.desired.name)


class ChildApplier:
    """Applies the children of one controller's parents (module docstring)."""

    def __init__(
        self,
        ssa: ServerSideApply,
        *,
        force: bool,
        queue: str,
        types: ChildTypes,
        in_place_labels: frozenset[str] = frozenset(),
    ) -> None:
        self._ssa = ssa
        self.force = force
        self._queue = queue
        self._targets = types.targets
        self._methods = types.methods
        self._in_place_labels = in_place_labels
        self._deleter = ChildWriter(ssa.writer, types.targets)

    async def run(self, wanted: Wanted, wrote: Wrote) -> list[str]:
        """Delete, create and update; one message per child that failed."""
        key, parent = wanted.key, wanted.parent
        pairs, deletes = pair(wanted.observed, wanted.desired)
        for gone in deletes:
            self._ssa.cache.forget(key, (gone.type, gone.namespace, gone.name))
        problems = await self._deleter.run(deletes, wrote)
        children: list[_Child] = []
        for child, current in pairs:
            try:
                body = apply_body(child.object, wanted.owner)
            except ApplyError as err:
                what = describe(child.type, child.namespace, child.name)
                problems.append(f"can't apply {what}: {err}")
                continue
            method = self._methods.get(child.type, UpdateMethod.ON_DELETE)
            children.append(_Child(child, current, body, method))

        async def one(child: _Child) -> str | None:
            return await self._child(key, parent, child, wrote)

        outcomes = await asyncio.gather(*(one(c) for c in children))
        problems += [o for o in outcomes if o]
        return problems

    async def _child(
        self, key: ParentKey, parent: Mapping[str, Any], child: _Child, wrote: Wrote
    ) -> str | None:
        cache, digest = self._ssa.cache, body_hash(child.body)
        current = child.current
        if current is None:
            return await self._apply(key, parent, child, digest, wrote)
        fresh = cache.fresh(key, child.ident, Version.of(current.obj), digest)
        cached = fresh and holds_metadata(current.obj, child.body)
        step = plan_update(
            child.method, observed=current.obj, deleting=current.deleting, cached=cached
        )
        if cached and not current.deleting and child.method is not UpdateMethod.ON_DELETE:
            self._ssa.metrics.count(self._queue, ApplyResult.SKIPPED)
        if step is Step.SKIP:
            return None
        try:
            obj = await self._migrate(child, current.obj, wrote)
        except errors.KubeError as err:
            return f"can't migrate {child.describe()} to server-side apply: {err}"
        if obj is None:
            return None
        if step is Step.DRY_RUN:
            try:
                result = await self._send(child, dry_run=True)
            except _SKIP_DRY_RUN as err:
                log.info("dry run refused: child skipped", child=child.describe(), error=str(err))
                return None
            except errors.Conflict as err:
                return self._conflict(parent, child, err)
            except errors.NotFound:
                return None
            except errors.KubeError as err:
                return f"can't dry-run apply {child.describe()}: {err}"
            step = plan_update(
                child.method,
                observed=obj,
                dry_run=result,
                in_place_labels=self._in_place_labels,
            )
            if step is Step.STALE:
                log.debug("child changed since the snapshot", child=child.describe())
                return None
            if step is Step.SKIP:
                cache.record(key, child.ident, Version.of(obj), digest)
                return None
            if step is Step.RECREATE:
                cache.forget(key, child.ident)
                recreate = Write(
                    Action.RECREATE, *child.ident, uid=str(obj["metadata"].get("uid", ""))
                )
                failed = await self._deleter.run([recreate], wrote)
                return failed[0] if failed else None
        return await self._apply(key, parent, child, digest, wrote)

    async def _migrate(
        self, child: _Child, obj: dict[str, Any], wrote: Wrote
    ) -> dict[str, Any] | None:
        """``obj`` after the upgrade from dynamic apply (itself when there is nothing to
        migrate); None when it changed or went away meanwhile (the next sync sees it)."""
        patch = upgrade_patch(obj, manager=self._ssa.field_manager, last_applied=True)
        if patch is None:
            return obj
        target = self._targets[child.desired.type]
        try:
            answer = await self._ssa.writer.patch(
                target.resource,
                child.desired.name,
                patch,
                namespace=child.desired.namespace or None,
                patch_type=PatchType.JSON,
            )
        except (errors.Conflict, errors.NotFound) as err:
            log.debug("child changed before its migration", child=child.describe(), reason=err)
            return None
        log.info("child migrated to server-side apply", child=child.describe())
        wrote(target.group_resource, answer, action="migrate")
        return answer

    async def _send(self, child: _Child, *, dry_run: bool) -> dict[str, Any]:
        target = self._targets[child.desired.type]
        answer = await self._ssa.writer.apply(
            target.resource,
            child.body,
            field_manager=self._ssa.field_manager,
            namespace=child.desired.namespace or None,
            name=child.desired.name,
            force=self.force,
            dry_run=dry_run,
        )
        result = ApplyResult.DRY_RUN if dry_run else ApplyResult.SENT
        self._ssa.metrics.count(self._queue, result)
        return answer

    async def _apply(
        self, key: ParentKey, parent: Mapping[str, Any], child: _Child, digest: str, wrote: Wrote
    ) -> str | None:
        cache = self._ssa.cache
        try:
            answer = await self._send(child, dry_run=False)
        except errors.Conflict as err:
            cache.forget(key, child.ident)
            return self._conflict(parent, child, err)
        except errors.KubeError as err:
            cache.forget(key, child.ident)
            return f"can't apply {child.describe()}: {err}"
        cache.record(key, child.ident, Version.of(answer), digest)
        wrote(self._targets[child.desired.type].group_resource, answer, action="apply")
        return None

    def _conflict(
        self, parent: Mapping[str, Any], child: _Child, err: errors.Conflict
    ) -> str | None:
        """A 409: a field conflict without force is reported on the parent; anything else
        (the child changed) is left to the next sync."""
        if self.force or not err.causes:
            log.debug("child changed since the snapshot", child=child.describe())
            return None
        message = conflict_message(child.describe(), err)
        log.info("apply conflict", child=child.describe(), message=message)
        self._ssa.events.emit(
            parent, names.EVENT_TYPE_WARNING, names.REASON_APPLY_CONFLICT, message
        )
        return None
