from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from proto.runtime.exposition import merge, without_created


def _text(families: list[Metric]) -> str:
    class _R:
        def collect(self) -> list[Metric]:
            return families

    return generate_latest(_R()).decode()


def _registry(value: float) -> CollectorRegistry:
    r = CollectorRegistry()
    Counter("workqueue_adds_total", "Adds.", ["name"], registry=r).labels("q").inc(value)
    Histogram("hook_seconds", "Hook.", registry=r).observe(value)
    return r


def test_worker_samples_are_labelled_and_families_merged_once() -> None:
    coordinator = CollectorRegistry()
    Gauge("metashard_coordinator_workers", "Workers.", registry=coordinator).set(2)
    Counter("workqueue_adds_total", "Adds.", ["name"], registry=coordinator)
    remote = {"w0": generate_latest(_registry(1)).decode(), "w1": None}
    text = _text(
        list(
            without_created(
                merge(coordinator.collect(), remote, label="worker", up_name="up_w", up_help="h")
            )
        )
    )
    assert text.count("# TYPE workqueue_adds_total counter") == 1
    assert 'workqueue_adds_total{name="q",worker="w0"} 1.0' in text
    assert 'hook_seconds_count{worker="w0"} 1.0' in text
    assert "metashard_coordinator_workers 2.0" in text
    assert 'up_w{worker="w0"} 1.0' in text and 'up_w{worker="w1"} 0.0' in text
    assert "_created" not in text
    list(text_string_to_metric_families(text))  # a valid exposition


def test_an_existing_label_is_kept_as_exported_and_bad_text_counts_as_not_read() -> None:
    r = CollectorRegistry()
    Gauge("g", "G.", ["worker"], registry=r).labels("inner").set(1)
    merged = merge(
        [],
        {"w0": generate_latest(r).decode(), "w1": "not an exposition {"},
        label="worker",
        up_name="up",
        up_help="h",
    )
    text = _text(merged)
    assert 'g{exported_worker="inner",worker="w0"} 1.0' in text
    assert 'up{worker="w1"} 0.0' in text


def test_a_family_of_another_type_is_left_out() -> None:
    coordinator = CollectorRegistry()
    Gauge("x", "X.", registry=coordinator).set(1)
    worker = CollectorRegistry()
    Counter("x", "X.", registry=worker).inc()
    text = _text(
        merge(
            coordinator.collect(),
            {"w0": generate_latest(worker).decode()},
            label="worker",
            up_name="up",
            up_help="h",
        )
    )
    assert "x 1.0" in text and 'worker="w0"} 1.0' in text.split("# HELP up")[1]
    assert 'x_total{worker="w0"}' not in text
