"""What a DecoratorController supplies to the sync template (``workers.sync.template``).

``DecoratorSteps(definition, writer=...)`` are one controller's steps; the template
(``SyncTemplate(definition, steps, ...)``) runs them, as Metacontroller's
``decorator.syncParentObject``:

- The parent is a target: an object of one of its ``resources`` rules that the rule selects
  (labels and annotations). A rule's resource is the one it resolved to
  (``ControllerDef.resources``, one per rule, in order), as on the coordinator: a rule naming
  ``po`` applies to pods. The finalizer is ``metacontroller.io/decoratorcontroller-<name>``.
- Attachments: ours are those the target owns that carry our annotation
  (``attachments.split``); an annotated orphan the hook wants is adopted, unless the target
  is being deleted. Nothing is claimed or released before the hook.
- The request is ``{controller, object, attachments, related, finalizing}``. The answer's
  attachments are checked like a CompositeController's children (any labels) and get our
  annotation (``attachments.stamp``).
- The phases run as in Metacontroller: ``PARENT`` first: the answer's labels and annotations
  are merged onto the target (``null`` removes a key); its status, when not null and
  different, replaces ``.status``: with a PUT to ``/status`` when the resource has the status
  subresource, else within the object's update. The answer's ``conditions`` are merged by
  type into that status, or into the target's own when the answer's is null
  (``workers.sync.conditions``). Nothing is written when nothing differs.
  NotFound and Conflict are let go (the target is gone, or changed and is synced again).
  Then ``CHILDREN``: attachments are created, updated (per the attachment's
  ``updateStrategy``) and deleted (under server-side apply without the last-applied
  annotation, unlike Metacontroller #1139). Then ``FINALIZER``.

Differences from Metacontroller, on purpose: no GET before writes (resourceVersion
preconditions instead, as for CompositeControllers); the attachments are all checked before
any write; ``finalized`` counts only in an answer of the finalize hook; annotated orphans the
hook wants are adopted (by a target not being deleted) instead of failing with AlreadyExists.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from proto.api import names
from proto.api.controllers import HookName
from proto.api.decorator import (
    DecoratedResource,
    DecoratorResponse,
    decode_decorator_response,
    parse_decorator_controller,
    sync_request,
)
from proto.api.objectmap import TypeKey
from proto.kube import errors
from proto.runtime.logs import get_logger
from proto.wire import ControllerDef, ParentKey
from workers.apply import put_body
from workers.kinds.decorator import attachments, metadata
from workers.reconcile import ReconcileRequest
from workers.sync import children, conditions, hookrequest, status, template
from workers.sync.children import Target
from workers.sync.errors import SyncFailure
from workers.sync.hookrequest import HookRequest
from workers.sync.observed import Observed
from workers.sync.patches import describe
from workers.sync.template import Answer, Children, HookCall, KindSpec, Parent, Phase
from workers.sync.writer import Writer

log = get_logger("metashard.decorator")

Update = DecoratorResponse
"""What a DecoratorController answer asks of its target: labels, annotations, status."""


def encode(request: HookRequest) -> bytes:
    """The body of a decorator's hook request: ``{controller, object, attachments, related,
    finalizing}`` (``proto.api.decorator.sync_request``), the raw JSON embedded."""
    body = sync_request(
        controller=hookrequest.fragment(request.controller),
        object=hookrequest.fragment(request.parent),
        attachments=request.children,
        related=request.related,
        finalizing=request.finalizing,
    )
    return orjson.dumps(body)


class DecoratorSteps:
    """A DecoratorController's steps of the sync template (see the module docstring)."""

    def __init__(
        self,
        definition: ControllerDef,
        *,
        writer: Writer,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """``wall_clock``: seconds since the epoch, the ``lastTransitionTime`` of a condition
        that changes."""
        spec = parse_decorator_controller(orjson.loads(definition.object))
        count = len(spec.resources)
        if len(definition.resources) != count + len(spec.attachments):
            raise ValueError(
                f"{spec.name}: {len(definition.resources)} resources for {count} targets and "
                f"{len(spec.attachments)} attachment types"
            )
        self.spec = KindSpec(
            kind=names.DECORATOR_CONTROLLER,
            name=spec.name,
            finalizer=spec.finalizer,
            hooks={HookName.SYNC: spec.hooks.sync, HookName.FINALIZE: spec.hooks.finalize},
            children=children.ChildTypes.of(
                definition.resources[count:],
                [attachment.update_strategy.method for attachment in spec.attachments],
            ),
            phases=(Phase.PARENT, Phase.CHILDREN, Phase.FINALIZER),
            encode=encode,
            decode=decode_decorator_response,
            noun="attachments",
        )
        self._writer = writer
        self._wall_clock = wall_clock
        self._parents: dict[str, Target] = {}
        self._rules: dict[str, tuple[DecoratedResource, ...]] = {}
        for info, rule in zip(definition.resources[:count], spec.resources, strict=True):
            name = info.group_resource
            self._parents[name] = Target.of(info)
            self._rules[name] = (*self._rules.get(name, ()), rule)

    def target(self, key: ParentKey) -> Target | None:
        return self._parents.get(key.resource)

    def selected(self, target: Target, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        return any(
            rule.matches(meta.get("labels"), meta.get("annotations"))
            for rule in self._rules[target.group_resource]
        )

    async def observe(self, request: ReconcileRequest, parent: Parent) -> Children:
        """Each type's attachments of the target, and the orphans it may adopt (none while it
        is being deleted), by namespace and name."""
        snapshot = request.snapshot.children
        owned: dict[TypeKey, list[Observed]] = {}
        adoptable: dict[TypeKey, dict[tuple[str, str], Observed]] = {}
        for type_key in self.spec.children.targets:
            candidates = [Observed.decode(raw) for raw in snapshot.get(type_key.group_key, ())]
            found = attachments.split(
                candidates,
                uid=parent.uid,
                namespace=parent.namespace,
                name=self.spec.name,
                deleting=parent.deleting,
            )
            owned[type_key] = list(found.owned)
            adoptable[type_key] = {(c.namespace, c.name): c for c in found.adoptable}
        return Children(owned, adoptable)

    async def answer(
        self,
        request: ReconcileRequest,
        parent: Parent,
        children: Children,
        call: HookCall[DecoratorResponse],
    ) -> Answer[Update]:
        response = await call(parent.obj, parent.raw, request.snapshot.related)
        desired = template.desired_children(
            response.attachments, parent, children, self.spec.children, declared_in="attachments"
        )
        for child in desired:
            attachments.stamp(child.object, self.spec.name)
        return Answer(
            desired,
            response.resync_after_seconds,
            response.finalized,
            update=response,
            reports=response.reports,
        )

    async def update_parent(
        self, request: ReconcileRequest, target: Target, obj: dict[str, Any], answer: Answer[Update]
    ) -> dict[str, Any]:
        """Labels, annotations and status as the hook asked, with the answer's conditions
        merged into the status (the object's own when the answer's is null); nothing when
        nothing differs. Returns the object as last written (``obj`` when nothing was)."""
        response = answer.update
        meta = obj["metadata"]
        labels = metadata.changes(meta.get("labels"), response.labels)
        annotations = metadata.changes(meta.get("annotations"), response.annotations)
        wanted = response.status
        if answer.reports.conditions:
            current = obj.get("status")
            base = wanted if wanted is not None else current if isinstance(current, dict) else {}
            wanted = conditions.merged(
                base,
                answer.reports.conditions,
                observed=current,
                now=conditions.timestamp(self._wall_clock()),
            )
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
                written = await self._writer.replace(
                    resource, body, namespace=namespace, name=meta["name"]
                )
                request.wrote(target.group_resource, written)
                return written
            version = meta.get("resourceVersion")
            if wanted is not None:
                written = await self._writer.replace(
                    resource,
                    status.body(obj, wanted),
                    namespace=namespace,
                    name=meta["name"],
                    subresource="status",
                )
                request.wrote(target.group_resource, written, action="update status of")
                obj = written
                version = (written.get("metadata") or {}).get("resourceVersion")
            if labels or annotations:
                patch: dict[str, Any] = {"resourceVersion": version}
                if labels:
                    patch["labels"] = labels
                if annotations:
                    patch["annotations"] = annotations
                written = await self._writer.patch(
                    resource, meta["name"], {"metadata": patch}, namespace=namespace
                )
                request.wrote(target.group_resource, written, action="patch metadata of")
                obj = written
        except (errors.NotFound, errors.Conflict) as err:
            log.debug("object not updated", object=describe(resource.kind, obj), reason=err.reason)
        except errors.KubeError as err:
            raise SyncFailure(f"can't update {describe(resource.kind, obj)}: {err}") from None
        return obj
