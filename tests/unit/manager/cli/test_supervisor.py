from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadtest.dev.processes import exited
from manager.cli.supervisor import Supervisor, WorkerSpec, WorkerStartupError, worker_spec

ROOT = Path(__file__).resolve().parents[4]


def _spec(code: str) -> WorkerSpec:
    return WorkerSpec("w0", (sys.executable, "-c", code))


@pytest.mark.asyncio
async def test_a_worker_that_cannot_start_stops_the_supervisor() -> None:
    sleeper = WorkerSpec("w1", (sys.executable, "-c", "import time; time.sleep(60)"))
    supervisor = Supervisor([_spec("raise SystemExit(2)"), sleeper], stop_timeout=5)
    with pytest.raises(WorkerStartupError, match="worker w0 cannot start"):
        await asyncio.wait_for(supervisor.run(), 20)


@pytest.mark.asyncio
async def test_a_worker_that_crashes_otherwise_is_restarted(tmp_path: Path) -> None:
    marker = f"{tmp_path}/starts"
    code = f"open({marker!r}, 'a').write('x'); raise SystemExit(1)"
    task = asyncio.create_task(Supervisor([_spec(code)]).run())
    await asyncio.sleep(2.5)  # first start, then a restart after the 1 s backoff
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    with open(marker) as f:  # noqa: ASYNC230 - a test reading its own small file
        assert len(f.read()) >= 2


@pytest.mark.asyncio
async def test_started_is_set_once_every_worker_process_runs() -> None:
    sleep = "import time; time.sleep(60)"
    specs = [WorkerSpec(f"w{i}", (sys.executable, "-c", sleep)) for i in range(2)]
    supervisor = Supervisor(specs, stop_timeout=5)
    assert not supervisor.started.is_set()
    task = asyncio.create_task(supervisor.run())
    await asyncio.wait_for(supervisor.started.wait(), 10)
    assert not task.done()  # they run on: started says only that both were started
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def test_worker_command_line_serves_metrics_on_a_unix_socket_only() -> None:
    spec = worker_spec(
        index=1,
        endpoint="ipc:///d/link.sock",
        metrics_socket="/d/w1.sock",
        extra=["--concurrency", "4"],
    )
    argv = " ".join(spec.argv)
    assert spec.worker_id.endswith("-w1")
    assert "--metrics-address unix:/d/w1.sock --health-probe-bind-address 0" in argv
    assert argv.endswith("--concurrency 4")
    off = worker_spec(index=0, endpoint="ipc:///d/l", metrics_socket=None, extra=[])
    assert "--metrics-address 0" in " ".join(off.argv)


_PARENT = """
import sys, uvloop
from loadtest.dev.processes import exited
from manager.cli.supervisor import Supervisor, WorkerSpec
code = '''
import os, signal, sys, time
def stop(*_):
    open(sys.argv[1], "a").write("SIGTERM")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[1], "w").write(f"{os.getpid()} ")
time.sleep(60)
'''
uvloop.run(Supervisor([WorkerSpec("w0", (sys.executable, "-c", code, sys.argv[1]))]).run())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_is_stopped_when_its_supervisor_is_killed(tmp_path: Path) -> None:
    """SIGKILL leaves the supervisor no moment to stop its workers: the kernel sends them
    SIGTERM instead."""
    said = tmp_path / "worker"
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(said)], cwd=ROOT)
    pid = 0
    try:
        deadline = time.monotonic() + 30
        while not said.exists() or not said.read_text().endswith(" "):
            assert time.monotonic() < deadline and parent.poll() is None
            time.sleep(0.05)
        pid = int(said.read_text())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while not exited(pid):
            assert time.monotonic() < deadline, "the worker outlived its supervisor"
            time.sleep(0.05)
        assert said.read_text() == f"{pid} SIGTERM"
    finally:
        parent.kill()
        parent.wait()
        if pid and not exited(pid):
            os.kill(pid, signal.SIGKILL)
