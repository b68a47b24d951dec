"""From informer events to the parent keys they affect, pushed to a ``KeySink``; and the index
of all parent keys kept up to date.

Rules (Metacontroller's, minus its O(parents) scans where an index does better); what "ours"
means is each controller kind's (``manager.controllers.view.ControllerView``):
- A parent event affects the parent's own key, when the controller handles the old or the
  new object (``handles``), unless ``ignores_update`` says the change does not matter (an
  annotation change always matters: ``metashard.io/sync-requested-at`` asks for a sync, and
  removing ``metashard.io/paused`` for one at once, both LIVE as any live event).
- A child event affects the parent its controller ownerReference names (``owner_key``), for
  the old and the new state (adoption and release move a child between parents). A child
  without a controller ownerReference (an orphan) that the controller ``may_adopt`` affects
  every handled parent in scope that ``adopts`` it: the parents of its namespace for a
  namespaced parent type, all parents for a cluster-scoped one.
- Deleted objects are routed by their last known state.
- Live events are pushed at LIVE priority, initial lists and relists at LOW (``KeySink``).
- ``paused`` (``manager.routing.paused.PausedParents``), when given, hears of every handled
  parent and whether it is paused, as the key index does: it counts them for the metrics.
- ``parents.parent_changed(view, resource, new, old)`` hears of every change of a handled
  parent of a controller with a customize hook (``new`` is None once it is gone or no longer
  handled): the customize hooks hang on it (``manager.routing.related``).
- The ``KeyIndex`` holds every parent key handled by a controller, by slot, what ASSIGN
  carries, and remembers the slot of each (the dispatch and the snapshot server ask it) and
  whether the parent is ``behind`` (its last sync did not see its current generation: those
  go LIVE after the ASSIGN, so after a failover the parents edited meanwhile go first): the
  router adds and removes keys as parent events come, and rebuilds it from the caches when
  the controllers change (``controllers_changed``, which also tells ``parents`` of every
  cached parent).

Where keys go and are kept:
- ``KeySink.push(key, priority)`` hands a parent key to whoever sends it to the worker that
  owns its slot (``manager.term.dispatch.Dispatch``). The router, the customize hooks
  (``manager.routing.related``) and the resyncs (``manager.term.resync``) push through it.
- ``KeyIndex`` is state only: it sends nothing. ``manager.term.dispatch`` reads it for the
  keys of assigned slots (``keys_of``, ``behind_of``), it and ``manager.term.snapshots`` for
  slots (``slot``), ``manager.term.resync`` for the keys of a controller (``of_controller``).
"""

from __future__ import annotations

import sys
from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from manager.controllers.view import ControllerId, ControllerView, group_resource
from manager.informers.informer import EventHandler
from manager.informers.store import Cached, Stores
from manager.routing.paused import PausedParents
from proto.api.interventions import pause_of
from proto.kube.resources import Resource
from proto.wire import SLOT_COUNT, ControllerKind, ParentKey, Priority, slot_hash, slot_of


class KeySink(Protocol):
    def push(self, key: ParentKey, priority: Priority) -> None:
        """Send ``key`` at ``priority`` to the worker that owns its slot."""
        ...


_ENTRIES = tuple((slot, behind) for behind in (False, True) for slot in range(SLOT_COUNT))
"""A key's entry, (slot, behind): one shared tuple per slot and flag."""


