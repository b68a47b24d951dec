"""Leader-election metrics with client-go's names.

- ``leader_election_master_status{name}``: 1 while this process leads the lease ``name``,
  else 0 (client-go ``leaderelection/metrics.go``).
- ``leader_election_slowpath_total{name}``: renewals that fell from the fast path (an
  optimistic update from the cached lease) to the slow path (GET, then update).

``NO_LEADER_METRICS`` records nothing.
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge


class LeaderMetrics(Protocol):
    """What one elector reports."""

    def leading(self, value: bool) -> None:
        """This process leads (True) or does not (False)."""
        ...

    def slowpath(self) -> None:
        """A fast-path renewal failed and the slow path ran."""
        ...


class _NoMetrics:
    __slots__ = ()

    def leading(self, value: bool) -> None:
        pass

    def slowpath(self) -> None:
        pass

    def for_lease(self, name: str) -> LeaderMetrics:
        return self


NO_LEADER_METRICS = _NoMetrics()


class _LeaseMetrics:
    __slots__ = ("_slowpath", "_status")

    def __init__(self, status: Gauge, slowpath: Counter) -> None:
        self._status = status
        self._slowpath = slowpath
        status.set(0)

    def leading(self, value: bool) -> None:
        self._status.set(int(value))

    def slowpath(self) -> None:
        self._slowpath.inc()


class PrometheusLeaderMetrics:
    """Registers the families once on ``registry``; ``for_lease`` binds one lease name."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self._status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, "
            "0 indicates backup, 1 indicates master. 'name' is the string used to "
            "identify the lease.",
            ["name"],
            registry=registry,
        )
        self._slowpath = Counter(
            "leader_election_slowpath_total",
            "Total number of slow path exercised in renewing leader leases. 'name' is the "
            "string used to identify the lease.",
            ["name"],
            registry=registry,
        )

    def for_lease(self, name: str) -> LeaderMetrics:
        return _LeaseMetrics(self._status.labels(name), self._slowpath.labels(name))
