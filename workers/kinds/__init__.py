"""The controller kinds the workers run, one package each, found by looking.

Every sub-package of ``workers.kinds`` is a kind: it exposes ``KIND`` (a
``proto.wire.ControllerKind``) and ``steps(definition, context)``, which returns what one
controller definition supplies to the sync template (``workers.sync.template.KindSteps``).
``registry()`` imports them all once and maps each kind to its ``steps``; adding a kind is
adding its package, nothing else.

Kinds import ``workers.sync`` (what they share) and never each other (import-linter).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from typing import Any

from proto.wire import ControllerDef, ControllerKind
from workers.sync.context import WorkerContext
from workers.sync.template import KindSteps

Steps = Callable[[ControllerDef, WorkerContext], KindSteps[Any, Any]]


@functools.cache
def registry() -> Mapping[ControllerKind, Steps]:
    """Kind -> its steps, from every sub-package of ``workers.kinds``."""
    found: dict[ControllerKind, Steps] = {}
    for module in pkgutil.iter_modules(__path__, f"{__name__}."):
        if not module.ispkg:
            continue
        package = importlib.import_module(module.name)
        kind = package.KIND
        if kind in found:
            raise RuntimeError(f"two packages implement {kind.value}: {module.name}")
        found[kind] = package.steps
    return found
