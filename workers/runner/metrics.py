"""Per-controller reconcile metrics with controller-runtime's names and buckets.

Series, all labelled ``controller`` (the name the controller's work queue also carries):

- ``controller_runtime_reconcile_total{controller,result}``: one per reconcile, ``result`` in
  ``success``, ``error``, ``requeue``, ``requeue_after``.
- ``controller_runtime_reconcile_errors_total{controller}``: reconciles that ended in error.
- ``controller_runtime_reconcile_time_seconds{controller}``: reconcile durations, with
  controller-runtime's buckets (5 ms .. 60 s).
- ``controller_runtime_active_workers{controller}``: reconciles running now.
- ``controller_runtime_max_concurrent_reconciles{controller}``: the concurrency limit.

The first call naming a controller creates all of its series at zero, every ``result``
included, as controller-runtime does when a controller starts, so rates are defined from the
start. ``forget_controller(name)`` removes them all when the controller is deleted; a later
call naming it starts afresh.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram


class ReconcileResult(enum.StrEnum):
    """How a reconcile ended; the ``result`` label of ``controller_runtime_reconcile_total``."""

    SUCCESS = "success"
    ERROR = "error"
    REQUEUE = "requeue"
    REQUEUE_AFTER = "requeue_after"


RECONCILE_TIME_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    *(0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0),
    *(6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0),
)


class ControllerMetrics(Protocol):
    """What the reconcile runner reports about each controller."""

    def observe(self, controller: str, result: ReconcileResult, seconds: float) -> None:
        """One reconcile of ``controller`` ended with ``result`` after ``seconds``."""
        ...

    def set_active(self, controller: str, workers: int) -> None:
        """``workers`` reconciles of ``controller`` are running now."""
        ...

    def set_max_concurrency(self, controller: str, limit: int) -> None:
        """``controller`` runs at most ``limit`` reconciles at once."""
        ...

    def forget_controller(self, controller: str) -> None:
        """Remove every series of ``controller``."""
        ...


class NoControllerMetrics:
    """The default: records nothing."""

    __slots__ = ()

    def observe(self, controller: str, result: ReconcileResult, seconds: float) -> None:
        pass

    def set_active(self, controller: str, workers: int) -> None:
        pass

    def set_max_concurrency(self, controller: str, limit: int) -> None:
        pass

    def forget_controller(self, controller: str) -> None:
        pass


@dataclass(frozen=True, slots=True)
class _Series:
    """One controller's series, resolved once (``labels()`` costs more than the update)."""

    total: Mapping[str, Counter]
    errors: Counter
    time: Histogram
    active: Gauge
    max: Gauge


class PrometheusControllerMetrics:
    """The ``controller_runtime_*`` families, registered once on ``registry``."""

    __slots__ = ("_active", "_errors", "_max", "_series", "_time", "_total")

    def __init__(self, *, registry: CollectorRegistry = REGISTRY) -> None:
        self._total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ("controller", "result"),
            registry=registry,
        )
        self._errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ("controller",),
            registry=registry,
        )
        self._time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ("controller",),
            buckets=RECONCILE_TIME_BUCKETS,
            registry=registry,
        )
        self._active = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ("controller",),
            registry=registry,
        )
        self._max = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ("controller",),
            registry=registry,
        )
        self._series: dict[str, _Series] = {}

    def observe(self, controller: str, result: ReconcileResult, seconds: float) -> None:
        """Count one reconcile; raises ``ValueError`` for a result that is not one of four."""
        series = self._of(controller)
        total = series.total.get(result)
        if total is None:
            raise ValueError(f"unknown reconcile result {result!r}; expected one of {_RESULTS}")
        total.inc()
        if result == ReconcileResult.ERROR:
            series.errors.inc()
        series.time.observe(seconds)

    def set_active(self, controller: str, workers: int) -> None:
        self._of(controller).active.set(workers)

    def set_max_concurrency(self, controller: str, limit: int) -> None:
        self._of(controller).max.set(limit)

    def forget_controller(self, controller: str) -> None:
        self._series.pop(controller, None)
        label_sets: list[tuple[Counter | Gauge | Histogram, tuple[str, ...]]] = [
            (self._total, (controller, result)) for result in ReconcileResult
        ]
        label_sets += [
            (family, (controller,))
            for family in (self._errors, self._time, self._active, self._max)
        ]
        for family, labels in label_sets:
            # Older prometheus_client versions raise KeyError for an unknown label set.
            with contextlib.suppress(KeyError):
                family.remove(*labels)

    def _of(self, controller: str) -> _Series:
        """``controller``'s series, created at zero by the first call naming it."""
        series = self._series.get(controller)
        if series is None:
            series = self._series[controller] = _Series(
                total={r: self._total.labels(controller, r) for r in ReconcileResult},
                errors=self._errors.labels(controller),
                time=self._time.labels(controller),
                active=self._active.labels(controller),
                max=self._max.labels(controller),
            )
        return series


_RESULTS = frozenset(ReconcileResult)
