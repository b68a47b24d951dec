"""controller_runtime_* reconcile metrics: names, zero series, exact values, forgetting."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from tests.unit.workers.registry_samples import label_values
from workers.runner.metrics import (
    RECONCILE_TIME_BUCKETS,
    NoControllerMetrics,
    PrometheusControllerMetrics,
    ReconcileResult,
)


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_a_controller_starts_with_every_result_at_zero() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusControllerMetrics(registry=registry)
    metrics.set_max_concurrency("c", 5)
    for result in ("success", "error", "requeue", "requeue_after"):
        assert (
            value(registry, "controller_runtime_reconcile_total", controller="c", result=result)
            == 0
        )
    assert value(registry, "controller_runtime_reconcile_errors_total", controller="c") == 0
    assert value(registry, "controller_runtime_reconcile_time_seconds_count", controller="c") == 0
    assert value(registry, "controller_runtime_active_workers", controller="c") == 0
    assert value(registry, "controller_runtime_max_concurrent_reconciles", controller="c") == 5


def test_reconciles_are_counted_by_result_and_timed() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusControllerMetrics(registry=registry)
    metrics.observe("c", ReconcileResult.SUCCESS, 0.004)
    metrics.observe("c", ReconcileResult.ERROR, 0.2)
    metrics.observe("c", ReconcileResult.ERROR, 70.0)
    metrics.observe("c", ReconcileResult.REQUEUE_AFTER, 1.0)
    metrics.set_active("c", 3)

    def total(result: str) -> float | None:
        return value(registry, "controller_runtime_reconcile_total", controller="c", result=result)

    assert [total(r) for r in ("success", "error", "requeue", "requeue_after")] == [1, 2, 0, 1]
    assert value(registry, "controller_runtime_reconcile_errors_total", controller="c") == 2
    seconds = "controller_runtime_reconcile_time_seconds"
    assert value(registry, f"{seconds}_count", controller="c") == 4
    assert value(registry, f"{seconds}_sum", controller="c") == pytest.approx(71.204)
    assert value(registry, f"{seconds}_bucket", controller="c", le="0.005") == 1
    assert value(registry, f"{seconds}_bucket", controller="c", le="0.2") == 2
    assert value(registry, f"{seconds}_bucket", controller="c", le="1.0") == 3
    assert value(registry, f"{seconds}_bucket", controller="c", le="60.0") == 3
    assert value(registry, f"{seconds}_bucket", controller="c", le="+Inf") == 4
    assert value(registry, "controller_runtime_active_workers", controller="c") == 3


def test_plain_strings_work_as_results_and_unknown_ones_are_rejected() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusControllerMetrics(registry=registry)
    metrics.observe("c", "requeue", 0.1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown reconcile result"):
        metrics.observe("c", "panic", 0.1)  # type: ignore[arg-type]
    labels = {"controller": "c", "result": "requeue"}
    assert registry.get_sample_value("controller_runtime_reconcile_total", labels) == 1
    assert (
        registry.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": "c", "result": "panic"}
        )
        is None
    )


def test_forget_controller_removes_its_series_and_a_later_use_starts_afresh() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusControllerMetrics(registry=registry)
    metrics.observe("gone", ReconcileResult.ERROR, 0.1)
    metrics.set_active("kept", 1)
    metrics.forget_controller("gone")
    metrics.forget_controller("never-existed")
    assert label_values(registry, prefix="controller_runtime_", label="controller") == {"kept"}
    metrics.set_active("gone", 2)
    labels = {"controller": "gone", "result": "error"}
    assert registry.get_sample_value("controller_runtime_reconcile_total", labels) == 0


def test_reconcile_time_buckets_are_controller_runtime_s() -> None:
    assert RECONCILE_TIME_BUCKETS[:5] == (0.005, 0.01, 0.025, 0.05, 0.1)
    assert RECONCILE_TIME_BUCKETS[-6:] == (20.0, 25.0, 30.0, 40.0, 50.0, 60.0)
    assert RECONCILE_TIME_BUCKETS[12:14] == (0.5, 0.6)
    assert len(RECONCILE_TIME_BUCKETS) == 40
    assert list(RECONCILE_TIME_BUCKETS) == sorted(set(RECONCILE_TIME_BUCKETS))


def test_the_default_records_nothing() -> None:
    metrics = NoControllerMetrics()
    metrics.observe("unmetered", ReconcileResult.SUCCESS, 0.1)
    metrics.set_active("unmetered", 1)
    metrics.set_max_concurrency("unmetered", 1)
    # nothing reaches the process-wide registry, and nothing is kept
    assert "unmetered" not in label_values(
        REGISTRY, prefix="controller_runtime_", label="controller"
    )
    assert NoControllerMetrics.__slots__ == () and not hasattr(metrics, "__dict__")
    metrics.forget_controller("unmetered")
