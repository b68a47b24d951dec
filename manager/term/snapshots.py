"""What a worker gets for one parent key: the parent and its claimable children, as raw JSON.

- ``parent`` is the cached parent, or None when it is gone or no longer the controller's
  (``ControllerView.handles``: not selected and not carrying the controller's finalizer).
- ``children`` has one group per declared child type (``<Kind>.<apiVersion>``, present even
  when empty): what the controller kind says a parent may claim (``children_of``: for a
  CompositeController its owned children and the orphans its selector matches, for a
  DecoratorController its annotated attachments). Each object appears once; order is stable.
- ``revisions`` (``revisions_of``) are the parent's ControllerRevisions, for a controller
  that keeps them (``ControllerView.revisions``); they are not among ``children``.
- ``related`` is what ``manager.routing.related`` selected for the parent (controllers with a
  customize hook), empty otherwise.
- Payloads are the bytes the API server sent; nothing is decoded or re-encoded here.
"""

from __future__ import annotations

from collections.abc import Callable

from manager.controllers.view import ControllerView, group_key
from manager.informers.store import Cached, Stores
from proto.wire import ParentKey

Children = dict[str, tuple[bytes, ...]]
RelatedOf = Callable[[ControllerView, Cached], Children]


def parent_of(view: ControllerView, key: ParentKey, stores: Stores) -> Cached | None:
    resource = view.parent_resource(key)
    store = stores.store(resource) if resource is not None else None
    if resource is None or store is None:
        return None
    parent = store.get(key.namespace, key.name)
    return parent if parent is not None and view.handles(resource, parent) else None


def snapshot_of(
    view: ControllerView,
    key: ParentKey,
    *,
    stores: Stores,
    related: RelatedOf | None = None,
) -> tuple[bytes | None, Children, Children]:
    """(parent, children, related) for ``key``."""
    parent = parent_of(view, key, stores)
    if parent is None:
        return None, {}, {}
    children: Children = {}
    for resource in view.children:
        if resource is view.revisions:
            continue
        store = stores.store(resource)
        children[group_key(resource)] = (
            () if store is None else view.children_of(parent, resource, store)
        )
    return parent.raw, children, related(view, parent) if related is not None else {}


def revisions_of(view: ControllerView, key: ParentKey, *, stores: Stores) -> tuple[bytes, ...]:
    """The ControllerRevisions of the parent ``key`` names (none when the controller keeps
    none, or the parent is gone)."""
    resource = view.revisions
    store = stores.store(resource) if resource is not None else None
    parent = parent_of(view, key, stores) if store is not None else None
    if resource is None or store is None or parent is None:
        return ()
    return view.children_of(parent, resource, store)
