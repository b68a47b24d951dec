"""docs/metrics.md lists exactly the metric names the coordinator and the workers register."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from manager.election.metrics import PrometheusLeaderMetrics
from manager.informers.metrics import PrometheusInformerMetrics
from manager.link.auth import refused_peers_counter
from manager.term.metrics import TermMetrics
from proto.hooks.metrics import PrometheusHookMetrics
from proto.kube.metrics import RestClientMetrics
from proto.runtime.ops import PEER_UP, process_collectors
from proto.wire import dropped_frames_counter
from workers.link.contact import join_warnings_counter
from workers.runner.metrics import PrometheusControllerMetrics
from workers.sync.apply_metrics import PrometheusApplyMetrics
from workers.workqueue.metrics import PrometheusMetricsProvider

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def exposed(registry: CollectorRegistry) -> set[str]:
    """Family names as scraped: counters with ``_total``."""
    return {f"{m.name}_total" if m.type == "counter" else m.name for m in registry.collect()}


def coordinator() -> set[str]:
    # What manager.coordinator.Coordinator registers (leader metrics once it runs an election), and
    # the gauge its metrics endpoint adds for each worker it reads under `metashard run`.
    registry = CollectorRegistry()
    process_collectors(registry)  # proto.runtime.ops.OpsServer's
    RestClientMetrics(registry)
    PrometheusInformerMetrics(registry)
    TermMetrics(registry)
    dropped_frames_counter(registry)
    refused_peers_counter(registry)
    PrometheusHookMetrics(registry)
    PrometheusLeaderMetrics(registry)
    return exposed(registry) | {PEER_UP}


def worker() -> set[str]:
    # What workers.worker.Worker registers (the apply counts under server-side apply).
    registry = CollectorRegistry()
    process_collectors(registry)  # proto.runtime.ops.OpsServer's
    PrometheusHookMetrics(registry)
    dropped_frames_counter(registry)
    PrometheusMetricsProvider(registry=registry)
    PrometheusControllerMetrics(registry=registry)
    PrometheusApplyMetrics(registry=registry)
    join_warnings_counter(registry)
    return exposed(registry)


def documented() -> set[str]:
    return set(re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text(), re.MULTILINE))


def test_every_documented_metric_exists() -> None:
    assert documented() - (coordinator() | worker()) == set()


def test_every_registered_metric_is_documented() -> None:
    assert (coordinator() | worker()) - documented() == set()


def test_the_registries_above_hold_every_family_in_the_source() -> None:
    """A family added anywhere in the code must be added to ``coordinator``/``worker`` above."""
    root = DOC.parents[1]
    pattern = re.compile(r"\b(Counter|Gauge|Histogram|Summary)\(\s*f?\"([a-z_{}]+)\"")
    found: set[str] = set()
    for package in ("manager", "workers", "proto"):
        for path in (root / package).rglob("*.py"):
            for kind, name in pattern.findall(path.read_text()):
                names = [name.replace("{hook}", h) for h in ("sync", "finalize", "customize")]
                suffix = "_total" if kind == "Counter" and not name.endswith("_total") else ""
                found |= {n + suffix for n in names}
    assert found, "the pattern no longer finds metric definitions"
    assert found - (coordinator() | worker()) == set()
