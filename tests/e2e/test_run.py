"""``metashard run`` and the coordinator as real processes: configuration failures stop them
with one line and exit code 2 (never a crash loop), a clean exit leaves no socket file, an
unreachable API server keeps the coordinator unready, and the coordinator's metrics endpoint
serves the workers' metrics too."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from loadtest.dev.processes import REPO, Processes
from tests.e2e.harness import eventually, with_own_tmpdir

pytestmark = pytest.mark.e2e


def metashard(*argv: str, env: dict[str, str] | None = None, timeout: float = 45) -> str:
    """Run ``metashard ARGV...``; expect exit code 2; return what it printed."""
    out = subprocess.run(
        [sys.executable, "-m", "manager.cli", *argv],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "Traceback" not in text, text
    return text


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--concurrency", "0"], "--concurrency/--workers: must be at least 1"),
        (["--processes", "0"], "--processes: must be at least 1"),
        (["--metrics-address", ":99999"], "port from 0 to 65535"),
        (["--log-level", "loud"], "unknown log level 'loud'"),
        (["--reconciler", "no_such_module:factory"], "no module named 'no_such_module'"),
        (["--bind", "tcp://127.0.0.1:BUSY"], "--bind tcp://127.0.0.1:BUSY: Address already in use"),
        (
            ["--metrics-address", "127.0.0.1:BUSY"],
            "--metrics-address 127.0.0.1:BUSY: cannot listen",
        ),
        (["--health-probe-bind-address", "127.0.0.1:BUSY"], "cannot listen"),
        # Only the worker can tell: the module exists, the callable does not.
        (
            ["--reconciler", "tests.e2e.recorder:no_such_factory"],
            "has no callable 'no_such_factory'",
        ),
    ],
)
def test_run_stops_on_a_bad_configuration_with_one_line(
    cluster: str, busy_port: int, flags: list[str], says: str
) -> None:
    ports = ["--metrics-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"]
    flags = [f.replace("BUSY", str(busy_port)) for f in flags]
    started = time.monotonic()
    text = metashard("run", "--kubeconfig", cluster, "--log-format", "json", *ports, *flags)
    assert says.replace("BUSY", str(busy_port)) in text
    assert time.monotonic() - started < 30  # stopped, not restarting workers forever
    if "no_such_factory" in says:  # the worker's line, then the run's
        assert "metashard worker: error:" in text and "metashard run: error: worker" in text
    else:
        assert "worker process started" not in text  # refused before anything started


def test_a_clean_exit_leaves_no_socket_file(cluster: str, tmp_path: Path) -> None:
    procs, tmp = with_own_tmpdir(cluster, tmp_path)
    try:
        run = procs.run(2)
        asyncio.run(eventually(run.ready, within=30))
        assert any(tmp.iterdir()), "the run's sockets were expected in TMPDIR"
        assert procs.stop(run) == 0, procs.logs()
        assert list(tmp.iterdir()) == []
    finally:
        procs.close()


def test_an_unreachable_api_server_is_said_and_keeps_the_coordinator_unready(
    tmp_path: Path, offline_kubeconfig: str
) -> None:
    procs = Processes(kubeconfig=offline_kubeconfig, workdir=tmp_path)
    try:
        coordinator = procs.coordinator()

        async def probe() -> list[int]:
            statuses: list[int] = []
            deadline = time.monotonic() + 6
            async with aiohttp.ClientSession() as http:
                while time.monotonic() < deadline:
                    url = f"http://127.0.0.1:{coordinator.metrics_port}/readyz"
                    try:
                        async with http.get(url) as resp:
                            statuses.append(resp.status)
                    except aiohttp.ClientError:
                        pass
                    await asyncio.sleep(0.2)
            return statuses

        statuses = asyncio.run(probe())
        assert statuses and set(statuses) == {503}, (statuses, procs.logs())
        log = coordinator.log.read_text()
        assert "the API server is unreachable" in log
        assert "is the CRD installed?" not in log
    finally:
        procs.close()


@pytest.mark.asyncio
async def test_the_coordinator_serves_every_workers_metrics(cluster: str, tmp_path: Path) -> None:
    procs = Processes(kubeconfig=cluster, workdir=tmp_path)
    try:
        run = procs.run(2)

        async def both_workers_read() -> bool:
            return (
                await run.metric("metashard_worker_scrape_up", {"worker": f"{_host()}-w0"}) == 1
                and await run.metric("metashard_worker_scrape_up", {"worker": f"{_host()}-w1"}) == 1
            )

        await eventually(both_workers_read, within=30)
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{run.metrics_port}/metrics") as resp,
        ):
            text = await resp.text()
        assert "# TYPE workqueue_adds_total counter" in text  # a worker's family
        assert "# TYPE metashard_coordinator_workers gauge" in text  # the coordinator's own
        assert "_created" not in text
    finally:
        procs.close()


def _host() -> str:
    return socket.gethostname()
