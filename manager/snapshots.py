"""What a worker gets for one parent key: the parent and its claimable children, as raw JSON.

- ``parent`` is the cached parent, or None when it is gone or no longer the controller's (not
  selected by ``parentResource.labelSelector`` and not carrying the controller's finalizer).
- ``children`` has one group per declared child type (``<Kind>.<apiVersion>``, present even
  when empty): the objects whose controller ownerReference is the parent's uid (in the
  parent's namespace when the parent is namespaced) followed by the orphans in scope that the
  parent's children selector matches: the candidates Metacontroller claims, adopts and
  releases from. Each object appears once; order is stable (namespace, name).
- ``related`` is what ``manager.related`` selected for the parent (controllers with a
  customize hook), empty otherwise.
- Payloads are the bytes the API server sent; nothing is decoded or re-encoded here except
  the parent, once per version, to read its selector (cached by the router).
"""

from __future__ import annotations

from collections.abc import Callable

from manager.routing import Router
from manager.store import Cached, Store
from manager.views import ControllerView, group_key
from proto.kube.resources import Resource
from proto.wire import ParentKey

Children = dict[str, tuple[bytes, ...]]
RelatedOf = Callable[[ControllerView, Cached], Children]


def parent_of(view: ControllerView, key: ParentKey, store: Store | None) -> Cached | None:
    if store is None:
        return None
    parent = store.get(key.namespace, key.name)
    return parent if parent is not None and view.handles(parent) else None


def snapshot_of(
    view: ControllerView,
    key: ParentKey,
    *,
    stores: Callable[[Resource], Store | None],
    router: Router,
    related: RelatedOf | None = None,
) -> tuple[bytes | None, Children, Children]:
    """(parent, children, related) for ``key``."""
    parent = parent_of(view, key, stores(view.parent))
    if parent is None:
        return None, {}, {}
    selector = router.children_selector(view, parent)
    namespace = parent.namespace if view.parent.namespaced else None
    children: Children = {}
    for resource in view.children:
        store = stores(resource)
        if store is None:
            children[group_key(resource)] = ()
            continue
        owned = store.owned_by(parent.uid)
        if namespace is not None:
            owned = [c for c in owned if c.namespace == namespace]
        orphans = [c for c in store.select(selector, namespace=namespace) if c.owner is None]
        children[group_key(resource)] = tuple(c.raw for c in owned) + tuple(c.raw for c in orphans)
    return parent.raw, children, related(view, parent) if related is not None else {}