class KeyIndex:
    """Every handled parent key, with its slot and whether its parent is behind (see the
    module docstring).

    - ``add(key, behind=...)`` holds a key, or updates whether it is behind; ``discard`` and
      ``clear`` forget keys;
    - ``keys_of(slots)``: every key of ``slots``, sorted (queued LOW with their ASSIGN);
      ``of_controller(id)``: every key of one controller (what a resync pushes);
    - ``behind_of(slots)``: the keys of ``slots`` whose parent's last sync did not see its
      current generation, sorted (queued first with the ASSIGN, ``manager.term.dispatch``);
    - ``slot(key)``: the slot of any key, a lookup for the keys held (hashed once, when
      added), hashed for others (``proto.wire.slot_of``);
    - ``held(key)``: the index's own copy of ``key`` (None: not held), which a key that came
      over the wire can be swapped for, so that keeping it costs no memory: a binary search
      among the keys of its slot, which are kept sorted (some hundred at 100,000 parents);
    - memory per key: the key itself (its group-resource string shared with every other key:
      interned), one dict entry and one list entry: about 140 bytes (``make bench
      BENCH=coordinator``).
    """

    def __init__(self) -> None:
        self._entries: dict[ParentKey, tuple[int, bool]] = {}
        self._by_slot: dict[int, list[ParentKey]] = {}

    def add(self, key: ParentKey, *, behind: bool = False) -> None:
        entry = self._entries.get(key)
        if entry is not None:
            if entry[1] is not behind:
                self._entries[key] = _ENTRIES[entry[0] + SLOT_COUNT * behind]
            return
        key = ParentKey(key.kind, key.controller, sys.intern(key.resource), *key[3:])
        slot = slot_hash(key)
        self._entries[key] = _ENTRIES[slot + SLOT_COUNT * behind]
        keys = self._by_slot.get(slot)
        if keys is None:
            self._by_slot[slot] = [key]
        else:
            insort(keys, key)

    def held(self, key: ParentKey) -> ParentKey | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        keys = self._by_slot[entry[0]]
        return keys[bisect_left(keys, key)]

    def discard(self, key: ParentKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            keys = self._by_slot[entry[0]]
            del keys[bisect_left(keys, key)]
            if not keys:
                del self._by_slot[entry[0]]

    def clear(self) -> None:
        self._entries = {}
        self._by_slot = {}

    def slot(self, key: ParentKey) -> int:
        entry = self._entries.get(key)
        return entry[0] if entry is not None else slot_of(key)

    def of_controller(self, controller: ControllerId) -> list[ParentKey]:
        """Every key of one controller (its ``(kind, name)``), in no particular order."""
        kind, name = controller
        return [key for key in self._entries if key.controller == name and key.kind == kind]

    def keys_of(self, slots: Iterable[int]) -> tuple[ParentKey, ...]:
        """Every key of ``slots``, sorted (each slot's run already is)."""
        keys: list[ParentKey] = []
        for slot in slots:
            keys.extend(self._by_slot.get(slot, ()))
        return tuple(sorted(keys))

    def behind_of(self, slots: Iterable[int]) -> tuple[ParentKey, ...]:
        """The keys of ``slots`` whose parent is behind, sorted."""
        entries = self._entries
        keys: list[ParentKey] = []
        for slot in slots:
            keys.extend(k for k in self._by_slot.get(slot, ()) if entries[k][1])
        return tuple(sorted(keys))


def behind(view: ControllerView, parent: Cached) -> bool:
    """Whether ``parent``'s last sync by ``view`` did not see its current generation, as far as
    its status tells: its ``status.observedGeneration`` is below its ``metadata.generation``,
    or missing (never synced, or synced before metashard). Only a kind whose every sync writes
    ``observedGeneration`` can tell: CompositeController (``workers.sync.status``, as
    Metacontroller). A DecoratorController writes what its hook returns, so the
    ``observedGeneration`` of its targets, if any, is their own controller's: never behind."""
    if view.kind is not ControllerKind.COMPOSITE:
        return False
    observed = parent.observed_generation
    return observed is None or observed < parent.generation


@dataclass(slots=True)
class _Interest:
    parents: list[tuple[ControllerView, Resource]] = field(default_factory=list)
    children: list[ControllerView] = field(default_factory=list)


class ParentListener(Protocol):
    def parent_changed(
        self, view: ControllerView, resource: Resource, parent: Cached | None, old: Cached | None
    ) -> None:
        """``parent`` of ``view`` (a controller with a customize hook) appeared or changed
        (from ``old``), or went away or is no longer handled (``parent`` None). Must be cheap:
        it runs in the informer's handler."""
        ...


class Router:
    def __init__(
        self,
        *,
        sink: KeySink,
        keys: KeyIndex,
        stores: Stores,
        parents: ParentListener | None = None,
        paused: PausedParents | None = None,
    ) -> None:
        self._sink = sink
        self._paused = paused
        self._keys = keys
        self._stores = stores
        self._parents = parents
        self._views: list[ControllerView] = []
        self._interest: dict[str, _Interest] = {}

    # --- controllers --------------------------------------------------------------------------

    def controllers_changed(
        self, views: Sequence[ControllerView], added: Sequence[ControllerView]
    ) -> None:
        """Route for exactly ``views``; rebuild the key index from the caches."""
        self._views = list(views)
        interest: dict[str, _Interest] = {}
        for view in self._views:
            for resource in view.parents:
                interest.setdefault(group_resource(resource), _Interest()).parents.append(
                    (view, resource)
                )
            for child in view.children:
                interest.setdefault(group_resource(child), _Interest()).children.append(view)
        self._interest = interest
        self._keys.clear()
        paused = self._paused
        if paused is not None:
            paused.controllers_changed(self._views)
        for view in self._views:
            listener = self._parents if view.customize is not None else None
            for resource, parent in self.parents(view):
                key = view.key(resource, parent.namespace, parent.name)
                self._keys.add(key, behind=behind(view, parent))
                if paused is not None:
                    paused.parent(key, paused=pause_of(parent.annotations).paused)
                if listener is not None:
                    listener.parent_changed(view, resource, parent, None)

    def parents(self, view: ControllerView) -> list[tuple[Resource, Cached]]:
        """The cached parents ``view`` handles, with their resource."""
        found: list[tuple[Resource, Cached]] = []
        for resource in view.parents:
            store = self._stores.store(resource)
            if store is not None:
                found.extend((resource, p) for p in store if view.handles(resource, p))
        return found

    # --- events -------------------------------------------------------------------------------

    def handler(self, resource: Resource) -> EventHandler:
        """The informer event handler for ``resource``."""
        name = group_resource(resource)

        def on_event(type: str, old: Cached | None, new: Cached | None, initial: bool) -> None:
            interest = self._interest.get(name)
            if interest is None:
                return
            priority = Priority.LOW if initial else Priority.LIVE
            for view, resource in interest.parents:
                self._parent_event(view, resource, old, new, priority)
            for view in interest.children:
                for key in self._child_keys(view, old, new):
                    self._sink.push(key, priority)

        return on_event

    def _parent_event(
        self,
        view: ControllerView,
        resource: Resource,
        old: Cached | None,
        new: Cached | None,
        priority: Priority,
    ) -> None:
        current = new if new is not None else old
        if current is None:
            return
        key = view.key(resource, current.namespace, current.name)
        selected_now = new is not None and view.handles(resource, new)
        if self._parents is not None and view.customize is not None:
            self._parents.parent_changed(view, resource, new if selected_now else None, old)
        if selected_now and new is not None:
            self._keys.add(key, behind=behind(view, new))
            if self._paused is not None:
                self._paused.parent(key, paused=pause_of(new.annotations).paused)
        else:
            self._keys.discard(key)
            if self._paused is not None:
                self._paused.discard(key)
        if not selected_now and not (old is not None and view.handles(resource, old)):
            return
        if old is not None and new is not None and view.ignores_update(resource, old, new):
            return
        self._sink.push(key, priority)

    def _child_keys(
        self, view: ControllerView, old: Cached | None, new: Cached | None
    ) -> set[ParentKey]:
        keys: set[ParentKey] = set()
        for obj in (old, new):
            if obj is None:
                continue
            if obj.owner is not None:
                key = view.owner_key(obj)
                if key is not None:
                    keys.add(key)
            elif view.may_adopt(obj):
                keys.update(self._orphan_parents(view, obj))
        return keys

    def _orphan_parents(self, view: ControllerView, child: Cached) -> list[ParentKey]:
        keys: list[ParentKey] = []
        for resource in view.parents:
            store = self._stores.store(resource)
            if store is None:
                continue
            candidates = store.in_namespace(child.namespace) if resource.namespaced else store
            keys.extend(
                view.key(resource, parent.namespace, parent.name)
                for parent in candidates
                if view.handles(resource, parent) and view.adopts(parent, child)
            )
        return keys
