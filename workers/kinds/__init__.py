"""The controller kinds the workers run: plug-ins, one package each.

A kind package exposes two names, and nothing else is asked of it:

- ``KIND``: the name of the kind it implements, as ``ControllerDef.kind`` carries it (for the
  kinds the coordinator sends, a ``proto.wire.ControllerKind``: ``CompositeController``,
  ``DecoratorController``; the registry is keyed by the name, so a kind the wire does not
  list yet can be plugged in and tested);
- ``steps(definition, context)``: what one controller definition of that kind supplies to the
  sync template (``workers.sync.template.KindSteps``), built from the worker's
  ``WorkerContext``.

``registry(*packages)`` maps each kind's name to its ``steps``: every sub-package of
``workers.kinds``, found by looking and imported once, then the ``packages`` given (kinds
defined elsewhere: a test's). Two packages of one kind are refused. Adding a kind to the
workers is adding its package here, nothing else; ``workers.kinds.plugins`` turns a registry
into reconcilers.

Kinds import ``workers.sync`` (what they share) and never each other (import-linter, over every
module of ``workers.kinds``).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from proto.wire import ControllerDef
from workers.sync.context import WorkerContext
from workers.sync.template import KindSteps

Steps = Callable[[ControllerDef, WorkerContext], KindSteps[Any, Any]]
"""A kind package's ``steps``."""


def registry(*packages: ModuleType) -> Mapping[str, Steps]:
    """Kind -> its steps: the packages of ``workers.kinds``, then ``packages``."""
    found = dict(_found())
    for package in packages:
        _add(found, package)
    return found


@functools.cache
def _found() -> Mapping[str, Steps]:
    found: dict[str, Steps] = {}
    for module in pkgutil.iter_modules(__path__, f"{__name__}."):
        if module.ispkg:
            _add(found, importlib.import_module(module.name))
    return found


def _add(found: dict[str, Steps], package: ModuleType) -> None:
    kind = str(package.KIND)
    if kind in found:
        raise RuntimeError(f"two packages implement {kind}: {package.__name__}")
    found[kind] = package.steps
