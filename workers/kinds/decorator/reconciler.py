"""The DecoratorController reconciler: one sync of one target object, as Metacontroller does it.

``DecoratorReconciler(definition, writer=..., hooks=..., events=...)`` runs one controller.
Each ``reconcile`` follows Metacontroller's ``decorator.syncParentObject``:

1. No target in the snapshot (deleted, or no longer handled), or a target that no rule of
   its resource selects (labels and annotations) and that does not carry our finalizer:
   nothing to do. A rule's resource is the one it resolved to (``ControllerDef.resources``,
   one per rule, in order), as on the coordinator: a rule naming ``po`` applies to pods.
2. Our finalizer ``metacontroller.io/decoratorcontroller-<name>`` is added (with a finalize
   hook) or removed (without one) (``workers.sync.finalizer``).
3. Attachments: ours are those the target owns that carry our annotation
   (``attachments.split``); an annotated orphan the hook wants is adopted, unless the target
   is being deleted.
4. The sync hook is called, or the finalize hook (``finalizing: true``) for a target being
   deleted or no longer selected. Request ``{controller, object, attachments, related,
   finalizing}``, with the snapshot's raw JSON embedded. The hook's TLS material and
   credentials come resolved in the definition (``ControllerDef.connections``); the target's
   key is the ETag cache key.
5. The answer's labels and annotations are merged onto the target (``null`` removes a key);
   its status, when not null and different, replaces ``.status``: with a PUT to ``/status``
   when the resource has the status subresource, else within the object's update. Nothing
   is written when nothing differs. NotFound and Conflict are let go (the target is gone, or
   changed and is synced again), as in Metacontroller.
6. Desired attachments get our annotation and are created, updated (per the attachment's
   ``updateStrategy``) and deleted (``workers.sync.children``, or ``workers.sync.ssa_writes``
   under ``--apply-strategy server-side-apply``: then without the last-applied annotation,
   unlike Metacontroller #1139), while the target is alive, or being deleted under our
   finalizer without a garbage-collector finalizer.
7. ``finalized: true`` from the finalize hook removes our finalizer.
8. Attachment write errors fail the sync at the end; ``resyncAfterSeconds`` becomes
   ``Outcome.requeue_after``.

Failures raise ``workers.sync.errors`` errors; a ``SyncFailure`` also emits a
``SyncError`` Warning event on the target. A hook answering 429 raises ``RequeueAfter``.
Every successful write is reported to ``request.wrote``.

Differences from Metacontroller, on purpose: no GET before writes (resourceVersion
preconditions instead, as for CompositeControllers); the attachments are all checked before
any write; ``finalized`` counts only in an answer of the finalize hook; annotated orphans the
hook wants are adopted (by a target not being deleted) instead of failing with AlreadyExists.
"""

from __future__ import annotations

from typing import Any

import orjson

from proto.api import names
from proto.api.controllers import HookName, UpdateMethod
from proto.api.decorator import (
    DecoratedResource,
    DecoratorResponse,
    decode_decorator_response,
    parse_decorator_controller,
    sync_request,
)
from proto.api.errors import HookResponseError
from proto.api.hooks import ChildType, DesiredChild
from proto.api.hooks import desired_children as check_children
from proto.api.objectmap import TypeKey
from proto.api.selectors import Selector
from proto.kube import errors
from proto.runtime.logs import get_logger
from proto.wire import ControllerDef
from workers.apply import ControllerRef, put_body
from workers.kinds.decorator import attachments, metadata
from workers.reconcile import Outcome, ReconcileRequest
from workers.sync import children, finalizer, hookrequest, status
from workers.sync.claims import adoption_patch
from workers.sync.errors import SyncFailure
from workers.sync.hookcall import Events, HookCaller, Hooks, resource_of
from workers.sync.observed import Observed
from workers.sync.patches import describe, guarded_patch, set_finalizers, sync_finalizer
from workers.sync.ssa_writes import ServerSideApply, applier_of, write_children
from workers.sync.writer import Writer

log = get_logger("metashard.decorator")


