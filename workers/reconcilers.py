"""Which reconciler runs each kind of controller, and how to replace them.

``builtin(context)`` maps controller kinds to metashard's own reconcilers: CompositeControllers
run ``workers.composite.CompositeReconciler``; other kinds raise ``UnsupportedController``.
``load(spec)`` imports a ``MODULE:CALLABLE`` given with ``--reconciler``; the callable receives
the same ``WorkerContext`` and returns a ``ReconcilerFactory`` (the test suite uses this to
record reconciles; it is also the way to run a custom reconciler under metashard's runtime).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from proto.hooks.client import HookClient
from proto.http1 import HttpClient
from proto.kube.client import Client
from proto.kube.events import EventRecorder
from proto.wire import ControllerDef, ControllerKind
from workers.composite import CompositeReconciler
from workers.reconciler import Reconciler, ReconcilerFactory
from workers.writer import Writer


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What a reconciler may use: the worker's identity, API client (writes go through
    ``writer``), HTTP client, metrics, the webhook client (hook metrics on ``registry``; its
    calls, like the writes, are refused once the worker is out of contact with the
    coordinator) and the event recorder (component ``metacontroller``), all shared by every
    controller of the process."""

    worker_id: str
    client: Client  # reads
    writer: Writer  # writes: refused while the worker is out of contact (workers.fencing)
    http: HttpClient
    registry: CollectorRegistry
    hooks: HookClient
    events: EventRecorder


FactoryBuilder = Callable[[WorkerContext], ReconcilerFactory]


class UnsupportedController(Exception):
    """No reconciler is available for this kind of controller."""


def builtin(context: WorkerContext) -> ReconcilerFactory:
    def factory(definition: ControllerDef) -> Reconciler:
        if definition.kind == ControllerKind.COMPOSITE:
            return CompositeReconciler(
                definition, writer=context.writer, hooks=context.hooks, events=context.events
            )
        raise UnsupportedController(f"no built-in reconciler for {definition.kind.value}")

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
