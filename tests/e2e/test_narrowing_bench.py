"""The narrowing benchmark at a tiny size on the embedded cluster it starts: both
configurations run and report, and only the narrowed one leaves the unselected ConfigMaps out
of the coordinator's cache (the numbers are not judged: they are not timed assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]
UNSELECTED, SELECTED = 60, 4


def test_a_tiny_run_measures_both_configurations(tmp_path: Path) -> None:
    out = tmp_path / "out"
    flags = ["--unselected", str(UNSELECTED), "--selected", str(SELECTED), "--out", str(out)]
    result = subprocess.run(
        [sys.executable, "-m", "loadtest.bench.narrowing", *flags],
        capture_output=True,
        text=True,
        timeout=110,
        env={k: v for k, v in os.environ.items() if k != "METASHARD_E2E_KUBECONFIG"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    records = {
        r["config"]: r
        for r in (json.loads(x) for x in (out / "narrowing.jsonl").read_text().splitlines())
    }
    assert set(records) == {"narrowed", "whole"}
    assert records["narrowed"]["cached"] == SELECTED
    assert records["whole"]["cached"] >= UNSELECTED + SELECTED
    for r in records.values():
        assert r["seconds"] > 0 and r["coordinator_peak_mb"] > 0 and r["cpu_s"] > 0
    assert "whole / narrowed" in result.stdout
