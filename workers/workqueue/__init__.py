"""Work queues for reconciles: client-go's ``util/workqueue`` contract, with priorities.

Each hosted controller has one ``WorkQueue``; a worker's asyncio tasks take keys from it
with ``await queue.get()``, reconcile them, and call ``queue.done(key)``.

- **Fair**: within a priority, items are handed out in the order they were queued.
- **Stingy**: an item queued many times before it is taken is processed once.
- **One consumer per item**: an item is never handed out while it is being processed; one
  added meanwhile is processed again after ``done``.
- **Live before low**: ``Priority.LIVE`` work goes ahead of ``Priority.LOW`` (initial list,
  resync); a queued low item that gets a live add is promoted. The priorities are those of the
  wire (``proto.wire.Priority``), so a KEYS message's priority is the one its keys are queued
  at.
- **Delays and rate limits**: ``add_after`` (the earlier ready time wins),
  ``add_rate_limited`` / ``forget`` / ``num_requeues`` over a ``workers.workqueue.ratelimiters``
  limiter.
- **Shutdown**: ``shut_down()`` stops intake; ``get()`` raises ``ShutDown`` once the queue is
  empty.
- **Revocation**: ``discard(predicate)`` drops queued and delayed items, not in-flight ones.

Layers, one module each: ``queue`` (dirty/processing/priorities), ``delaying``
(``add_after``), ``ratelimiting`` (``WorkQueue``), ``metrics`` (``workqueue_*``), ``errors``.
"""

from __future__ import annotations

from workers.workqueue.errors import (
    InvalidDelay,
    InvalidPriority,
    NotProcessing,
    ShutDown,
    WorkQueueError,
)
from workers.workqueue.metrics import (
    MetricsProvider,
    NoMetricsProvider,
    PrometheusMetricsProvider,
    QueueMetrics,
)
from workers.workqueue.ratelimiting import WorkQueue

__all__ = [
    "InvalidDelay",
    "InvalidPriority",
    "MetricsProvider",
    "NoMetricsProvider",
    "NotProcessing",
    "PrometheusMetricsProvider",
    "QueueMetrics",
    "ShutDown",
    "WorkQueue",
    "WorkQueueError",
]
