"""The rate-limited work queue controllers use (client-go ``rate_limiting_queue.go``).

- ``add_rate_limited(item)`` is ``add_after(item, limiter.when(item))``: the limiter records
  one more failure and picks the delay, even if the queue is shutting down (as client-go).
- ``forget(item)`` clears the item's failure history (call it when processing succeeded);
  ``num_requeues(item)`` reads it. Neither touches the queue itself.
- ``discard`` also forgets the history of the items it drops, so revoked keys do not keep
  their backoff (or their memory) in the limiter.
- The default limiter is ``workers.workqueue.ratelimiters.default_controller_rate_limiter()`` on the
  queue's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from proto.runtime.clock import Clock
from proto.wire import Priority
from workers.workqueue.delaying import DelayingQueue
from workers.workqueue.metrics import MetricsProvider
from workers.workqueue.ratelimiters import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class WorkQueue(DelayingQueue[T]):
    """A delaying queue with per-item rate-limited requeues; see the package docstring."""

    __slots__ = ("_rate_limiter",)

    def __init__(
        self,
        name: str,
        *,
        rate_limiter: RateLimiter[T] | None = None,
        clock: Clock | None = None,
        metrics: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name, clock=clock, metrics=metrics)
        self._rate_limiter: RateLimiter[T] = (
            rate_limiter
            if rate_limiter is not None
            else default_controller_rate_limiter(clock=self._clock)
        )

    def add_rate_limited(self, item: T, *, priority: Priority = Priority.LIVE) -> None:
        """Add ``item`` after the delay its rate limiter assigns to one more failure."""
        self.add_after(item, self._rate_limiter.when(item), priority=priority)

    def forget(self, item: T) -> None:
        """Clear ``item``'s failure history: it was processed successfully."""
        self._rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many rate-limited requeues of ``item`` are on record."""
        return self._rate_limiter.num_requeues(item)

    def _discard(self, predicate: Callable[[T], bool]) -> set[T]:
        removed = super()._discard(predicate)
        for item in removed:
            self._rate_limiter.forget(item)
        return removed
