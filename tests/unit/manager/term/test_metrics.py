"""The coordinator's counters: keys pushed by priority, fetches answered by result."""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry

from manager.term.metrics import TermMetrics
from proto.wire import Priority


def _value(registry: CollectorRegistry, name: str, labels: dict[str, str]) -> float | None:
    return registry.get_sample_value(name, labels)


def test_keys_and_fetches_are_counted_by_label() -> None:
    registry = CollectorRegistry()
    metrics = TermMetrics(registry)
    for priority in Priority:  # every priority is exported from the start
        assert (
            _value(
                registry,
                "metashard_coordinator_keys_pushed_total",
                {"priority": priority.name.lower()},
            )
            == 0.0
        )
    metrics.keys_pushed(Priority.LIVE)
    metrics.keys_pushed(Priority.LIVE)
    metrics.keys_pushed(Priority.LOW)
    for result in ("snapshot", "snapshot", "not_owner"):
        metrics.fetch(result)
    keys = "metashard_coordinator_keys_pushed_total"
    assert _value(registry, keys, {"priority": "live"}) == 2.0
    assert _value(registry, keys, {"priority": "low"}) == 1.0
    fetches = "metashard_coordinator_fetches_total"
    assert _value(registry, fetches, {"result": "snapshot"}) == 2.0
    assert _value(registry, fetches, {"result": "not_owner"}) == 1.0
    assert _value(registry, fetches, {"result": "stale_epoch"}) is None


def test_without_a_registry_nothing_is_recorded() -> None:
    before = _series(REGISTRY)
    metrics = TermMetrics(None)
    metrics.workers(3)
    metrics.keys_pushed(Priority.LIVE)
    metrics.fetch("snapshot")
    metrics.barrier_timeout()
    metrics.revoked(2)
    metrics.slots({"w-0": 4})
    assert _series(REGISTRY) == before  # nothing was registered in the process's registry
    assert REGISTRY.get_sample_value("metashard_coordinator_workers") is None


def _series(registry: CollectorRegistry) -> set[str]:
    """The names of every sample ``registry`` exports."""
    return {s.name for family in registry.collect() for s in family.samples}
