"""CompositeControllers on the coordinator: one parent resource, children claimed by selector.

- Watches the parent resource and every child resource.
- A parent is handled when ``parentResource.labelSelector`` selects it or it still carries
  the controller's finalizer (it must be finalized). ``ignoreStatusChanges`` drops updates
  that change neither generation, labels nor annotations, of a parent not being deleted
  (``manager.controllers.view.status_only``). Without a finalize hook, the parents' watch may
  carry ``parentResource.labelSelector`` (``watch_selector``).
- A child maps to the parent its controller ownerReference names (same group and kind as the
  parent type). An orphan maps to every parent in scope whose children selector matches it:
  the parents of its namespace for a namespaced parent type, all parents otherwise.
- A snapshot's children of one type: those whose controller ownerReference is the parent's
  uid (in the parent's namespace when it is namespaced), then the orphans in scope the
  parent's selector matches: what Metacontroller claims, adopts and releases from.
- The children selector is ``controller-uid=<uid>`` under ``generateSelector``, else the
  parent's ``spec.selector`` (``Selector.nothing()`` when unusable), decoded once per parent
  version (a bounded cache).
- With a ``RollingRecreate`` or ``RollingInPlace`` child type, ControllerRevisions
  (``metacontroller.k8s.io/v1alpha1``) are watched too: the view keeps revisions
  (``manager.controllers.view.KeepsRevisions``), ``revisions`` is that resource, last of
  ``children`` (so they are watched and routed like children: an owned revision maps to its
  parent, an orphan to the parents that would adopt it), and left out of ``definition``.
  A parent's revisions (``revisions_of``) are those it controls in its revision namespace,
  then the orphans there carrying the parent type's ``metacontroller.k8s.io/apiGroup`` and
  ``.../resource`` labels that its selector matches. The revision namespace is the parent's
  own for a namespaced parent, ``cluster_revision_namespace`` (``--cluster-revision-namespace``,
  read from the ``Context``'s settings) for a cluster-scoped one: ControllerRevisions are
  namespaced, and a namespaced object may have a cluster-scoped owner (the garbage collector
  deletes it with the parent). An orphan revision elsewhere is never offered to a
  cluster-scoped parent. Metacontroller also releases a controlled revision whose labels no
  longer match the selector, and then fails to create it again forever (#194); here a
  controlled revision stays claimed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import orjson

from manager.controllers.rbac import (
    PARENT_VERBS,
    REVISION_VERBS,
    GroupResource,
    Needs,
    Resolve,
    resolved,
)
from manager.controllers.view import (
    ControllerView,
    SpecView,
    Unusable,
    Versions,
    group_resource,
    parse_spec,
    resolve_all,
    status_only,
)
from manager.informers.store import Cached, Store
from manager.kinds import Context
from proto.api import names
from proto.api.controllers import CompositeController, group_of, parse_composite_controller
from proto.api.fields import Fields
from proto.api.revisions import Revision, older_parents
from proto.api.selectors import Selector, SelectorError, from_label_selector, from_match_labels
from proto.kube.resources import Resource
from proto.wire import ControllerDef, ControllerKind, ParentKey

_SELECTOR_CACHE = 4096


@dataclass(frozen=True, eq=False)
class CompositeView(SpecView[CompositeController]):
    spec: CompositeController
    raw: bytes  # the controller object as the API server sent it
    resource_version: str
    parent: Resource
    children: tuple[Resource, ...]
    revisions: Resource | None = None
    cluster_revision_namespace: str = "default"
    """Where the ControllerRevisions of cluster-scoped parents live."""
    connections: bytes = field(default=b"", repr=False)
    """Each hook's resolved TLS material and credentials (``proto.api.endpoints``)."""
    _selectors: OrderedDict[tuple[str, str], Selector] = field(
        default_factory=OrderedDict, repr=False
    )

    kind: ClassVar[ControllerKind] = ControllerKind.COMPOSITE

    @property
    def parents(self) -> tuple[Resource, ...]:
        return (self.parent,)

    @cached_property
    def parent_group_resource(self) -> str:
        return group_resource(self.parent)

    @cached_property
    def definition(self) -> ControllerDef:
        """The parent, then the child resources but ControllerRevisions."""
        return self._definition(
            (self.parent, *(c for c in self.children if c is not self.revisions))
        )

    def parent_resource(self, key: ParentKey) -> Resource | None:
        return self.parent if key.resource == self.parent_group_resource else None

    def handles(self, resource: Resource, parent: Cached) -> bool:
        return (
            self.spec.parent.label_selector.matches(parent.labels)
            or self.spec.finalizer in parent.finalizers
        )

    def ignores_update(self, resource: Resource, old: Cached, new: Cached) -> bool:
        return self.spec.parent.ignore_status_changes and status_only(old, new)

    def watch_selector(self, resource: Resource) -> Selector | None:
        """``parentResource.labelSelector``; None without one, and with a finalize hook,
        which must also finalize parents that stopped matching."""
        selector = self.spec.parent.label_selector
        if self.spec.hooks.finalize is not None or selector.empty or selector.matches_nothing:
            return None
        return selector

    def owner_key(self, child: Cached) -> ParentKey | None:
        ref = child.owner
        if ref is None or ref.kind != self.parent.kind:
            return None
        if group_of(ref.api_version) != self.parent.group:
            return None
        return self.key(self.parent, child.namespace, ref.name)

    def may_adopt(self, orphan: Cached) -> bool:
        return True

    def adopts(self, parent: Cached, orphan: Cached) -> bool:
        if names.REVISION_RESOURCE_LABEL in orphan.labels and (
            not self._revision_type(orphan) or orphan.namespace != self.revision_namespace(parent)
        ):
            return False
        return self.children_selector(parent).matches(orphan.labels)

    def revision_namespace(self, parent: Cached) -> str:
        """Where ``parent``'s ControllerRevisions live (see the module docstring)."""
        return parent.namespace if self.parent.namespaced else self.cluster_revision_namespace

    def _revision_type(self, revision: Cached) -> bool:
        labels = revision.labels
        return (
            labels.get(names.REVISION_RESOURCE_LABEL) == self.parent.name
            and labels.get(names.REVISION_API_GROUP_LABEL) == self.parent.group
        )

    def children_of(self, parent: Cached, resource: Resource, store: Store) -> tuple[bytes, ...]:
        namespace = parent.namespace if self.parent.namespaced else None
        owned = store.owned_by(parent.uid)
        if namespace is not None:
            owned = [c for c in owned if c.namespace == namespace]
        selector = self.children_selector(parent)
        orphans = [c for c in store.select(selector, namespace=namespace) if c.owner is None]
        return tuple(c.raw for c in owned) + tuple(c.raw for c in orphans)

    def revision_resource(self) -> Resource | None:
        return self.revisions

    def revisions_of(self, parent: Cached, store: Store) -> tuple[bytes, ...]:
        """The ControllerRevisions ``parent`` claims (see the module docstring)."""
        namespace = self.revision_namespace(parent)
        owned = [r for r in store.owned_by(parent.uid) if r.namespace == namespace]
        selector = self.children_selector(parent)
        orphans = [
            r
            for r in store.select(selector, namespace=namespace)
            if r.owner is None and self._revision_type(r)
        ]
        return tuple(r.raw for r in owned) + tuple(r.raw for r in orphans)

    def revision_parents(self, parent: Cached, revisions: tuple[bytes, ...]) -> Versions:
        """``proto.api.revisions.older_parents`` over ``revisions`` (the raw JSON of
        ``revisions_of``). Cheap when no older revision owns children: the parent is decoded
        only when some revision lists children; a malformed revision is skipped (the worker
        reports it). Empty for a controller that keeps no revisions."""
        if self.revisions is None:
            return ()
        owning: list[Revision] = []
        for raw in revisions:
            if b'"children"' not in raw:
                continue
            try:
                revision = Revision.decode(orjson.loads(raw))
            except (orjson.JSONDecodeError, ValueError, AttributeError):
                continue
            if revision.child_count():
                owning.append(revision)
        if not owning:
            return ()
        live = orjson.loads(parent.raw)
        paths = self.spec.parent.revision_field_paths
        return tuple(
            (name, orjson.dumps(version)) for name, version in older_parents(live, owning, paths)
        )

    def children_selector(self, parent: Cached) -> Selector:
        """The selector that claims children for ``parent``, cached per parent version."""
        cache_key = (parent.uid, parent.resource_version)
        selector = self._selectors.get(cache_key)
        if selector is not None:
            self._selectors.move_to_end(cache_key)
            return selector
        selector = self._selector(parent)
        self._selectors[cache_key] = selector
        if len(self._selectors) > _SELECTOR_CACHE:
            self._selectors.popitem(last=False)
        return selector

    def _selector(self, parent: Cached) -> Selector:
        if self.spec.generate_selector:
            return from_match_labels({names.CONTROLLER_UID_LABEL: parent.uid})
        try:
            obj: dict[str, Any] = orjson.loads(parent.raw)
            return from_label_selector((obj.get("spec") or {}).get("selector"))
        except (SelectorError, orjson.JSONDecodeError, AttributeError):
            return Selector.nothing()


