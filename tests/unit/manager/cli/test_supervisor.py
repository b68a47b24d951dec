from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from manager.cli.supervisor import Supervisor, WorkerSpec, WorkerStartupError, worker_spec


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
