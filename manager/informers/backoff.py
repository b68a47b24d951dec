"""Exponential backoff with jitter and a quiet-period reset, for retrying list and watch.

client-go's reflector semantics (``wait.NewExponentialBackoffManager(800ms, 30s, 2min, 2.0,
1.0)``):

- The n-th consecutive delay is ``min(cap, initial * factor**n)`` stretched by a random
  ``1 + jitter * U[0, 1)``, so many informers that fail together do not retry together.
- When more than ``reset_after`` seconds passed since the previous delay was handed out,
  the sequence starts again from ``initial``: a retry after a long healthy period is quick,
  a retry storm slows down to ``cap``.
- Time comes from the injected ``Clock``; randomness from the injected ``random.Random``.
"""

from __future__ import annotations

import random

from proto.runtime.clock import SYSTEM_CLOCK, Clock


class Backoff:
    """The delays of one retry loop (see the module docstring)."""

    __slots__ = (
        "_attempt",
        "_cap",
        "_clock",
        "_factor",
        "_initial",
        "_jitter",
        "_last",
        "_reset",
        "_rng",
    )

    def __init__(
        self,
        *,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or cap < initial or factor < 1 or jitter < 0 or reset_after <= 0:
            raise ValueError(
                "backoff needs 0 < initial <= cap, factor >= 1, jitter >= 0, reset_after > 0"
            )
        self._initial = initial
        self._cap = cap
        self._factor = factor
        self._jitter = jitter
        self._reset = reset_after
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._attempt = 0
        self._last: float | None = None

    def next(self) -> float:
        """The delay before the next retry, in seconds."""
        now = self._clock.now()
        if self._last is not None and now - self._last > self._reset:
            self._attempt = 0
        self._last = now
        base = min(self._cap, self._initial * self._factor**self._attempt)
        if base < self._cap:
            self._attempt += 1
        return base * (1.0 + self._jitter * self._rng.random())
