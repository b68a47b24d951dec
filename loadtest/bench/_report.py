"""Shared helpers for benchmarks: repeatable rate measurement and uniform output."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import TypedDict, Unpack


def rate(fn: Callable[[], object], *, seconds: float = 1.0, repeat: int = 5) -> float:
    """Calls per second of ``fn`` on this core: the median of ``repeat`` timed runs.

    Each run calls ``fn`` in a loop for about ``seconds``. The garbage collector is left on
    (it is part of the real cost) but collected before each run so runs start alike.
    """
    fn()  # warm up
    results = []
    for _ in range(repeat):
        gc.collect()
        calls = 0
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()
        while True:
            for _ in range(16):
                fn()
            calls += 16
            now = time.perf_counter()
            if now >= deadline:
                break
        results.append(calls / (now - started))
    return statistics.median(results)


class RowOptions(TypedDict, total=False):
    baseline: float | None
    """The value the ratio value/baseline is taken against (no ratio without one)."""
    target: str
    """The goal, printed after the figures."""
    vs: str
    """What the baseline is called (default ``baseline``)."""
    digits: int
    """Decimals of the value (default 1)."""


def format_row(label: str, value: float, unit: str, **options: Unpack[RowOptions]) -> str:
    """One result line; with ``baseline``, also the ratio value/baseline, named by ``vs``."""
    baseline, target = options.get("baseline"), options.get("target", "")
    digits = options.get("digits", 1)
    ratio = f"  x{value / baseline:6.2f} vs {options.get('vs', 'baseline')}" if baseline else ""
    goal = f"  (target {target})" if target else ""
    return f"  {label:<52} {value:>14,.{digits}f} {unit}{ratio}{goal}"


def row(label: str, value: float, unit: str, **options: Unpack[RowOptions]) -> None:
    """Print one result line (``format_row``)."""
    print(format_row(label, value, unit, **options), flush=True)


def header(title: str) -> None:
    print(f"\n{title}", flush=True)
