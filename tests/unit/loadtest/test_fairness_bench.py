"""loadtest.bench.fairness: every run reconciles every key; the limited one frees its permits."""

from __future__ import annotations

import asyncio

import pytest

from loadtest.bench import fairness


@pytest.mark.parametrize("mode", ["one queue", "fair", "limited"])
def test_each_run_reconciles_the_flood_and_every_edit(mode: str) -> None:
    result = asyncio.run(fairness.run(flood=200, hook_seconds=0.001, mode=mode, edits=3))
    assert result.samples == 3
    assert 0 < result.p50 <= result.p99


def test_the_report_prints_the_ratio_against_the_baseline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fairness.report(flood=100, hook_ms=1.0, edits=3)
    out = capsys.readouterr().out
    assert out.count("baseline p99 / this p99") == 2
