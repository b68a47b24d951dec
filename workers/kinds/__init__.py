"""The controller kinds the workers run, one package each, found by looking.

Every sub-package of ``workers.kinds`` is a kind: it exposes ``KIND`` (a
``proto.wire.ControllerKind``) and ``build(definition, context)``, which returns the
``Reconciler`` of one controller definition. ``registry()`` imports them all once and maps
each kind to its ``build``; adding a kind is adding its package, nothing else.

Kinds import ``workers.sync`` (what they share) and never each other (import-linter).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping

from proto.wire import ControllerDef, ControllerKind
from workers.reconcile import Reconciler
from workers.sync.context import WorkerContext

Build = Callable[[ControllerDef, WorkerContext], Reconciler]


@functools.cache
def registry() -> Mapping[ControllerKind, Build]:
    """Kind -> reconciler builder, from every sub-package of ``workers.kinds``."""
    found: dict[ControllerKind, Build] = {}
    for module in pkgutil.iter_modules(__path__, f"{__name__}."):
        if not module.ispkg:
            continue
        package = importlib.import_module(module.name)
        kind = package.KIND
        if kind in found:
            raise RuntimeError(f"two packages implement {kind.value}: {module.name}")
        found[kind] = package.build
    return found
