"""``metashard run``: the coordinator in this process plus N worker processes on this machine.

- Workers are started as ``python -m workers`` with ids ``<host>-w<i>`` (stable across
  restarts, so a restarted worker gets its slots back), the coordinator's endpoint and the
  shared flags. A worker that exits on its own is restarted after a backoff (1 s doubling to
  30 s, reset after a minute of uptime).
- Metrics: the coordinator serves ``--metrics-address`` (default :9999); worker i serves the
  next port up (10000 + i by default), or nothing when metrics are disabled.
- Stopping sends SIGTERM to every worker (they finish running reconciles and say BYE), waits
  up to ``stop_timeout`` and kills what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from proto.logs import get_logger

log = get_logger("metashard.supervisor")


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    worker_id: str
    argv: tuple[str, ...]


def worker_spec(
    *, index: int, endpoint: str, metrics_port: int | None, extra: Sequence[str]
) -> WorkerSpec:
    """The command line of worker ``index`` (``python -m workers ...``)."""
    worker_id = f"{socket.gethostname()}-w{index}"
    metrics = f"127.0.0.1:{metrics_port}" if metrics_port is not None else "0"
    argv = (sys.executable, "-m", "workers", "--coordinator", endpoint, "--id", worker_id)
    return WorkerSpec(worker_id, (*argv, "--metrics-address", metrics, *extra))


class Supervisor:
    def __init__(self, specs: Sequence[WorkerSpec], *, stop_timeout: float = 15.0) -> None:
        self._specs = list(specs)
        self._stop_timeout = stop_timeout
        self._procs: dict[str, asyncio.subprocess.Process] = {}
        self._stopping = False

    async def run(self) -> None:
        """Keep every worker running until cancelled; then stop them all."""
        try:
            await asyncio.gather(*(self._keep(spec) for spec in self._specs))
        finally:
            self._stopping = True
            await self._stop_all()

    async def _keep(self, spec: WorkerSpec) -> None:
        backoff = 1.0
        while True:
            started = time.monotonic()
            proc = await asyncio.create_subprocess_exec(*spec.argv)
            self._procs[spec.worker_id] = proc
            log.info("worker process started", worker=spec.worker_id, pid=proc.pid)
            code = await proc.wait()
            if self._stopping:
                return
            if time.monotonic() - started > 60:
                backoff = 1.0
            log.warning(
                "worker process exited: restarting", worker=spec.worker_id, code=code, after=backoff
            )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    async def _stop_all(self) -> None:
        procs = [p for p in self._procs.values() if p.returncode is None]
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        if not procs:
            return
        _, pending = await asyncio.wait(
            [asyncio.ensure_future(p.wait()) for p in procs], timeout=self._stop_timeout
        )
        for proc in procs:
            if proc.returncode is None:
                log.warning("worker did not stop in time: killing it", pid=proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        if pending:
            await asyncio.wait(pending)