class DecoratorReconciler:
    """Reconciles the targets of one DecoratorController (see the module docstring)."""

    def __init__(
        self,
        definition: ControllerDef,
        *,
        writer: Writer,
        hooks: Hooks,
        events: Events,
        ssa: ServerSideApply | None = None,
    ) -> None:
        """``ssa``: apply attachments server-side through it instead of dynamic apply."""
        spec = parse_decorator_controller(orjson.loads(definition.object))
        count = len(spec.resources)
        if len(definition.resources) != count + len(spec.attachments):
            raise ValueError(
                f"{spec.name}: {len(definition.resources)} resources for {count} targets and "
                f"{len(spec.attachments)} attachment types"
            )
        self._spec = spec
        self._writer = writer
        self._events = events
        self._controller = definition.object
        self._parents: dict[str, children.Target] = {}
        self._rules: dict[str, tuple[DecoratedResource, ...]] = {}
        for info, rule in zip(definition.resources[:count], spec.resources, strict=True):
            name = info.group_resource
            self._parents[name] = children.Target(resource_of(info), name)
            self._rules[name] = (*self._rules.get(name, ()), rule)
        targets: dict[TypeKey, children.Target] = {}
        self._methods: dict[TypeKey, UpdateMethod] = {}
        self._types: list[ChildType] = []
        for info, attachment in zip(definition.resources[count:], spec.attachments, strict=True):
            type_key = TypeKey(info.api_version, info.kind)
            targets[type_key] = children.Target(resource_of(info), info.group_resource)
            self._methods[type_key] = attachment.update_strategy.method
            self._types.append(ChildType(info.api_version, info.kind, info.namespaced))
        self._targets = targets
        self._child_writer = children.ChildWriter(writer, targets)
        self._applier = applier_of(ssa, definition, targets)
        self._hooks = HookCaller(
            hooks,
            controller_type=names.DECORATOR_CONTROLLER,
            controller_name=spec.name,
            defined={HookName.SYNC: spec.hooks.sync, HookName.FINALIZE: spec.hooks.finalize},
            connections=definition.connections,
        )

    async def reconcile(self, request: ReconcileRequest) -> Outcome:
        raw = request.snapshot.parent
        target = self._parents.get(request.key.resource)
        if raw is None or target is None:
            return Outcome()
        obj: dict[str, Any] = orjson.loads(raw)
        try:
            return await self._sync(request, target, raw, obj)
        except SyncFailure as err:
            self._events.emit(
                obj, names.EVENT_TYPE_WARNING, names.REASON_SYNC_ERROR, f"Sync error: {err}"
            )
            raise

    async def _sync(
        self, request: ReconcileRequest, target: children.Target, raw: bytes, obj: dict[str, Any]
    ) -> Outcome:
        spec = self._spec
        ours = spec.finalizer
        resource = target.resource
        meta = obj["metadata"]
        selected = any(
            rule.matches(meta.get("labels"), meta.get("annotations"))
            for rule in self._rules[target.group_resource]
        )
        has_finalize = spec.hooks.finalize is not None
        current = await sync_finalizer(
            self._writer,
            target,
            obj,
            raw,
            name=ours,
            wanted=has_finalize,
            selected=selected,
            request=request,
        )
        if current is None:
            return Outcome()
        obj, raw, finalizers, deleting = (
            current.obj,
            current.raw,
            current.finalizers,
            current.deleting,
        )
        meta = obj["metadata"]

        uid = meta.get("uid") or ""
        namespace = (meta.get("namespace") or "") if resource.namespaced else ""
        owned, adoptable = self._observed(request, uid, namespace, deleting)
        finalizing = finalizer.finalizing(
            has_finalize_hook=has_finalize, deleting=deleting, selected=selected
        )
        response = await self._call(request, obj, raw, owned, namespace, finalizing)
        try:
            desired = check_children(
                list(response.attachments),
                parent_namespace=namespace,
                parent_uid=uid,
                child_types=self._types,
                selector=Selector.everything(),
                generate_selector=False,
                declared_in="attachments",
            )
        except HookResponseError as err:
            raise SyncFailure(str(err)) from None
        for child in desired:
            attachments.stamp(child.object, spec.name)

        obj = await self._update_object(request, target, obj, response)
        problems: list[str] = []
        if finalizer.manages_children(
            deleting=deleting, finalizers=finalizers, name=ours, has_finalize_hook=has_finalize
        ):
            owner = ControllerRef(
                api_version=resource.api_version, kind=resource.kind, name=meta["name"], uid=uid
            )
            await self._adopt(request, owner, desired, owned, adoptable, problems)
            problems += await self._attach(request, obj, owner, owned, desired)
        if finalizing and response.finalized and ours in finalizers:
            await set_finalizers(
                self._writer,
                target,
                obj,
                finalizer.updated(finalizers, ours, finalizer.Change.REMOVE),
                request,
            )
        if problems:
            raise SyncFailure(
                f"can't reconcile attachments for {describe(resource.kind, obj)}: "
                + "; ".join(problems)
            )
        return Outcome(requeue_after=response.resync_after_seconds)

    # --- steps --------------------------------------------------------------------------

    async def _attach(
        self,
        request: ReconcileRequest,
        obj: dict[str, Any],
        owner: ControllerRef,
        owned: dict[TypeKey, list[Observed]],
        desired: tuple[DesiredChild, ...],
    ) -> list[str]:
        """Create, update and delete attachments; one message per failed one."""
        return await write_children(
            self._applier,
            self._child_writer,
            key=request.key,
            parent=obj,
            observed=owned,
            desired=desired,
            methods=self._methods,
            owner=owner,
            wrote=request.wrote,
        )

    def _observed(
        self, request: ReconcileRequest, uid: str, namespace: str, deleting: bool
    ) -> tuple[dict[TypeKey, list[Observed]], dict[TypeKey, dict[tuple[str, str], Observed]]]:
        """Each type's attachments of the target, and the orphans it may adopt (none while it
        is being deleted), by namespace and name."""
        snapshot = request.snapshot.children
        owned: dict[TypeKey, list[Observed]] = {}
        adoptable: dict[TypeKey, dict[tuple[str, str], Observed]] = {}
        for type_key in self._targets:
            candidates = [Observed.decode(raw) for raw in snapshot.get(type_key.group_key, ())]
            found = attachments.split(
                candidates, uid=uid, namespace=namespace, name=self._spec.name, deleting=deleting
            )
            owned[type_key] = list(found.owned)
            adoptable[type_key] = {(c.namespace, c.name): c for c in found.adoptable}
        return owned, adoptable

    async def _adopt(
        self,
        request: ReconcileRequest,
        owner: ControllerRef,
        desired: tuple[DesiredChild, ...],
        owned: dict[TypeKey, list[Observed]],
        adoptable: dict[TypeKey, dict[tuple[str, str], Observed]],
        problems: list[str],
    ) -> None:
        reference = owner.as_owner_reference()
        for child in desired:
            orphan = adoptable.get(child.type, {}).get((child.namespace, child.name))
            if orphan is None:
                continue
            what = "adopt " + children.describe(child.type, child.namespace, child.name)
            adopted = await guarded_patch(
                self._writer,
                self._targets[child.type],
                orphan,
                adoption_patch(orphan, reference),
                what=what,
                request=request,
                problems=problems,
                controller=self._spec.name,
            )
            if adopted is not None:
                owned[child.type].append(Observed.of(orjson.dumps(adopted), adopted))

    async def _call(
        self,
        request: ReconcileRequest,
        obj: dict[str, Any],
        raw: bytes,
        owned: dict[TypeKey, list[Observed]],
        namespace: str,
        finalizing: bool,
    ) -> DecoratorResponse:
        name = HookName.FINALIZE if finalizing else HookName.SYNC
        found, related = hookrequest.maps(
            self._hooks.hook(name).version,
            parent_namespace=namespace,
            observed=owned,
            related=request.snapshot.related,
        )
        body = orjson.dumps(
            sync_request(
                controller=hookrequest.fragment(self._controller),
                object=hookrequest.fragment(raw),
                attachments=found,
                related=related,
                finalizing=finalizing,
            )
        )
        kind = self._parents[request.key.resource].resource.kind
        return await self._hooks.call(
            name,
            body,
            request=request,
            decode=lambda answer, mode: decode_decorator_response(answer, mode=mode),
            failed=f"{name.value} hook failed for {describe(kind, obj)}",
            cache_key=request.key,
        )

    async def _update_object(
        self,
        request: ReconcileRequest,
        target: children.Target,
        obj: dict[str, Any],
        response: DecoratorResponse,
    ) -> dict[str, Any]:
        """Labels, annotations and status as the hook asked; nothing when nothing differs.
        Returns the object as last written (``obj`` when nothing was)."""
        meta = obj["metadata"]
        labels = metadata.changes(meta.get("labels"), response.labels)
        annotations = metadata.changes(meta.get("annotations"), response.annotations)
        wanted = response.status
        if wanted is not None and not status.changed(obj, wanted):
            wanted = None  # null, or what the object already has: no status write
        resource = target.resource
        namespace = meta.get("namespace") or None
        try:
            if wanted is not None and "status" not in resource.subresources:
                body = put_body(
                    {
                        **obj,
                        "metadata": {
                            **meta,
                            "labels": metadata.merged(meta.get("labels"), labels),
                            "annotations": metadata.merged(meta.get("annotations"), annotations),
                        },
                        "status": wanted,
                    }
                )
                answer = await self._writer.replace(
                    resource, body, namespace=namespace, name=meta["name"]
                )
                request.wrote(target.group_resource, answer)
                return answer
            version = meta.get("resourceVersion")
            if wanted is not None:
                answer = await self._writer.replace(
                    resource,
                    status.body(obj, wanted),
                    namespace=namespace,
                    name=meta["name"],
                    subresource="status",
                )
                request.wrote(target.group_resource, answer, action="update status of")
                obj = answer
                version = (answer.get("metadata") or {}).get("resourceVersion")
            if labels or annotations:
                patch: dict[str, Any] = {"resourceVersion": version}
                if labels:
                    patch["labels"] = labels
                if annotations:
                    patch["annotations"] = annotations
                answer = await self._writer.patch(
                    resource, meta["name"], {"metadata": patch}, namespace=namespace
                )
                request.wrote(target.group_resource, answer, action="patch metadata of")
                obj = answer
        except (errors.NotFound, errors.Conflict) as err:
            log.debug("object not updated", object=describe(resource.kind, obj), reason=err.reason)
        except errors.KubeError as err:
            raise SyncFailure(f"can't update {describe(resource.kind, obj)}: {err}") from None
        return obj
