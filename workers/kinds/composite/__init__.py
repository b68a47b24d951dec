"""The CompositeController kind on the workers: its reconciler, rolling updates (planner and
I/O) and the ControllerRevisions it writes."""

from __future__ import annotations

from proto.wire import ControllerDef, ControllerKind
from workers.kinds.composite.reconciler import CompositeReconciler
from workers.reconcile import Reconciler
from workers.sync.context import WorkerContext

KIND = ControllerKind.COMPOSITE


def build(definition: ControllerDef, context: WorkerContext) -> Reconciler:
    return CompositeReconciler(
        definition,
        writer=context.writer,
        hooks=context.hooks,
        events=context.events,
        cluster_revision_namespace=context.cluster_revision_namespace,
        revision_history_limit=context.revision_history_limit,
        ssa=context.ssa,
    )
