from __future__ import annotations

import pytest

from loadtest.bench import __main__ as runner
from loadtest.bench._report import rate


def test_unknown_benchmark_is_rejected() -> None:
    with pytest.raises(SystemExit):
        runner.main(["no-such-benchmark"])


def test_rate_counts_calls() -> None:
    calls = []
    measured = rate(lambda: calls.append(1), seconds=0.01, repeat=3)
    assert measured > 0
    assert len(calls) >= 3 * 16
