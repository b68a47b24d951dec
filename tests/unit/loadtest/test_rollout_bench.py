"""loadtest.bench.rollout: the quick run completes and reports the writes per child moved."""

from __future__ import annotations

import pytest

from loadtest.bench import rollout


def test_quick_rollout_bench_writes_the_minimum(capsys: pytest.CaptureFixture[str]) -> None:
    rollout.run(quick=True)  # not main: it would reconfigure logging for the later tests
    lines = {
        line.split("  ")[1].strip(): line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("  ")
    }
    assert "4.0 writes  x  1.00" in lines["child + revision writes per child moved"]
