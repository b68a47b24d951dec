"""From informer events to the parent keys they affect, and the index of all parent keys.

Rules (Metacontroller's, minus its O(parents) scans where an index does better):
- A parent event affects the parent's own key, when ``parentResource.labelSelector`` selects
  the old or the new object. With ``ignoreStatusChanges``, an update that changes neither
  generation, labels nor deletion is ignored.
- A child event affects the parent named by the child's controller ownerReference (same group
  and kind as the parent type), for the old and the new state (adoption and release move a
  child between parents). A child without a controller ownerReference (an orphan) affects
  every parent in scope whose children selector matches it: the parents of its namespace for
  a namespaced parent type, all parents for a cluster-scoped one.
- Deleted objects are routed by their last known state.
- Live events are pushed at LIVE priority, initial lists and relists at LOW.
- ``on_parent(view, new, old)`` hears of every change of a selected parent (``new`` is None
  once it is gone or no longer selected); customize hooks hang on it.
- ``keys_of(slots)`` lists every parent key selected by a controller, by slot: what ASSIGN
  carries and what a new leader enqueues once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from manager.informer import EventHandler
from manager.store import Cached, Store
from manager.views import ControllerView, group_resource
from proto.api.selectors import Selector
from proto.kube.resources import Resource
from proto.wire import ParentKey, Priority, slot_of

Push = Callable[[ParentKey, Priority], None]
Handler = EventHandler
Stores = Callable[[Resource], "Store | None"]

_SELECTOR_CACHE = 4096


@dataclass(slots=True)
class _Interest:
    parents: list[ControllerView] = field(default_factory=list)
    children: list[ControllerView] = field(default_factory=list)


ParentHook = Callable[[ControllerView, "Cached | None", "Cached | None"], None]


class Router:
    def __init__(self, *, push: Push, stores: Stores, on_parent: ParentHook | None = None) -> None:
        self._push = push
        self._stores = stores
        self._on_parent = on_parent
        self._views: dict[str, ControllerView] = {}
        self._interest: dict[str, _Interest] = {}
        self._by_slot: dict[int, set[ParentKey]] = {}
        self._selectors: OrderedDict[tuple[str, str, str], Selector] = OrderedDict()

    # --- controllers --------------------------------------------------------------------------

    def set_controllers(self, views: Iterable[ControllerView]) -> None:
        """Route for exactly these controllers; rebuild the key index from the caches."""
        self._views = {v.name: v for v in views}
        interest: dict[str, _Interest] = {}
        for view in self._views.values():
            interest.setdefault(group_resource(view.parent), _Interest()).parents.append(view)
            for child in view.children:
                interest.setdefault(group_resource(child), _Interest()).children.append(view)
        self._interest = interest
        self._by_slot = {}
        for view in self._views.values():
            for parent in self.parents(view):
                self._index(view.key(parent.namespace, parent.name))
                if self._on_parent is not None:
                    self._on_parent(view, parent, None)

    def parents(self, view: ControllerView) -> list[Cached]:
        """The cached parents ``view`` handles."""
        store = self._stores(view.parent)
        return [] if store is None else [p for p in store if view.handles(p)]

    def keys_of(self, slots: Iterable[int]) -> tuple[ParentKey, ...]:
        keys: list[ParentKey] = []
        for slot in slots:
            keys.extend(self._by_slot.get(slot, ()))
        return tuple(sorted(keys))

    def all_keys(self) -> int:
        return sum(len(keys) for keys in self._by_slot.values())

    def _index(self, key: ParentKey) -> None:
        self._by_slot.setdefault(slot_of(key), set()).add(key)

    def _unindex(self, key: ParentKey) -> None:
        slot = slot_of(key)
        keys = self._by_slot.get(slot)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_slot[slot]

    # --- events -------------------------------------------------------------------------------

    def handler(self, resource: Resource) -> Handler:
        """The informer event handler for ``resource``."""
        name = group_resource(resource)

        def on_event(type: str, old: Cached | None, new: Cached | None, initial: bool) -> None:
            interest = self._interest.get(name)
            if interest is None:
                return
            priority = Priority.LOW if initial else Priority.LIVE
            for view in interest.parents:
                self._parent_event(view, old, new, priority)
            for view in interest.children:
                for key in self._child_keys(view, old, new):
                    self._push(key, priority)

        return on_event

    def _parent_event(
        self, view: ControllerView, old: Cached | None, new: Cached | None, priority: Priority
    ) -> None:
        current = new if new is not None else old
        if current is None:
            return
        key = view.key(current.namespace, current.name)
        selected_now = new is not None and view.handles(new)
        if self._on_parent is not None:
            self._on_parent(view, new if selected_now else None, old)
        if selected_now:
            self._index(key)
        else:
            self._unindex(key)
        if not selected_now and not (old is not None and view.handles(old)):
            return
        if (
            view.spec.parent.ignore_status_changes
            and old is not None
            and new is not None
            and old.generation == new.generation
            and old.labels == new.labels
            and old.deleting == new.deleting
        ):
            return
        self._push(key, priority)

    def _child_keys(
        self, view: ControllerView, old: Cached | None, new: Cached | None
    ) -> set[ParentKey]:
        keys: set[ParentKey] = set()
        for obj in (old, new):
            if obj is None:
                continue
            if obj.owner is not None:
                if view.owns(obj):
                    keys.add(view.key(obj.namespace, obj.owner.name))
            else:
                keys.update(self._orphan_parents(view, obj))
        return keys

    def _orphan_parents(self, view: ControllerView, child: Cached) -> list[ParentKey]:
        store = self._stores(view.parent)
        if store is None:
            return []
        candidates = store.in_namespace(child.namespace) if view.parent.namespaced else store
        return [
            view.key(parent.namespace, parent.name)
            for parent in candidates
            if view.handles(parent) and self.children_selector(view, parent).matches(child.labels)
        ]

    def children_selector(self, view: ControllerView, parent: Cached) -> Selector:
        """``view.children_selector(parent)``, cached per parent version."""
        cache_key = (view.name, parent.uid, parent.resource_version)
        selector = self._selectors.get(cache_key)
        if selector is None:
            selector = view.children_selector(parent)
            self._selectors[cache_key] = selector
            if len(self._selectors) > _SELECTOR_CACHE:
                self._selectors.popitem(last=False)
        else:
            self._selectors.move_to_end(cache_key)
        return selector
