"""Reading a test's private Prometheus registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry


def label_values(registry: CollectorRegistry, *, prefix: str, label: str) -> set[str | None]:
    """Every value of ``label`` among the samples of the families named ``prefix...``."""
    return {
        sample.labels.get(label)
        for family in registry.collect()
        if family.name.startswith(prefix)
        for sample in family.samples
    }
