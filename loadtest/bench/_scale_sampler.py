"""One phase's view of a controller's processes over time: progress, CPU and memory per role.

- ``start()`` at the phase's t0 (before any process is spawned, for a cold start);
  ``attach(pid)`` names the process tree to measure (``_proc.RoleCpu``: ``worker ID`` for
  metashard's workers, ``root_role`` for the root: ``coordinator`` for metashard,
  ``controller`` for another controller, ``client`` for the raw one). Attaching takes the
  tree's CPU then as the phase's zero and restarts every process's peak RSS
  (``_proc.reset_peak``), so a long-lived process reports this phase's peak, not its life's.
- Every ``interval`` seconds it records the time since t0, ``progress()`` (parents converged,
  hook calls: what the phase counts) and each role's RSS; ``stop()`` takes a last sample.
- ``result()``: CPU seconds per role since ``attach`` (from ``/proc``, each process read
  itself), the peak RSS per role (the larger of ``VmHWM`` and the samples; a process that is
  gone keeps its last), the last RSS per role, and the series for the plots. Two processes of
  one role (a restarted worker) add up for CPU; for memory the larger counts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from loadtest.bench._proc import COORDINATOR, RoleCpu, Sample, memory, per_role, reset_peak

Progress = Callable[[], Awaitable[int]]
Clock = Callable[[], float]


class Sampler:
    def __init__(
        self, *, progress: Progress, root_role: str, interval: float, clock: Clock
    ) -> None:
        self._progress = progress
        self._root_role = root_role
        self._interval = interval
        self._clock = clock
        self._t0 = 0.0
        self._tree: RoleCpu | None = None
        self._cpu0: Sample = {}
        self._cpu: Sample = {}
        self._peak: dict[int, int] = {}  # pid -> bytes
        self._reset = True
        self.t: list[float] = []
        self.progress: list[int] = []
        self.rss: dict[str, list[int | None]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self, t0: float | None = None) -> None:
        self._t0 = self._clock() if t0 is None else t0
        self._task = asyncio.create_task(self._loop())

    def attach(self, pid: int) -> None:
        self._tree = RoleCpu(pid)
        self._cpu0 = self._tree.sample()
        self._cpu = dict(self._cpu0)
        self._peak = {}
        for each in self._cpu0:
            self._reset = reset_peak(each) and self._reset

    def _role(self, role: str) -> str:
        return self._root_role if role == COORDINATOR else role

    async def sample(self) -> None:
        progress = await self._progress()
        now = self._clock() - self._t0
        rss: dict[str, int] = {}
        if self._tree is not None:
            self._cpu = self._tree.sample()
            for pid, (role, _) in self._cpu.items():
                mem = memory(pid)
                if mem is None:
                    continue
                self._peak[pid] = max(self._peak.get(pid, 0), mem.peak, mem.rss)
                name = self._role(role)
                rss[name] = max(rss.get(name, 0), mem.rss)
        index = len(self.t)
        self.t.append(round(now, 3))
        self.progress.append(progress)
        for name in rss.keys() - self.rss.keys():
            self.rss[name] = [None] * index
        for name, series in self.rss.items():
            series.append(rss.get(name))

    async def _loop(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(self._interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.sample()

    def result(self) -> dict[str, Any]:
        """CPU, peak and last RSS per role, and the series (see the module docstring)."""
        cpu = {self._role(role): s for role, s in per_role(self._cpu0, self._cpu).items()}
        peak: dict[str, int] = {}
        for pid, (role, _) in self._cpu.items():
            name = self._role(role)
            peak[name] = max(peak.get(name, 0), self._peak.get(pid, 0))
        last = {
            name: next((v for v in reversed(s) if v is not None), 0) for name, s in self.rss.items()
        }
        return {
            "cpu_processes": cpu,
            "peak_rss": peak,
            "rss": last,
            "peak_rss_since_phase": self._reset,
            "series": {"t": self.t, "progress": self.progress, "rss": self.rss},
        }
