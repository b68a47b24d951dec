"""The CompositeController kind on the workers: its steps of the sync template (``steps``),
rolling updates (planner and I/O) and the ControllerRevisions it writes."""

from __future__ import annotations

from proto.wire import ControllerDef, ControllerKind
from workers.kinds.composite.steps import CompositeSteps
from workers.sync.context import WorkerContext

KIND = ControllerKind.COMPOSITE


def steps(definition: ControllerDef, context: WorkerContext) -> CompositeSteps:
    return CompositeSteps(
        definition,
        writer=context.writer,
        events=context.events,
        cluster_revision_namespace=context.cluster_revision_namespace,
        revision_history_limit=context.revision_history_limit,
        server_side=context.ssa is not None,
    )
