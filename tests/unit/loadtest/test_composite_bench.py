"""loadtest.bench.composite: the quick run completes and reports every row."""

from __future__ import annotations

import pytest

from loadtest.bench import composite


def test_quick_composite_bench_runs_each_case(capsys: pytest.CaptureFixture[str]) -> None:
    composite.run(quick=True)  # not main: it would reconfigure logging for the later tests
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split("  ")[1] for line in lines if line.startswith("  ")]
    assert [r.split(":")[0] for r in rows[:3]] == ["baseline", "steady", "create"]
    assert len(rows) == 6
