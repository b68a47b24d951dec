"""``make demo`` (``python -m loadtest.dev.demo``): it converges, then stops cleanly on Ctrl-C."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from loadtest.dev.processes import REPO

pytestmark = pytest.mark.e2e


def test_the_demo_converges_and_stops_on_ctrl_c() -> None:
    demo = subprocess.Popen(
        [sys.executable, "-u", "-m", "loadtest.dev.demo"],
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
        metrics = _metrics_of("".join(output))
        # One endpoint: the workers' workqueues are there, labelled with the worker id.
        assert re.search(r'^workqueue_adds_total\{.*worker="[^"]+-w0"', metrics, re.M), metrics
        assert re.search(r'^workqueue_adds_total\{.*worker="[^"]+-w1"', metrics, re.M), metrics
        # the workers' own API requests, with client-go's names
        assert re.search(r'^rest_client_requests_total\{.*worker="[^"]+-w\d"', metrics, re.M)
        assert "_created" not in metrics
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
    assert "no wait for workers of a previous term" in log  # its workers are its own
    shutil.rmtree(kept.parent)


def _metrics_of(output: str) -> str:
    """What the metrics URL the demo printed serves."""
    url = re.search(r"metrics:\s+(http://\S+/metrics)", output)
    assert url is not None, output
    with urllib.request.urlopen(url.group(1), timeout=10) as resp:
        text: str = resp.read().decode()
    return text
