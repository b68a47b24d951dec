"""Real metashard processes against a cluster, for end-to-end tests.

- ``Processes`` starts coordinators and workers as ``python -m`` subprocesses (the same
  command lines ``metashard coordinator`` / ``metashard worker`` run), with short test timings,
  logs in the test's directory, a free metrics port each, and stops or kills them.
- ``Recording`` reads what ``tests.e2e.recorder`` wrote: reconcile intervals per key.
- ``eventually`` polls an async condition until it holds.
The cluster is the embedded one (a subprocess) or, given ``METASHARD_E2E_KUBECONFIG``, a real
one: nothing here depends on which.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

REPO = Path(__file__).resolve().parents[2]
HEARTBEAT = 0.2
WORKER_TIMEOUT = 1.2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    metrics_port: int
    log: Path

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    async def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """One sample of the process's /metrics (None if absent or unreachable)."""
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{self.metrics_port}/metrics") as resp,
            ):
                text = await resp.text()
        except aiohttp.ClientError:
            return None
        want = labels or {}
        for line in text.splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            head, _, value = line.rpartition(" ")
            metric, _, rest = head.partition("{")
            if metric != name:
                continue
            found = dict(part.split("=", 1) for part in rest.rstrip("}").split(",") if "=" in part)
            if all(found.get(k, "").strip('"') == v for k, v in want.items()):
                return float(value)
        return None

    async def ready(self) -> bool:
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{self.metrics_port}/readyz") as resp,
            ):
                return resp.status == 200
        except aiohttp.ClientError:
            return False


@dataclass
class Processes:
    kubeconfig: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)
    endpoint: str = ""

    def __post_init__(self) -> None:
        self.endpoint = f"tcp://127.0.0.1:{free_port()}"

    def _start(self, name: str, argv: list[str]) -> Proc:
        port = free_port()
        log = self.workdir / f"{name}.log"
        env = {**os.environ, **self.env, "PYTHONPATH": str(REPO)}
        popen = subprocess.Popen(
            [
                sys.executable,
                "-m",
                *argv,
                "--metrics-address",
                f"127.0.0.1:{port}",
                "--kubeconfig",
                self.kubeconfig,
                "--log-format",
                "json",
            ],
            cwd=REPO,
            env=env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proc = Proc(name, popen, port, log)
        self.procs.append(proc)
        return proc

    def coordinator(
        self,
        name: str = "coordinator",
        *,
        leader_election: bool = False,
        extra: list[str] | None = None,
    ) -> Proc:
        argv = [
            "manager.cli",
            "coordinator",
            "--bind",
            self.endpoint,
            "--heartbeat-interval",
            f"{HEARTBEAT}s",
            "--worker-timeout",
            f"{WORKER_TIMEOUT}s",
            "--discovery-interval",
            "1s",
        ]
        if leader_election:
            argv += [
                "--leader-election",
                "--leader-election-id",
                f"e2e-{self.endpoint[-5:]}",
                "--leader-election-lease-duration",
                "3s",
                "--leader-election-renew-deadline",
                "2s",
                "--leader-election-retry-period",
                "0.4s",
            ]
        return self._start(name, argv + (extra or []))

    def worker(
        self,
        worker_id: str,
        *,
        concurrency: int = 4,
        reconciler: str | None = None,
        extra: list[str] | None = None,
    ) -> Proc:
        argv = [
            "workers",
            "--coordinator",
            self.endpoint,
            "--id",
            worker_id,
            "--concurrency",
            str(concurrency),
        ]
        if reconciler:
            argv += ["--reconciler", reconciler]
        return self._start(f"worker-{worker_id}", argv + (extra or []))

    @staticmethod
    def stop(proc: Proc, timeout: float = 15.0) -> int:
        """SIGTERM and wait: a graceful stop."""
        if proc.alive:
            proc.popen.send_signal(signal.SIGTERM)
        return proc.popen.wait(timeout)

    @staticmethod
    def kill(proc: Proc) -> None:
        """SIGKILL: a crash."""
        if proc.alive:
            proc.popen.kill()
        proc.popen.wait(10)

    def close(self) -> None:
        for proc in self.procs:
            if proc.alive:
                proc.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(max(0.1, deadline - time.monotonic()))
            if proc.alive:
                proc.popen.kill()
                proc.popen.wait(5)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name} (exit {p.popen.poll()})\n{p.log.read_text(errors='replace')[-6000:]}"
            for p in self.procs
        )


@dataclass(frozen=True, slots=True)
class Interval:
    key: str
    worker: str
    pid: int
    start: float
    end: float | None
    rv: str | None


class Recording:
    """The reconciles ``tests.e2e.recorder`` wrote to ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [orjson.loads(line) for line in self.path.read_bytes().splitlines() if line]

    def intervals(self) -> list[Interval]:
        open_: dict[tuple[int, str], dict[str, Any]] = {}
        out: list[Interval] = []
        for row in self.rows():
            ident = (row["pid"], row["key"])
            if row["event"] == "start":
                open_[ident] = row
            else:
                start = open_.pop(ident)
                out.append(
                    Interval(
                        row["key"], row["worker"], row["pid"], start["t"], row["t"], start["rv"]
                    )
                )
        # A process killed mid-reconcile never wrote "end": it ran until it died.
        out.extend(
            Interval(r["key"], r["worker"], r["pid"], r["t"], None, r["rv"]) for r in open_.values()
        )
        return out

    def overlaps(self, died_at: dict[int, float] | None = None) -> list[tuple[Interval, Interval]]:
        """Pairs of reconciles of one key, by different processes, at overlapping times."""
        ends = died_at or {}
        by_key: dict[str, list[Interval]] = {}
        for iv in self.intervals():
            by_key.setdefault(iv.key, []).append(iv)
        found = []
        for ivs in by_key.values():
            ivs.sort(key=lambda i: i.start)
            for i, a in enumerate(ivs):
                a_end = a.end if a.end is not None else ends.get(a.pid, float("inf"))
                for b in ivs[i + 1 :]:
                    if b.start >= a_end:
                        break
                    if b.pid != a.pid:
                        found.append((a, b))
        return found

    def last_rv(self) -> dict[str, int]:
        """The highest parent resourceVersion each key was reconciled at (completed runs)."""
        best: dict[str, int] = {}
        for iv in self.intervals():
            if iv.end is not None and iv.rv is not None:
                best[iv.key] = max(best.get(iv.key, 0), int(iv.rv))
        return best


async def eventually(
    condition: Callable[[], Awaitable[bool]],
    *,
    within: float = 30.0,
    interval: float = 0.1,
    message: str | Callable[[], str] = "condition not met",
) -> None:
    deadline = time.monotonic() + within
    while True:
        if await condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(message() if callable(message) else message)
        await asyncio.sleep(interval)
