"""Which reconciler runs each kind of controller, and how to replace them.

``builtin(context)`` maps controller kinds to metashard's own reconcilers: the sync template
(``workers.sync.template.SyncTemplate``) with the steps of the kind's package under
``workers.kinds`` (``workers.kinds.registry``); a kind no package implements raises
``UnsupportedController``.
``load(spec)`` imports a ``MODULE:CALLABLE`` given with ``--reconciler``; the callable receives
the same ``WorkerContext`` and returns a ``ReconcilerFactory`` (the test suite uses this to
record reconciles; it is also the way to run a custom reconciler under metashard's runtime).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from proto.wire import ControllerDef
from workers.kinds import registry
from workers.reconcile import Reconciler, ReconcilerFactory
from workers.sync.context import WorkerContext
from workers.sync.template import SyncTemplate

__all__ = ["FactoryBuilder", "UnsupportedController", "WorkerContext", "builtin", "load"]


FactoryBuilder = Callable[[WorkerContext], ReconcilerFactory]


class UnsupportedController(Exception):
    """No reconciler is available for this kind of controller."""


def builtin(context: WorkerContext) -> ReconcilerFactory:
    kinds = registry()

    def factory(definition: ControllerDef) -> Reconciler:
        steps = kinds.get(definition.kind)
        if steps is None:
            raise UnsupportedController(f"no built-in reconciler for {definition.kind.value}")
        return SyncTemplate(
            definition,
            steps(definition, context),
            writer=context.writer,
            hooks=context.hooks,
            events=context.events,
            ssa=context.ssa,
        )

    return factory


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
