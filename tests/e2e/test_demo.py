"""``make demo`` (``python -m loadtest.demo``): it converges, then stops cleanly on Ctrl-C."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadtest.processes import REPO

pytestmark = pytest.mark.e2e


def test_the_demo_converges_and_stops_on_ctrl_c() -> None:
    demo = subprocess.Popen(
        [sys.executable, "-u", "-m", "loadtest.demo"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    deadline = time.monotonic() + 90
    try:
        assert demo.stdout is not None
        for line in demo.stdout:
            output.append(line)
            if "all converged" in line or time.monotonic() > deadline:
                break
        assert any("all converged" in line for line in output), "".join(output)
        demo.send_signal(signal.SIGINT)
        rest = demo.stdout.read()  # the same reader: lines it buffered already are kept
        output.append(rest)
        assert demo.wait(timeout=60) == 0, "".join(output)
        assert "stopped." in rest
    finally:
        if demo.poll() is None:
            demo.kill()
    text = "".join(output)
    assert "hello          4          4       4  yes" in text  # the change converged too
    assert "metrics:" in text and "kubectl get greetings" in text
    kept = Path(rest.rsplit("metashard's log is kept in ", 1)[1].split()[0])
    log = kept.read_text()
    assert "controller informers synced" in log and "reconciled" in log
    shutil.rmtree(kept.parent)
