"""Work queue metrics with client-go's exact semantics and controller-runtime's names.

Every series carries the labels ``name`` and ``controller``, both set to the queue's name
(controller-runtime >= 0.19). Histograms use ``ExponentialBuckets(1e-8, 10, 12)``: 1e-8 s up
to 1e3 s, so backoffs of up to 1000 s stay visible. The queue reports events; the metrics
object keeps the timestamps (client-go's ``defaultQueueMetrics``):

- ``workqueue_depth``: +1 on every add that is not deduplicated (including an add while the
  item is being processed), -1 on every get and on every queued item discarded.
- ``workqueue_adds_total``: adds that are not deduplicated.
- ``workqueue_queue_duration_seconds``: from the first add after the item's last get (the
  add that made it dirty) to the get that hands it out.
- ``workqueue_work_duration_seconds``: from get to done.
- ``workqueue_unfinished_work_seconds`` / ``workqueue_longest_running_processor_seconds``: the
  sum of, and the largest, ages of the items being processed, computed when the owner calls
  ``update_unfinished_work()`` (every 500 ms upstream; stale between calls by design).
- ``workqueue_retries_total``: every ``add_after`` call, zero delays and rate-limited adds
  included, counted before the queue decides anything.

``PrometheusMetricsProvider`` registers the families once on the registry it is given (tests
pass their own ``CollectorRegistry``); ``forget_controller(name)`` removes a deleted
controller's series so dashboards do not show it forever. A queue whose series were forgotten
keeps working; its updates are simply no longer exported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from proto.runtime.clock import Clock

LABELS = ("name", "controller")
BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3)


class QueueMetrics(Protocol):
    """What one queue reports; called by the queue, never by its consumers."""

    def add(self, item: Hashable) -> None:
        """``item`` became dirty (an add that was not deduplicated)."""
        ...

    def get(self, item: Hashable) -> None:
        """``item`` was handed out for processing."""
        ...

    def done(self, item: Hashable) -> None:
        """Processing of ``item`` finished."""
        ...

    def discard(self, item: Hashable) -> None:
        """Dirty ``item`` was dropped without being handed out."""
        ...

    def retry(self) -> None:
        """``add_after`` was called."""
        ...

    def update_unfinished_work(self) -> None:
        """Recompute the gauges about items still being processed."""
        ...


class MetricsProvider(Protocol):
    """Makes the metrics of each named queue (client-go's ``MetricsProvider``)."""

    def queue_metrics(self, name: str, *, clock: Clock) -> QueueMetrics:
        """The metrics of the queue called ``name``, timed by ``clock``."""
        ...

    def forget_controller(self, name: str) -> None:
        """Remove every series of the queue called ``name``."""
        ...


class _NoQueueMetrics:
    __slots__ = ()

    def add(self, item: Hashable) -> None:
        pass

    def get(self, item: Hashable) -> None:
        pass

    def done(self, item: Hashable) -> None:
        pass

    def discard(self, item: Hashable) -> None:
        pass

    def retry(self) -> None:
        pass

    def update_unfinished_work(self) -> None:
        pass


_NO_QUEUE_METRICS = _NoQueueMetrics()


class NoMetricsProvider:
    """The default: records nothing, costs one empty call per event."""

    __slots__ = ()

    def queue_metrics(self, name: str, *, clock: Clock) -> QueueMetrics:
        return _NO_QUEUE_METRICS

    def forget_controller(self, name: str) -> None:
        pass


@dataclass(frozen=True, slots=True)
class _Families:
    depth: Gauge
    adds: Counter
    queue_duration: Histogram
    work_duration: Histogram
    unfinished: Gauge
    longest: Gauge
    retries: Counter

    def all(self) -> tuple[Gauge | Counter | Histogram, ...]:
        return (
            self.depth,
            self.adds,
            self.queue_duration,
            self.work_duration,
            self.unfinished,
            self.longest,
            self.retries,
        )


class PrometheusMetricsProvider:
    """The ``workqueue_*`` families, registered once on ``registry``."""

    __slots__ = ("_families",)

    def __init__(self, *, registry: CollectorRegistry = REGISTRY) -> None:
        self._families = _Families(
            depth=Gauge("workqueue_depth", "Current depth of workqueue", LABELS, registry=registry),
            adds=Counter(
                "workqueue_adds_total",
                "Total number of adds handled by workqueue",
                LABELS,
                registry=registry,
            ),
            queue_duration=Histogram(
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested",
                LABELS,
                buckets=BUCKETS,
                registry=registry,
            ),
            work_duration=Histogram(
                "workqueue_work_duration_seconds",
                "How long in seconds processing an item from workqueue takes.",
                LABELS,
                buckets=BUCKETS,
                registry=registry,
            ),
            unfinished=Gauge(
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been "
                "observed by work_duration. Large values indicate stuck threads. One can deduce "
                "the number of stuck threads by observing the rate at which this increases.",
                LABELS,
                registry=registry,
            ),
            longest=Gauge(
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                LABELS,
                registry=registry,
            ),
            retries=Counter(
                "workqueue_retries_total",
                "Total number of retries handled by workqueue",
                LABELS,
                registry=registry,
            ),
        )

    def queue_metrics(self, name: str, *, clock: Clock) -> QueueMetrics:
        return _PrometheusQueueMetrics(self._families, name, clock)

    def forget_controller(self, name: str) -> None:
        for family in self._families.all():
            # Older prometheus_client versions raise KeyError for an unknown label set.
            with contextlib.suppress(KeyError):
                family.remove(name, name)


class _PrometheusQueueMetrics:
    """One queue's labelled series plus the timestamps client-go keeps beside them."""

    __slots__ = (
        "_added_at",
        "_adds",
        "_clock",
        "_depth",
        "_longest",
        "_queue_duration",
        "_retries",
        "_started_at",
        "_unfinished",
        "_work_duration",
    )

    def __init__(self, families: _Families, name: str, clock: Clock) -> None:
        # Creating the children here exports every series at zero from the start.
        self._depth = families.depth.labels(name, name)
        self._adds = families.adds.labels(name, name)
        self._queue_duration = families.queue_duration.labels(name, name)
        self._work_duration = families.work_duration.labels(name, name)
        self._unfinished = families.unfinished.labels(name, name)
        self._longest = families.longest.labels(name, name)
        self._retries = families.retries.labels(name, name)
        self._clock = clock
        self._added_at: dict[Hashable, float] = {}
        self._started_at: dict[Hashable, float] = {}

    def add(self, item: Hashable) -> None:
        self._depth.inc()
        self._adds.inc()
        self._added_at.setdefault(item, self._clock.now())

    def get(self, item: Hashable) -> None:
        self._depth.dec()
        now = self._clock.now()
        self._started_at[item] = now
        added_at = self._added_at.pop(item, None)
        if added_at is not None:
            self._queue_duration.observe(now - added_at)

    def done(self, item: Hashable) -> None:
        started_at = self._started_at.pop(item, None)
        if started_at is not None:
            self._work_duration.observe(self._clock.now() - started_at)

    def discard(self, item: Hashable) -> None:
        self._depth.dec()
        self._added_at.pop(item, None)

    def retry(self) -> None:
        self._retries.inc()

    def update_unfinished_work(self) -> None:
        now = self._clock.now()
        total = 0.0
        oldest = 0.0
        for started_at in self._started_at.values():
            age = now - started_at
            total += age
            oldest = max(oldest, age)
        self._unfinished.set(total)
        self._longest.set(oldest)
