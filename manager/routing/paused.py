"""The parents whose syncs are paused, per controller: what the gauge
``metashard_coordinator_paused_parents{controller}`` shows.

- A parent counts when its controller handles it and it carries ``metashard.io/paused:
  "true"`` (``proto.api.interventions``), or when its controller object does: then every
  parent the controller handles counts.
- State only, kept by the router (``manager.routing.router.Router``) in step with the key
  index: ``parent(key, paused=...)`` for each handled parent as it comes and changes,
  ``discard(key)`` when it goes or is no longer handled, ``controllers_changed(views)`` when
  the controllers change (the router then tells it of every cached parent again).
- ``count(controller)`` is what each scrape reads: the size of a set for the parents paused
  one by one; for a paused controller, the number of its keys in the key index (a pass over
  every key, made only for paused controllers).
- Each running controller has its series (its queue name, ``CompositeController-<name>``, as
  the workers' metrics), 0 when nothing is paused; ``forget()`` drops them all when the term
  ends.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Protocol

import orjson

from manager.controllers.view import ControllerId, ControllerView
from proto.api.interventions import annotations_of, pause_of
from proto.wire import ParentKey


class ControllerKeys(Protocol):
    def of_controller(self, controller: ControllerId) -> list[ParentKey]:
        """Every handled parent key of one controller (``manager.routing.router.KeyIndex``)."""
        ...


class PausedMetrics(Protocol):
    def paused_parents(self, controller: str, count: Callable[[], float] | None) -> None:
        """Export ``count()`` as the paused parents of ``controller`` (its queue name) at each
        scrape; None drops the series (``manager.term.metrics.TermMetrics``)."""
        ...


class PausedParents:
    def __init__(self, *, keys: ControllerKeys, metrics: PausedMetrics) -> None:
        self._keys = keys
        self._metrics = metrics
        self._parents: dict[ControllerId, set[ParentKey]] = {}
        self._controllers: frozenset[ControllerId] = frozenset()
        self._exported: dict[ControllerId, str] = {}

    def controllers_changed(self, views: Sequence[ControllerView]) -> None:
        """Count for exactly ``views``, from no parent: the caller tells of each again."""
        wanted = {view.id: f"{view.kind.value}-{view.name}" for view in views}
        for ident, label in self._exported.items():
            if wanted.get(ident) != label:
                self._metrics.paused_parents(label, None)
        for ident, label in wanted.items():
            if self._exported.get(ident) != label:
                self._metrics.paused_parents(label, functools.partial(self.count, ident))
        self._exported = wanted
        self._controllers = frozenset(
            view.id for view in views if pause_of(annotations_of(orjson.loads(view.raw))).paused
        )
        self._parents = {}

    def parent(self, key: ParentKey, *, paused: bool) -> None:
        """A handled parent as it is now."""
        if not paused:
            self.discard(key)
            return
        self._parents.setdefault((key.kind, key.controller), set()).add(key)

    def discard(self, key: ParentKey) -> None:
        """A parent gone, or no longer handled."""
        parents = self._parents.get((key.kind, key.controller))
        if parents is not None:
            parents.discard(key)

    def count(self, controller: ControllerId) -> int:
        if controller in self._controllers:
            return len(self._keys.of_controller(controller))
        return len(self._parents.get(controller, ()))

    def forget(self) -> None:
        """Drop every series: the term ends."""
        for label in self._exported.values():
            self._metrics.paused_parents(label, None)
        self._exported = {}
