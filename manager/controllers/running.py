"""The controllers running now: ``ControllerSet``, what ``manager.controllers.hosted`` last made
of the controller objects, read by the other parts of a term.

- ``views`` maps each valid controller's id to its view. It is replaced whole (``replace``),
  never changed in place, so a reader holding it holds one consistent set.
- ``loaded`` turns True once the controller objects have been read once (every kind
  watched, or known to have no CRD) and stays True.
- ``definitions()`` is what WELCOME and CONTROLLERS carry to workers.
- ``stalled`` maps each controller object that is selected but does not do its job to why:
  it cannot run (invalid, a resource missing) or runs while the API server refuses a list or
  watch it needs (403). Replaced whole, as ``views``; ``/readyz/controllers`` shows it.

State only: who must act on a change is told by ``manager.controllers.hosted``.
"""

from __future__ import annotations

from collections.abc import Mapping

from manager.controllers.view import ControllerId, ControllerView
from proto.wire import ControllerDef


class ControllerSet:
    def __init__(self) -> None:
        self.views: Mapping[ControllerId, ControllerView] = {}
        self.loaded = False
        self.stalled: Mapping[ControllerId, str] = {}

    def replace(self, views: Mapping[ControllerId, ControllerView]) -> None:
        self.views = views

    def get(self, ident: ControllerId) -> ControllerView | None:
        return self.views.get(ident)

    def definitions(self) -> tuple[ControllerDef, ...]:
        return tuple(view.definition for view in self.views.values())
