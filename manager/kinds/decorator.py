"""DecoratorControllers on the coordinator: any number of target resources, attachments.

As Metacontroller's ``pkg/controller/decorator`` does it:

- Watches every resource of ``resources[]`` (the targets, the parents of its keys) and every
  attachment resource.
- A target is handled when some rule of its resource selects it (``labelSelector`` and
  ``annotationSelector`` both match) or it still carries the controller's finalizer (it must
  be finalized: the finalize hook also runs for a target that stopped matching). With
  ``ignoreStatusChanges`` on every rule of its resource, an update that changes neither
  generation, labels nor annotations, of a target not being deleted, is dropped
  (``manager.controllers.view.status_only``). Without a finalize hook, a target resource's
  watch may carry the cover of its rules' ``labelSelector`` (``watch_selector``).
- An attachment is ours when its controller ownerReference names a target type and it
  carries ``metacontroller.k8s.io/decorator-controller: <name>``; it maps to that target's
  key. An orphan carrying the annotation maps to every handled target in scope (its
  namespace for namespaced targets, all of them for cluster-scoped ones): the one whose hook
  wants it adopts it.
- A snapshot's attachments of one type: those ours for the target (owned by its uid and
  annotated, in its namespace when it is namespaced), then the annotated orphans in scope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from manager.controllers.rbac import DECORATOR_PARENT_VERBS, Needs, Resolve, resolved
from manager.controllers.view import (
    ControllerView,
    SpecView,
    group_resource,
    parse_spec,
    resolve_all,
    status_only,
)
from manager.informers.shared import combine
from manager.informers.store import Cached, Store
from manager.kinds import Context
from proto.api import names
from proto.api.controllers import group_of
from proto.api.decorator import DecoratedResource, DecoratorController, parse_decorator_controller
from proto.api.fields import Fields
from proto.api.selectors import Selector
from proto.kube.resources import Resource
from proto.wire import ControllerDef, ControllerKind, ParentKey


@dataclass(frozen=True, eq=False)
class DecoratorView(SpecView[DecoratorController]):
    spec: DecoratorController
    raw: bytes  # the controller object as the API server sent it
    resource_version: str
    targets: tuple[Resource, ...]
    """One per ``resources[]`` rule, in order (a resource may repeat)."""
    children: tuple[Resource, ...]
    """One per ``attachments[]`` entry."""
    connections: bytes = field(default=b"", repr=False)
    """Each hook's resolved TLS material and credentials (``proto.api.endpoints``)."""

    kind: ClassVar[ControllerKind] = ControllerKind.DECORATOR

    @cached_property
    def _by_group_resource(self) -> dict[str, tuple[Resource, tuple[DecoratedResource, ...]]]:
        found: dict[str, tuple[Resource, tuple[DecoratedResource, ...]]] = {}
        for resource, rule in zip(self.targets, self.spec.resources, strict=True):
            name = group_resource(resource)
            _, rules = found.get(name, (resource, ()))
            found[name] = (resource, (*rules, rule))
        return found

    @cached_property
    def _by_group_kind(self) -> dict[tuple[str, str], Resource]:
        return {(r.group, r.kind): r for r, _ in self._by_group_resource.values()}

    @cached_property
    def parents(self) -> tuple[Resource, ...]:
        return tuple(r for r, _ in self._by_group_resource.values())

    @cached_property
    def definition(self) -> ControllerDef:
        """One target resource per ``resources[]`` rule, then the attachments."""
        return self._definition((*self.targets, *self.children))

    def parent_resource(self, key: ParentKey) -> Resource | None:
        found = self._by_group_resource.get(key.resource)
        return found[0] if found is not None else None

    def _rules(self, resource: Resource) -> tuple[DecoratedResource, ...]:
        found = self._by_group_resource.get(group_resource(resource))
        return found[1] if found is not None else ()

    def handles(self, resource: Resource, parent: Cached) -> bool:
        if self.spec.finalizer in parent.finalizers:
            return True
        return any(r.matches(parent.labels, parent.annotations) for r in self._rules(resource))

    def ignores_update(self, resource: Resource, old: Cached, new: Cached) -> bool:
        rules = self._rules(resource)
        return bool(rules) and all(r.ignore_status_changes for r in rules) and status_only(old, new)

    def watch_selector(self, resource: Resource) -> Selector | None:
        """The cover of the ``labelSelector`` of ``resource``'s rules; None when one of
        them has none, and with a finalize hook, which must also finalize targets that
        stopped matching (``annotationSelector`` cannot go to the server)."""
        rules = self._rules(resource)
        if self.spec.hooks.finalize is not None or not rules:
            return None
        return combine(r.label_selector for r in rules)

    def _ours(self, child: Cached) -> bool:
        return child.annotations.get(names.DECORATOR_ANNOTATION) == self.spec.name

    def owner_key(self, child: Cached) -> ParentKey | None:
        ref = child.owner
        if ref is None or not self._ours(child):
            return None
        target = self._by_group_kind.get((group_of(ref.api_version), ref.kind))
        if target is None:
            return None
        return self.key(target, child.namespace, ref.name)

    def may_adopt(self, orphan: Cached) -> bool:
        return self._ours(orphan)

    def adopts(self, parent: Cached, orphan: Cached) -> bool:
        return True

    def children_of(self, parent: Cached, resource: Resource, store: Store) -> tuple[bytes, ...]:
        namespace = parent.namespace or None
        owned = [
            c
            for c in store.owned_by(parent.uid)
            if self._ours(c) and (namespace is None or c.namespace == namespace)
        ]
        orphans = [c for c in store.orphans(namespace) if self._ours(c)]
        return tuple(c.raw for c in owned) + tuple(c.raw for c in orphans)


class _Decorator:
    kind = ControllerKind.DECORATOR
    resource = names.DECORATOR_CONTROLLERS

    def needs(self, spec: Fields, obj: Mapping[str, Any], resolve: Resolve) -> Needs:
        """Its resources (at least one) as parents, which its sync hook may update, and its
        attachments as children."""
        targets = spec.get_objects("resources")
        if not targets:
            raise spec.fail("resources", "required (a DecoratorController needs resources)")
        return Needs(
            parents=tuple(resolved(f, resolve) for f in targets),
            children=tuple(resolved(f, resolve) for f in spec.get_objects("attachments")),
            parent_verbs=DECORATOR_PARENT_VERBS,
            connections=parse_decorator_controller(obj).connection_settings(),
        )

    async def view(self, obj: dict[str, Any], cached: Cached, context: Context) -> ControllerView:
        discovery = context.discovery
        spec = parse_spec(parse_decorator_controller, obj, self.kind)
        targets = await resolve_all(
            discovery, [(r.api_version, r.resource) for r in spec.resources]
        )
        attachments = await resolve_all(
            discovery, [(a.api_version, a.resource) for a in spec.attachments]
        )
        return DecoratorView(spec, cached.raw, cached.resource_version, targets, attachments)


KIND = _Decorator()
