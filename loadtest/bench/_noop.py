"""A reconciler that does nothing, for measuring the runtime itself.

``metashard worker --reconciler loadtest.bench._noop:factory`` runs it: every reconcile fetches the
snapshot (that is the runtime's part) and returns at once.
"""

from __future__ import annotations

from proto.wire import ControllerDef
from workers.kinds.plugins import WorkerContext
from workers.reconcile import Outcome, ReconcileRequest, ReconcilerFactory


class Noop:
    async def reconcile(self, request: ReconcileRequest) -> Outcome:
        return Outcome()


def factory(context: WorkerContext) -> ReconcilerFactory:
    def build(_: ControllerDef) -> Noop:
        return Noop()

    return build
