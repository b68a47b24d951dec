"""Rate limiters for requeues: how long to wait before an item may be retried.

The seam is client-go's ``RateLimiter`` (``util/workqueue/default_rate_limiters.go``):

- ``when(item)`` records one more failure of ``item`` and returns the delay in seconds before
  it should be retried; it is called once per retry, so it is also where a limiter counts.
- ``forget(item)`` is called when ``item`` succeeded: its failure history is dropped (a shared
  limiter such as the token bucket keeps its state; it has nothing per item).
- ``num_requeues(item)`` is how many failures are currently on record for ``item``.

The limiters, with client-go's behaviour:

- ``ItemExponentialFailureRateLimiter``: ``base_delay * 2**failures_so_far``, capped at
  ``max_delay``. With the defaults (5 ms, 1000 s) the n-th consecutive failure waits
  5 ms * 2**(n-1); the 19th is the first one capped (5 ms * 2**18 = 1310.72 s).
- ``BucketRateLimiter``: one token bucket shared by all items (golang.org/x/time/rate,
  ``Reserve().Delay()``). It starts full; every ``when`` reserves a token, even when another
  limiter's delay wins, so bursts beyond ``burst`` and sustained rates beyond ``qps`` wait.
- ``MaxOfRateLimiter``: asks every limiter (so each one counts), returns the longest delay;
  ``forget`` forgets in all, ``num_requeues`` is the largest.
- ``default_controller_rate_limiter()``: max of exponential (5 ms .. 1000 s) and bucket
  (10 qps, burst 100), client-go's ``DefaultTypedControllerRateLimiter``.

Not thread-safe: one event loop drives a limiter.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from proto.runtime.clock import SYSTEM_CLOCK, Clock

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)

# 2.0 ** _MAX_EXPONENT stays a finite float; any real cap is reached long before it.
_MAX_EXPONENT = 1000


class RateLimiter(Protocol[T_contra]):
    """How long an item waits before its next retry (client-go's ``RateLimiter``)."""

    def when(self, item: T_contra) -> float:
        """Record a failure of ``item``; the delay in seconds before retrying it."""
        ...

    def forget(self, item: T_contra) -> None:
        """Drop ``item``'s failure history (it succeeded)."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """How many failures of ``item`` are on record."""
        ...


class ItemExponentialFailureRateLimiter(Generic[T]):
    """Per-item exponential backoff: ``base_delay * 2**failures``, capped at ``max_delay``."""

    __slots__ = ("_base", "_failures", "_max")

    def __init__(self, *, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if not (math.isfinite(base_delay) and base_delay >= 0):
            raise ValueError(f"base_delay must be finite and >= 0, not {base_delay!r}")
        if not (math.isfinite(max_delay) and max_delay >= 0):
            raise ValueError(f"max_delay must be finite and >= 0, not {max_delay!r}")
        self._base = base_delay
        self._max = max_delay
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        return min(self._base * 2.0 ** min(failures, _MAX_EXPONENT), self._max)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """A token bucket shared by all items: ``qps`` tokens a second, at most ``burst`` saved.

    ``when`` reserves one token and returns how long until it is available (zero while the
    bucket holds tokens). Reservations are never refused, so the debt, and thus the delay,
    grows with every call beyond the bucket's rate, as ``rate.Limiter.Reserve()`` does.
    """

    __slots__ = ("_burst", "_clock", "_last", "_qps", "_tokens")

    def __init__(self, *, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        if not (math.isfinite(qps) and qps > 0):
            raise ValueError(f"qps must be finite and > 0, not {qps!r}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, not {burst!r}")
        self._qps = qps
        self._burst = float(burst)
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._tokens = self._burst
        self._last = self._clock.now()

    def when(self, item: Hashable) -> float:
        now = self._clock.now()
        # A reading older than the last one refills nothing (rate.Limiter.advance).
        elapsed = max(now - self._last, 0.0)
        tokens = min(self._tokens + elapsed * self._qps, self._burst) - 1.0
        self._tokens = tokens
        self._last = now
        return -tokens / self._qps if tokens < 0 else 0.0

    def forget(self, item: Hashable) -> None:
        """Nothing to forget: the bucket has no per-item state."""

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """The longest delay of several limiters; every limiter is asked on every call."""

    __slots__ = ("_limiters",)

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: T) -> float:
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: T) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(*, clock: Clock | None = None) -> RateLimiter[Hashable]:
    """client-go's default for controllers: exponential 5 ms .. 1000 s, max with 10 qps/100."""
    return MaxOfRateLimiter[Hashable](
        ItemExponentialFailureRateLimiter(base_delay=0.005, max_delay=1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )
