"""Where each controller's reconciler comes from: the seam between the worker runtime and the
controller kinds.

The runner asks its ``ReconcilerFactory`` for the reconciler of every controller definition
the coordinator sends, and again when a definition changes (``workers.reconcile``: the
contract a reconciler keeps). A ``FactoryBuilder`` makes that factory once per process, from
the ``WorkerContext`` the composition root builds (``workers.worker``):

- ``builtin``: metashard's own kinds. The reconciler of a definition is the sync template
  (``workers.sync.template.SyncTemplate``) with the steps of its kind's package
  (``workers.kinds.registry``); a kind no package implements raises ``UnsupportedController``
  (the runner logs it and runs that controller nowhere).
- ``Reconcilers(context, kinds)``: the same over any registry, such as
  ``registry(package)``: the built-in kinds and a kind package of one's own (a test's).
- ``load(spec)``: the builder a ``--reconciler MODULE:CALLABLE`` names, given the same
  ``WorkerContext``. The test suite records reconciles this way; it is also how to run a
  custom reconciler, or a kind of one's own, under metashard's runtime.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from proto.wire import ControllerDef
from workers.kinds import Steps, registry
from workers.reconcile import Reconciler, ReconcilerFactory
from workers.sync.context import WorkerContext
from workers.sync.template import SyncTemplate

__all__ = [
    "FactoryBuilder",
    "Reconcilers",
    "UnsupportedController",
    "WorkerContext",
    "builtin",
    "load",
]


FactoryBuilder = Callable[[WorkerContext], ReconcilerFactory]


class UnsupportedController(Exception):
    """No reconciler is available for this kind of controller."""


@dataclass(frozen=True, slots=True)
class Reconcilers:
    """The ``ReconcilerFactory`` of the kinds in ``kinds``: the sync template with the steps
    of a definition's kind, on the context's writer, hook client, events and apply strategy."""

    context: WorkerContext
    kinds: Mapping[str, Steps]

    def __call__(self, definition: ControllerDef) -> Reconciler:
        steps = self.kinds.get(definition.kind)
        if steps is None:
            raise UnsupportedController(f"no built-in reconciler for {definition.kind}")
        context = self.context
        return SyncTemplate(
            definition,
            steps(definition, context),
            writer=context.writer,
            hooks=context.hooks,
            events=context.events,
            ssa=context.ssa,
        )


def builtin(context: WorkerContext) -> ReconcilerFactory:
    """The reconcilers of the kinds under ``workers.kinds``."""
    return Reconcilers(context, registry())


def load(spec: str) -> FactoryBuilder:
    """Import ``MODULE:CALLABLE``. Raises ``ValueError`` with a clear message."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--reconciler {spec!r}: expected MODULE:CALLABLE")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"--reconciler {spec!r}: cannot import {module_name}: {e}") from e
    builder = getattr(module, attr, None)
    if not callable(builder):
        raise ValueError(f"--reconciler {spec!r}: {module_name} has no callable {attr!r}")
    return builder  # type: ignore[no-any-return]
