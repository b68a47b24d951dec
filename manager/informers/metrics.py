"""Informer metrics: what each informer reports, exported through prometheus_client.

Series, all labelled ``resource`` (``<plural>.<version>.<group>``, e.g. ``deployments.v1.apps``,
``pods.v1`` for the core group):

- ``metashard_informer_objects``: objects in the store.
- ``metashard_informer_events_total{type}``: changes applied to the store, by the type handed
  to the event handlers (``ADDED``, ``MODIFIED``, ``DELETED``; synthetic deletes of a relist
  included) and ``BOOKMARK`` for bookmarks.
- ``metashard_informer_relists_total{reason}``: full lists: ``initial``, ``expired`` (410),
  ``error`` (an object this code could not read) or ``selector`` (the label selector changed).
- ``metashard_informer_watch_errors_total{reason}``: failed list or watch attempts, by the
  API Status reason (``Unauthorized``, ``Forbidden``, ``InternalError``, ...) or the client
  error class (``TransportError``, ``StreamError``).
- ``metashard_informer_watch_healthy``: 0 while list/watch attempts fail, 1 otherwise.
- ``metashard_informer_synced``: 1 once the initial list is in the store.
- ``metashard_informer_last_resource_version``: the newest resourceVersion seen (events,
  bookmarks, lists), as a number.
- ``metashard_informer_handler_errors_total``: event handler calls that raised.

The informer holds one ``InformerMetrics`` bound to its resource, so the per-event calls do
not look labels up; the two gauges that change with every event (objects, last
resourceVersion) are read from the informer when scraped instead of being set per event.
``NO_INFORMER_METRICS`` records nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")

_M = TypeVar("_M", Gauge, Counter)


class InformerMetrics(Protocol):
    """What one informer reports."""

    def observe(
        self, *, objects: Callable[[], float], resource_version: Callable[[], float]
    ) -> None:
        """Read the store size and the newest resourceVersion from these when scraped."""
        ...

    def event(self, type: str) -> None:
        """A change of ``type`` was applied."""
        ...

    def relist(self, reason: str) -> None:
        """A full list started."""
        ...

    def watch_error(self, reason: str) -> None:
        """A list or watch attempt failed."""
        ...

    def handler_error(self) -> None:
        """An event handler raised."""
        ...

    def state(self, *, synced: bool, healthy: bool) -> None:
        """Readiness and list/watch health changed."""
        ...

    def forget(self) -> None:
        """The informer stopped: remove its series."""
        ...


class InformerMetricsFactory(Protocol):
    """Hands out the metrics of each informer."""

    def for_resource(self, resource: str) -> InformerMetrics: ...


class _NoMetrics:
    __slots__ = ()

    def observe(
        self, *, objects: Callable[[], float], resource_version: Callable[[], float]
    ) -> None:
        pass

    def event(self, type: str) -> None:
        pass

    def relist(self, reason: str) -> None:
        pass

    def watch_error(self, reason: str) -> None:
        pass

    def handler_error(self) -> None:
        pass

    def state(self, *, synced: bool, healthy: bool) -> None:
        pass

    def forget(self) -> None:
        pass

    def for_resource(self, resource: str) -> InformerMetrics:
        return self


NO_INFORMER_METRICS = _NoMetrics()
"""Records nothing; both an ``InformerMetrics`` and an ``InformerMetricsFactory``."""


@dataclass(frozen=True, slots=True)
class _Families:
    objects: Gauge
    events: Counter
    relists: Counter
    watch_errors: Counter
    healthy: Gauge
    synced: Gauge
    last_rv: Gauge
    handler_errors: Counter


class _ResourceMetrics:
    __slots__ = ("_events", "_families", "_resource", "_series")

    def __init__(self, families: _Families, resource: str) -> None:
        self._families = families
        self._resource = resource
        # Every (family, extra label) this informer created, so forget() removes exactly those.
        self._series: set[tuple[Gauge | Counter, str | None]] = set()
        self._events = {t: self._child(families.events, t) for t in EVENT_TYPES}
        self._child(families.handler_errors)
        self.state(synced=False, healthy=True)

    def _child(self, family: _M, extra: str | None = None) -> _M:
        self._series.add((family, extra))
        if extra is None:
            return family.labels(self._resource)
        return family.labels(self._resource, extra)

    def observe(
        self, *, objects: Callable[[], float], resource_version: Callable[[], float]
    ) -> None:
        self._child(self._families.objects).set_function(objects)
        self._child(self._families.last_rv).set_function(resource_version)

    def event(self, type: str) -> None:
        counter = self._events.get(type)
        if counter is None:
            counter = self._events[type] = self._child(self._families.events, type)
        counter.inc()

    def relist(self, reason: str) -> None:
        self._child(self._families.relists, reason).inc()

    def watch_error(self, reason: str) -> None:
        self._child(self._families.watch_errors, reason).inc()

    def handler_error(self) -> None:
        self._child(self._families.handler_errors).inc()

    def state(self, *, synced: bool, healthy: bool) -> None:
        self._child(self._families.synced).set(int(synced))
        self._child(self._families.healthy).set(int(healthy))

    def forget(self) -> None:
        for family, extra in self._series:
            with contextlib.suppress(KeyError):
                if extra is None:
                    family.remove(self._resource)
                else:
                    family.remove(self._resource, extra)
        self._series.clear()


class PrometheusInformerMetrics:
    """Registers the informer families once on ``registry`` (tests pass their own)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self._families = _Families(
            objects=Gauge(
                "metashard_informer_objects",
                "Objects in the informer's store.",
                ["resource"],
                registry=registry,
            ),
            events=Counter(
                "metashard_informer_events_total",
                "Changes applied to the informer's store, by type.",
                ["resource", "type"],
                registry=registry,
            ),
            relists=Counter(
                "metashard_informer_relists_total",
                "Full lists of the resource, by reason.",
                ["resource", "reason"],
                registry=registry,
            ),
            watch_errors=Counter(
                "metashard_informer_watch_errors_total",
                "Failed list or watch attempts, by reason.",
                ["resource", "reason"],
                registry=registry,
            ),
            healthy=Gauge(
                "metashard_informer_watch_healthy",
                "0 while list/watch attempts of the resource fail, else 1.",
                ["resource"],
                registry=registry,
            ),
            synced=Gauge(
                "metashard_informer_synced",
                "1 once the informer's initial list is in its store.",
                ["resource"],
                registry=registry,
            ),
            last_rv=Gauge(
                "metashard_informer_last_resource_version",
                "The newest resourceVersion the informer has seen.",
                ["resource"],
                registry=registry,
            ),
            handler_errors=Counter(
                "metashard_informer_handler_errors_total",
                "Event handler calls that raised.",
                ["resource"],
                registry=registry,
            ),
        )

    def for_resource(self, resource: str) -> InformerMetrics:
        return _ResourceMetrics(self._families, resource)
