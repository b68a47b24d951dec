"""The DecoratorController kind on the workers: its reconciler."""

from __future__ import annotations

from proto.wire import ControllerDef, ControllerKind
from workers.kinds.decorator.reconciler import DecoratorReconciler
from workers.reconcile import Reconciler
from workers.sync.context import WorkerContext

KIND = ControllerKind.DECORATOR


def build(definition: ControllerDef, context: WorkerContext) -> Reconciler:
    return DecoratorReconciler(
        definition,
        writer=context.writer,
        hooks=context.hooks,
        events=context.events,
        ssa=context.ssa,
    )
