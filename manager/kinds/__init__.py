"""The controller kinds the coordinator hosts, one module (or package) each, found by looking.

Every module of ``manager.kinds`` is a kind: it exposes ``KIND``, a ``Kind``. ``registry()``
imports them all once; adding a kind is adding its module, nothing else.

A ``Kind`` says which objects define its controllers (``resource``, the plural of its
``metacontroller.k8s.io`` CRD) and turns one such object into a ``manager.controllers.view.
ControllerView`` (``view``), resolving its resources through discovery, or raises
``manager.controllers.view.Unusable`` saying why it cannot run. ``view`` gets a ``Context``:
discovery, and the coordinator's settings, of which each kind reads what it needs. ``needs``
says what RBAC one of its controller objects needs (``manager.controllers.rbac``).

Kinds import what the coordinator shares with every kind (``manager.controllers.view``,
``manager.controllers.rbac``, ``manager.informers.store``, ``manager.settings``) and never
each other; no module outside
``manager.kinds`` imports a kind (import-linter, over ``manager.kinds.*``, so a new kind is
covered without naming it).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from manager.controllers.view import ControllerView
from manager.informers.store import Cached
from manager.settings import CoordinatorSettings
from proto.api.fields import Fields
from proto.kube.resources import Discovery
from proto.wire import ControllerKind

if TYPE_CHECKING:  # manager.controllers.rbac imports this module to find the kinds
    from manager.controllers.rbac import Needs, Resolve


@dataclass(frozen=True, slots=True)
class Context:
    """What a kind may use to build a view."""

    discovery: Discovery
    """Resolves the resources a controller object names."""
    settings: CoordinatorSettings
    """The coordinator's settings; each kind reads what it needs."""


class Kind(Protocol):
    @property
    def kind(self) -> ControllerKind: ...
    @property
    def resource(self) -> str:
        """The plural of the kind's CRD in ``metacontroller.k8s.io`` (``compositecontrollers``)."""
        ...

    async def view(self, obj: dict[str, Any], cached: Cached, context: Context) -> ControllerView:
        """The view of controller object ``obj`` (``cached``: as the informer keeps it);
        raises ``Unusable``."""
        ...

    def needs(self, spec: Fields, obj: Mapping[str, Any], resolve: Resolve) -> Needs:
        """What controller object ``obj`` (its ``spec``) needs for the RBAC rules; raises
        ``InvalidControllerError`` (or ``RbacError`` from ``resolve``) naming the field."""
        ...


@functools.cache
def registry() -> tuple[Kind, ...]:
    """Every kind in ``manager.kinds``, in module name order."""
    found: list[Kind] = []
    for module in sorted(pkgutil.iter_modules(__path__, f"{__name__}."), key=lambda m: m.name):
        found.append(importlib.import_module(module.name).KIND)
    kinds = [k.kind for k in found]
    if len(set(kinds)) != len(kinds):
        raise RuntimeError(f"two modules implement the same kind: {kinds}")
    return tuple(found)
