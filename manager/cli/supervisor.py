"""``metashard run``: the coordinator in this process plus N worker processes on this machine.

- Workers are started as ``python -m workers`` with ids ``<host>-w<i>`` (``worker_id``;
  stable across restarts, so a restarted worker gets its slots back), the coordinator's
  endpoint and the shared flags. A worker that exits on its own is restarted after a backoff
  (1 s doubling to 30 s, reset after a minute of uptime), except one that exits with
  ``EXIT_CONFIG`` (2): it cannot start for a configuration reason (it printed the line saying
  which), so ``run`` raises ``WorkerStartupError`` and the whole ``metashard run`` stops.
- Metrics: each worker serves ``/metrics`` on a Unix socket of its own (no port, no probe
  endpoint); the coordinator reads them and serves all on its ``--metrics-address``
  (``proto.runtime.ops``).
- ``started`` is set once every worker process has been started (its start-up may go on).
- Stopping sends SIGTERM to every worker (they finish running reconciles and say BYE), waits
  up to ``stop_timeout`` and kills what is left.
- A worker outlives no ``metashard run``, however it ends (SIGKILL, the OOM killer): on
  Linux each worker is started with ``PR_SET_PDEATHSIG`` set to SIGTERM between fork and
  exec, so the kernel sends it SIGTERM when the thread that started it (the event loop's)
  is gone, and it stops as on any SIGTERM. One whose parent died before the setting took
  effect exits at once. Elsewhere, workers of a killed run keep running.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from proto.runtime.logs import get_logger
from proto.runtime.startup import EXIT_CONFIG, StartupError

log = get_logger("metashard.supervisor")


class WorkerStartupError(StartupError):
    """A worker exited with ``EXIT_CONFIG``: restarting it would only loop."""


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    worker_id: str
    argv: tuple[str, ...]


def worker_id(index: int) -> str:
    return f"{socket.gethostname()}-w{index}"


def worker_spec(
    *, index: int, endpoint: str, metrics_socket: str | None, extra: Sequence[str]
) -> WorkerSpec:
    """The command line of worker ``index`` (``python -m workers ...``): metrics on the Unix
    socket ``metrics_socket`` (None: none), no probe endpoint."""
    wid = worker_id(index)
    metrics = f"unix:{metrics_socket}" if metrics_socket is not None else "0"
    argv = (sys.executable, "-m", "workers", "--coordinator", endpoint, "--id", wid)
    ops = ("--metrics-address", metrics, "--health-probe-bind-address", "0")
    return WorkerSpec(wid, (*argv, *ops, *extra))


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _stop_with_this_process() -> Callable[[], None] | None:
    """What a worker runs between fork and exec so that it gets SIGTERM when this process
    dies (Linux); None where there is no such thing."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # loaded now: not in the forked child
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it died before: nobody would send the signal
            os._exit(1)

    return arm


class Supervisor:
    def __init__(self, specs: Sequence[WorkerSpec], *, stop_timeout: float = 15.0) -> None:
        self._specs = list(specs)
        self._stop_timeout = stop_timeout
        self._preexec = _stop_with_this_process()
        self._procs: dict[str, asyncio.subprocess.Process] = {}
        self._stopping = False
        self.started = asyncio.Event()  # every worker process was started once

    async def run(self) -> None:
        """Keep every worker running until cancelled, or until one cannot start
        (``WorkerStartupError``); then stop them all."""
        try:
            await asyncio.gather(*(self._keep(spec) for spec in self._specs))
        finally:
            self._stopping = True
            await self._stop_all()

    async def _keep(self, spec: WorkerSpec) -> None:
        backoff = 1.0
        while True:
            started = time.monotonic()
            proc = await asyncio.create_subprocess_exec(*spec.argv, preexec_fn=self._preexec)
            self._procs[spec.worker_id] = proc
            log.info("worker process started", worker=spec.worker_id, pid=proc.pid)
            if len(self._procs) == len(self._specs):
                self.started.set()
            code = await proc.wait()
            if self._stopping:
                return
            if code == EXIT_CONFIG:
                raise WorkerStartupError(
                    f"worker {spec.worker_id} cannot start (exit code {code}; its error is above)"
                )
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
