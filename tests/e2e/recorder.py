"""A reconciler for end-to-end tests of the runtime: it records every reconcile and writes
nothing to the cluster.

Worker processes load it with ``--reconciler tests.e2e.recorder:factory``. Each reconcile
appends two JSON lines to ``$METASHARD_RECORD`` (``start`` and ``end``, with the worker id,
the key, the parent's resourceVersion and wall-clock time), holding the key for
``$METASHARD_RECORD_HOLD`` seconds in between so overlaps would show.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import orjson

from proto.wire import ControllerDef
from workers.kinds.plugins import WorkerContext
from workers.reconcile import Outcome, ReconcileRequest, ReconcilerFactory


class Recorder:
    def __init__(self, worker_id: str, path: str, hold: float) -> None:
        self._worker_id = worker_id
        self._path = path
        self._hold = hold

    def _write(self, event: str, request: ReconcileRequest, **extra: Any) -> None:
        key = request.key
        line = {
            "event": event,
            "worker": self._worker_id,
            "pid": os.getpid(),
            "key": f"{key.namespace}/{key.name}",
            "t": time.time(),
            **extra,
        }
        with open(self._path, "ab") as f:
            f.write(orjson.dumps(line) + b"\n")

    async def reconcile(self, request: ReconcileRequest) -> Outcome:
        parent = request.snapshot.parent
        rv = orjson.loads(parent)["metadata"]["resourceVersion"] if parent else None
        self._write("start", request, rv=rv)
        try:
            await asyncio.sleep(self._hold)
        finally:
            self._write("end", request, rv=rv)
        return Outcome()


def factory(context: WorkerContext) -> ReconcilerFactory:
    path = os.environ["METASHARD_RECORD"]
    hold = float(os.environ.get("METASHARD_RECORD_HOLD", "0.05"))

    def build(_: ControllerDef) -> Recorder:
        return Recorder(context.worker_id, path, hold)

    return build
