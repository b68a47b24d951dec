"""workqueue_* metrics: exact values after a scripted sequence, on a private registry."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from proto.runtime.clock import FakeClock
from tests.unit.workers.registry_samples import label_values
from tests.unit.workers.workqueue.conftest import Settle
from workers.workqueue import NoMetricsProvider, PrometheusMetricsProvider, WorkQueue

LABELS = {"name": "test", "controller": "test"}
BUCKETS = ["1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1.0"]
BUCKETS += ["10.0", "100.0", "1000.0", "+Inf"]


class Samples:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def __call__(self, name: str, **extra: str) -> float | None:
        return self.registry.get_sample_value(name, {**LABELS, **extra})

    def histogram(self, name: str) -> tuple[float | None, float | None, list[float | None]]:
        buckets = [self(f"{name}_bucket", le=le) for le in BUCKETS]
        return self(f"{name}_count"), self(f"{name}_sum"), buckets


@pytest.mark.asyncio
async def test_a_scripted_sequence_gives_exact_values(
    queue: WorkQueue[str], clock: FakeClock, registry: CollectorRegistry, settle: Settle
) -> None:
    sample = Samples(registry)
    # Every series exists at zero once the queue does.
    assert sample("workqueue_depth") == 0
    assert sample("workqueue_adds_total") == 0
    assert sample("workqueue_retries_total") == 0
    assert sample("workqueue_queue_duration_seconds_count") == 0

    queue.add("a")  # t=0
    queue.add("b")
    queue.add("a")  # deduplicated: not counted
    assert (sample("workqueue_depth"), sample("workqueue_adds_total")) == (2, 2)

    clock.advance(1.0)
    queue.add("a")  # still deduplicated: the queue time runs from the first add
    a = await queue.get()  # t=1: "a" waited 1 s
    assert sample("workqueue_depth") == 1
    queue.add("a")  # t=1, while processing: counted in depth and adds
    assert (sample("workqueue_depth"), sample("workqueue_adds_total")) == (2, 3)

    clock.advance(2.0)
    queue.update_unfinished_work()  # t=3: "a" has run for 2 s
    assert sample("workqueue_unfinished_work_seconds") == 2.0
    assert sample("workqueue_longest_running_processor_seconds") == 2.0
    b = await queue.get()  # t=3: "b" waited 3 s
    clock.advance(0.5)
    queue.update_unfinished_work()  # t=3.5: "a" 2.5 s, "b" 0.5 s
    assert sample("workqueue_unfinished_work_seconds") == 3.0
    assert sample("workqueue_longest_running_processor_seconds") == 2.5

    queue.done(a)  # t=3.5: worked 2.5 s; re-queued (added at t=1)
    queue.done(b)  # worked 0.5 s
    assert sample("workqueue_depth") == 1
    queue.update_unfinished_work()
    assert sample("workqueue_unfinished_work_seconds") == 0
    assert sample("workqueue_longest_running_processor_seconds") == 0

    clock.advance(0.5)
    a = await queue.get()  # t=4: the re-run waited 3 s since the add while processing
    queue.done(a)  # worked 0 s
    assert sample("workqueue_depth") == 0

    assert sample.histogram("workqueue_queue_duration_seconds") == (
        3,
        7.0,
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 3, 3, 3],
    )
    assert sample.histogram("workqueue_work_duration_seconds") == (
        3,
        3.0,
        [1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 3, 3, 3],
    )

    queue.add_rate_limited("c")  # a retry, parked: not in depth yet
    queue.add_after("d", 0.0)  # a retry with no delay: added at once
    assert sample("workqueue_retries_total") == 2
    assert (sample("workqueue_depth"), sample("workqueue_adds_total")) == (1, 4)
    clock.advance(0.005)
    await settle()
    assert (sample("workqueue_depth"), sample("workqueue_adds_total")) == (2, 5)

    assert queue.discard(lambda key: key == "c") == 1
    assert sample("workqueue_depth") == 1


@pytest.mark.asyncio
async def test_forget_controller_removes_every_series(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    provider = PrometheusMetricsProvider(registry=registry)
    kept: WorkQueue[str] = WorkQueue("kept", clock=clock, metrics=provider)
    gone: WorkQueue[str] = WorkQueue("gone", clock=clock, metrics=provider)
    kept.add("a")
    gone.add("a")
    await gone.get()
    gone.done("a")

    provider.forget_controller("gone")
    provider.forget_controller("never-existed")

    assert label_values(registry, prefix="workqueue_", label="name") == {"kept"}
    gone.add("b")  # the queue still works; its updates are no longer exported
    assert len(gone) == 1
    kept_labels = {"name": "kept", "controller": "kept"}
    assert registry.get_sample_value("workqueue_depth", kept_labels) == 1


def test_families_use_controller_runtime_buckets(registry: CollectorRegistry) -> None:
    PrometheusMetricsProvider(registry=registry).queue_metrics("q", clock=FakeClock())
    families = {family.name: family for family in registry.collect()}
    bucket_bounds = [
        sample.labels["le"]
        for sample in families["workqueue_queue_duration_seconds"].samples
        if sample.name.endswith("_bucket")
    ]
    assert bucket_bounds == BUCKETS
    assert set(families) >= {
        "workqueue_depth",
        "workqueue_adds",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "workqueue_retries",
    }


@pytest.mark.asyncio
async def test_the_default_metrics_record_nothing_and_cost_nothing_to_use() -> None:
    queue: WorkQueue[str] = WorkQueue("quiet", metrics=NoMetricsProvider())
    queue.add("a")
    assert await queue.get() == "a"
    queue.update_unfinished_work()
    queue.done("a")
    NoMetricsProvider().forget_controller("quiet")
    queue.shut_down()
