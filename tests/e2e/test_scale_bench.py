"""The scale benchmark at a tiny size on the embedded cluster it starts: every phase of the
raw client and of metashard produces its numbers (none of them is judged: they are not
timed assertions), the report prints a table per phase, and the pictures are drawn when the
plotting library is installed."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadtest.bench import _harness
from loadtest.bench._fanout_report import writes
from loadtest.bench._scale_config import PHASES
from manager.cli.supervisor import worker_id

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not _harness.available(), reason="no fanout harness in ../shared/bench"),
]
N, K = 10, 2
SETTLE = ("--settle", "0.5", "--settle-max", "20")  # a busy machine is said, not waited out


def bench(*flags: str) -> tuple[str, str]:
    """Run the benchmark on the embedded cluster it starts; its stdout and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadtest.bench.scale", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its hook server and controllers go with it on a timeout
        env={k: v for k, v in os.environ.items() if k != "METASHARD_E2E_KUBECONFIG"},
    )
    try:
        stdout, stderr = proc.communicate(timeout=170)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stdout + stderr
    return stdout, stderr


def lines_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "scale.jsonl").read_text().splitlines()]


def test_a_tiny_run_measures_every_phase(tmp_path: Path) -> None:
    out = tmp_path / "out"
    flags = ["--n", str(N), "--k", str(K), "--processes", "1", "--out", str(out)]
    flags += ["--resync-interval", "2", "--lease-duration", "3", "--sample-interval", "0.2"]
    stdout, _ = bench(*flags, *SETTLE)
    records = lines_of(out)
    found = {(r["label"], r["phase"]): r for r in records}
    assert set(found) == {("raw", "coldstart"), ("raw", "update")} | {
        ("metashard-1p", phase) for phase in PHASES
    }
    assert all(r["converged"] and r["seconds"] > 0 and r["n"] == N for r in records)

    def roles(r: dict[str, Any]) -> set[str]:
        return set(r["cpu_processes"])

    cold = found["metashard-1p", "coldstart"]
    assert roles(cold) == {"coordinator", f"worker {worker_id(0)}"}
    assert all(mb > 0 for mb in cold["peak_rss"].values())
    assert cold["cpu_processes"]["coordinator"] > 0  # process start included
    assert cold["requests"]["POST configmaps"] == N * K
    assert cold["hook_calls"] >= N and sum(cold["relists"].values()) >= 1
    assert cold["series"]["progress"][-1] == N
    assert roles(found["raw", "coldstart"]) == {"client"}

    resync = found["metashard-1p", "resync"]
    assert writes(resync) == 0 and resync["hook_calls"] >= N
    assert resync["cache_objects"] >= N * (K + 1) and resync["cache_raw_bytes"] > 0
    edits = found["metashard-1p", "edits"]
    assert edits["edits"] >= 1 and len(edits["latencies"]) == edits["edits"]
    update = found["metashard-1p", "update"]
    assert (writes(update) or 0) >= 1 + K  # the benchmark's patch, the children, the status
    failover = found["metashard-1p", "failover"]
    assert failover["edit_latency"] > 0 and failover["lease_duration"] == 3

    for phase in PHASES:
        assert f"\n{phase} -- " in stdout
    if importlib.util.find_spec("matplotlib") is not None:
        assert sorted(p.name for p in out.glob("*.png")) == sorted(f"{p}.png" for p in PHASES)


def test_repeats_run_in_rounds_and_the_report_lists_every_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    flags = ["--n", str(N), "--k", str(K), "--processes", "1", "--phases", "coldstart"]
    stdout, _ = bench(*flags, "--repeat", "2", "--out", str(out), *SETTLE)
    records = lines_of(out)
    assert [(r["label"], r["repeat"]) for r in records] == [
        ("raw", 0),
        ("metashard-1p", 0),
        ("metashard-1p", 1),
        ("raw", 1),
    ]
    assert all(r["converged"] and r["phase"] == "coldstart" for r in records)
    assert stdout.count("    runs: ") == 2  # under raw's row and metashard's
