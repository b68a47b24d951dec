"""Exponential backoff: growth, cap, jitter bounds, reset after a quiet period."""

from __future__ import annotations

import random

import pytest

from manager.informers.backoff import Backoff
from proto.runtime.clock import FakeClock


def test_delays_double_up_to_the_cap_without_jitter() -> None:
    backoff = Backoff(initial=1.0, cap=10.0, jitter=0.0, clock=FakeClock())
    assert [backoff.next() for _ in range(7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


def test_jitter_stretches_each_delay_within_bounds() -> None:
    backoff = Backoff(initial=0.8, cap=30.0, jitter=1.0, clock=FakeClock(), rng=random.Random(7))
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    delays = [backoff.next() for _ in bases]
    for delay, base in zip(delays, bases, strict=True):
        assert base <= delay < 2 * base
    assert len(set(delays)) == len(delays)  # jittered, not a fixed sequence


def test_sequence_restarts_after_a_quiet_period() -> None:
    clock = FakeClock()
    backoff = Backoff(initial=1.0, cap=60.0, jitter=0.0, reset_after=120.0, clock=clock)
    assert [backoff.next() for _ in range(3)] == [1.0, 2.0, 4.0]
    clock.advance(120.0)  # not more than reset_after: keeps growing
    assert backoff.next() == 8.0
    clock.advance(120.5)
    assert backoff.next() == 1.0


@pytest.mark.parametrize(
    "kwargs",
    [{"initial": 0.0}, {"initial": 5.0, "cap": 1.0}, {"factor": 0.5}, {"jitter": -1.0}],
)
def test_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff needs"):
        Backoff(**kwargs)  # type: ignore[arg-type]
