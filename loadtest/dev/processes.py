"""Real metashard processes on this machine: coordinators and workers as subprocesses.

Used by the end-to-end tests, the benchmarks and the demo. ``Processes`` starts each role
with the same command line ``metashard coordinator`` / ``metashard worker`` / ``metashard
run`` runs (as ``python -m``), a free port each for metrics and probes, logs in a work
directory, and stops (SIGTERM) or kills (SIGKILL) them; ``Proc.metric`` reads one sample
of a process's ``/metrics``; ``children`` and ``exited`` follow a process tree in
``/proc`` (Linux).
``HEARTBEAT``/``WORKER_TIMEOUT`` are short timings for tests; ``Processes(fast=False)``
keeps the production defaults.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[2]
HEARTBEAT = 0.2
WORKER_TIMEOUT = 1.2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def exited(pid: int) -> bool:
    """Process ``pid`` has exited: it is gone, or a zombie nobody reaped yet (Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (Linux)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[1] == str(pid) and fields[0] != "Z":
                found.append(int(entry.name))
    return found


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
    fast: bool = True  # short heartbeat, worker and lease timings (tests)
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
                "--health-probe-bind-address",
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
        # A loopback port without keys: every account on this host could join. Fine for
        # tests and benchmarks on a machine of one's own, hence the explicit opt-out.
        argv = ["manager.cli", "coordinator", "--bind", self.endpoint, "--insecure-worker-link"]
        if self.fast:
            argv += ["--heartbeat-interval", f"{HEARTBEAT}s", "--worker-timeout"]
            argv += [f"{WORKER_TIMEOUT}s", "--discovery-interval", "1s"]
        if leader_election:
            argv += ["--leader-election", "--leader-election-id", f"ms-{self.endpoint[-5:]}"]
            if self.fast:
                argv += ["--leader-election-lease-duration", "3s"]
                argv += ["--leader-election-renew-deadline", "2s"]
                argv += ["--leader-election-retry-period", "0.4s"]
        return self._start(name, argv + (extra or []))

    def run(self, processes: int = 2, *, extra: list[str] | None = None) -> Proc:
        """``metashard run --processes N``: a coordinator and N local workers, one process
        tree (its metrics port serves them all)."""
        argv = ["manager.cli", "run", "--processes", str(processes)]
        if self.fast:
            argv += ["--heartbeat-interval", f"{HEARTBEAT}s", "--worker-timeout"]
            argv += [f"{WORKER_TIMEOUT}s", "--discovery-interval", "1s"]
        return self._start("run", argv + (extra or []))

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
