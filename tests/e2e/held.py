"""The built-in reconcilers, each holding its key a while after its snapshot came.

Worker processes load it with ``--reconciler tests.e2e.held:factory``: every reconcile waits
``$METASHARD_HOLD`` seconds (default 0.5) once it has its snapshot, then syncs as the built-in
reconciler does, as a slow claim phase would. The chaos test that shows a broken fence is
caught uses it: a worker stopped meanwhile resumes with snapshots in hand, and its fence alone
decides whether it then calls the hook for parents that were given to another worker.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from proto.wire import ControllerDef
from workers.kinds.plugins import WorkerContext, builtin
from workers.reconcile import Outcome, Reconciler, ReconcileRequest, ReconcilerFactory


@dataclass(frozen=True, slots=True)
class Held:
    inner: Reconciler
    hold: float

    async def reconcile(self, request: ReconcileRequest) -> Outcome:
        await asyncio.sleep(self.hold)
        return await self.inner.reconcile(request)


def factory(context: WorkerContext) -> ReconcilerFactory:
    inner = builtin(context)
    hold = float(os.environ.get("METASHARD_HOLD", "0.5"))

    def build(definition: ControllerDef) -> Held:
        return Held(inner(definition), hold)

    return build