class _Composite:
    kind = ControllerKind.COMPOSITE
    resource = names.COMPOSITE_CONTROLLERS

    def needs(self, spec: Fields, obj: Mapping[str, Any], resolve: Resolve) -> Needs:
        """One parent, its children, and ControllerRevisions under a rolling child type."""
        parent = resolved(spec.require_object("parentResource"), resolve)
        children = tuple(resolved(f, resolve) for f in spec.get_objects("childResources"))
        controller = parse_composite_controller(obj)
        revisions = GroupResource(names.GROUP, names.CONTROLLER_REVISIONS)
        return Needs(
            parents=(parent,),
            children=children,
            parent_verbs=PARENT_VERBS,
            connections=controller.connection_settings(),
            grants=((revisions, REVISION_VERBS),) if controller.rolling else (),
        )

    async def view(self, obj: dict[str, Any], cached: Cached, context: Context) -> ControllerView:
        discovery = context.discovery
        spec = parse_spec(parse_composite_controller, obj, self.kind)
        parent, *children = await resolve_all(
            discovery,
            [
                (spec.parent.api_version, spec.parent.resource),
                *((c.api_version, c.resource) for c in spec.children),
            ],
        )
        revisions = None
        if spec.rolling:
            (revisions,) = await resolve_all(
                discovery, [(names.API_VERSION, names.CONTROLLER_REVISIONS)]
            )
            children.append(revisions)
        if "status" not in parent.subresources:
            crd = f"{parent.name}.{parent.group}" if parent.group else parent.name
            raise Unusable(
                names.REASON_SYNC_ERROR,
                f"[{cached.name}] Sync error - ignoring, CRD [{crd}] does not have "
                "subresource 'Status' enabled",
            )
        return CompositeView(
            spec,
            cached.raw,
            cached.resource_version,
            parent,
            tuple(children),
            revisions,
            context.settings.common.cluster_revision_namespace,
        )


KIND = _Composite()
