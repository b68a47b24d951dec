"""The DecoratorController kind on the workers: its steps of the sync template (``steps``),
its attachments and the labels and annotations it merges onto its targets."""

from __future__ import annotations

from proto.wire import ControllerDef, ControllerKind
from workers.kinds.decorator.steps import DecoratorSteps
from workers.sync.context import WorkerContext

KIND = ControllerKind.DECORATOR


def steps(definition: ControllerDef, context: WorkerContext) -> DecoratorSteps:
    return DecoratorSteps(definition, writer=context.writer)
