"""``metashard run`` killed with SIGKILL: its workers stop within seconds, and the next run
removes the private directory it left."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from loadtest.dev.processes import children, exited
from tests.e2e.harness import eventually, run_directories, with_own_tmpdir

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's"),
]


def test_a_killed_run_leaves_no_worker_and_the_next_run_removes_its_directory(
    cluster: str, tmp_path: Path
) -> None:
    procs, tmp = with_own_tmpdir(cluster, tmp_path)
    workers: list[int] = []
    try:
        killed = procs.run(2)
        asyncio.run(eventually(killed.ready, within=30, message=procs.logs))
        workers = children(killed.popen.pid)
        assert len(workers) == 2, procs.logs()
        (left,) = run_directories(tmp)
        procs.kill(killed)
        deadline = time.monotonic() + 5
        while not all(exited(pid) for pid in workers):
            assert time.monotonic() < deadline, f"workers outlived the run: {procs.logs()}"
            time.sleep(0.1)
        assert left.exists()  # nobody was left to remove it

        second = procs.run(2)
        asyncio.run(eventually(second.ready, within=30, message=procs.logs))
        assert not left.exists()
        assert str(left) in second.log.read_text()
        assert "removed the private directory of a dead run" in second.log.read_text()
        assert procs.stop(second) == 0, procs.logs()
        assert list(tmp.iterdir()) == []
    finally:
        procs.close()
        for pid in workers:
            if not exited(pid):
                os.kill(pid, signal.SIGKILL)
