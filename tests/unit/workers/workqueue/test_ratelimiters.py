"""Rate limiters: client-go's exponential backoff, token bucket and max-of."""

from __future__ import annotations

import pytest

from proto.runtime.clock import FakeClock
from workers.workqueue.ratelimiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)


def test_exponential_doubles_from_5ms_and_caps_at_1000s_on_the_19th_failure() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("a") for _ in range(20)]
    assert delays[:4] == [0.005, 0.010, 0.020, 0.040]
    assert delays[17] == pytest.approx(655.36)  # 18th failure: the last uncapped
    assert delays[18] == 1000.0  # 19th: 1310.72 s, capped
    assert delays[19] == 1000.0
    assert delays[:18] == [0.005 * 2**n for n in range(18)]
    assert limiter.num_requeues("a") == 20


def test_exponential_counts_each_item_apart_and_forget_resets() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == 0.005
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005
    assert limiter.num_requeues("b") == 1


def test_exponential_survives_very_long_failure_streaks() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(
        base_delay=0.001, max_delay=30.0
    )
    delays = [limiter.when("a") for _ in range(5000)]
    assert delays[-1] == 30.0


def test_bucket_allows_a_burst_of_100_then_paces_at_10_per_second() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert limiter.when(100) == pytest.approx(0.1)  # the 101st immediate call
    assert limiter.when(101) == pytest.approx(0.2)  # every call reserves: debt grows
    clock.advance(0.1)
    assert limiter.when(102) == pytest.approx(0.2)
    assert limiter.num_requeues(1) == 0


def test_bucket_refills_up_to_its_burst_only() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=100, clock=clock)
    for i in range(100):
        limiter.when(i)
    clock.advance(3600.0)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert limiter.when("one too many") == pytest.approx(0.1)


class ScriptedClock:
    """A clock that reads the given times in turn (a monotonic clock never goes back; the
    limiter must cope if a reading does)."""

    def __init__(self, *readings: float) -> None:
        self._readings = list(readings)

    def now(self) -> float:
        return self._readings.pop(0)

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("a rate limiter never sleeps")


def test_bucket_refills_nothing_for_a_clock_reading_from_the_past() -> None:
    clock = ScriptedClock(10.0, 20.0, 15.0, 16.0)
    limiter = BucketRateLimiter(qps=1, burst=1, clock=clock)  # starts full at t=10
    assert limiter.when("a") == 0.0  # t=20: takes the only token
    assert limiter.when("a") == pytest.approx(1.0)  # t=15: time went back, no refill
    assert limiter.when("a") == pytest.approx(1.0)  # t=16: one second after 15 refills one


def test_max_of_asks_every_limiter_and_returns_the_longest_delay() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock=clock)
    # Ten failures of one item: the exponential delay wins, but each call takes a token.
    delays = [limiter.when("hot") for _ in range(10)]
    assert delays == [0.005 * 2**n for n in range(10)]
    # So only 90 tokens are left for other items.
    assert [limiter.when(f"cold-{i}") for i in range(90)] == [0.005] * 90
    assert limiter.when("cold-90") == pytest.approx(0.1)
    assert limiter.num_requeues("hot") == 10
    limiter.forget("hot")
    assert limiter.num_requeues("hot") == 0
    clock.advance(3600.0)
    assert limiter.when("hot") == 0.005


def test_max_of_num_requeues_is_the_largest() -> None:
    slow: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    fast: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    limiter = MaxOfRateLimiter(slow, fast)
    limiter.when("a")
    fast.when("a")
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert slow.num_requeues("a") == fast.num_requeues("a") == 0


@pytest.mark.parametrize(
    "make",
    [
        lambda: ItemExponentialFailureRateLimiter(base_delay=-1.0),
        lambda: ItemExponentialFailureRateLimiter(max_delay=float("nan")),
        lambda: BucketRateLimiter(qps=0),
        lambda: BucketRateLimiter(burst=0),
        lambda: MaxOfRateLimiter(),
    ],
)
def test_nonsense_settings_are_rejected(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]
