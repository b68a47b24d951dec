"""The coordinator's own metrics (``metashard_coordinator_*``); no-op without a registry."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

from proto.wire import Priority


class TermMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self._enabled = registry is not None
        if registry is None:
            return
        self._workers = Gauge(
            "metashard_coordinator_workers", "Workers that are members now.", registry=registry
        )
        self._keys = Counter(
            "metashard_coordinator_keys_pushed_total",
            "Parent keys pushed to workers, by priority.",
            ["priority"],
            registry=registry,
        )
        self._fetches = Counter(
            "metashard_coordinator_fetches_total",
            "Snapshot requests answered, by result (snapshot or the NACK reason).",
            ["result"],
            registry=registry,
        )
        self._barrier_timeouts = Counter(
            "metashard_coordinator_barrier_timeouts_total",
            "Snapshots sent before the cache had seen a worker's own writes (wait timed out).",
            registry=registry,
        )
        self._revoked = Counter(
            "metashard_coordinator_slots_revoked_total",
            "Slots taken from a live worker to move them to another one.",
            registry=registry,
        )
        self._slots = Gauge(
            "metashard_coordinator_worker_slots",
            "Slots each member worker owns.",
            ["worker"],
            registry=registry,
        )
        self._others = Gauge(
            "metashard_coordinator_other_managers",
            "Other coordinators seen acting on the same controllers (their presence Lease "
            "writes), besides this one.",
            registry=registry,
        )
        self._paused = Gauge(
            "metashard_coordinator_paused_parents",
            "Parents whose syncs are paused (metashard.io/paused on the parent or on its "
            "controller object), per controller.",
            ["controller"],
            registry=registry,
        )
        self._permits = Gauge(
            "metashard_coordinator_controller_permits",
            "Reconciles of a limited controller holding a permit now (running, or its key on "
            "its way to its worker).",
            ["controller"],
            registry=registry,
        )
        self._waiting = Gauge(
            "metashard_coordinator_controller_waiting",
            "Parent keys of a limited controller waiting for a permit.",
            ["controller"],
            registry=registry,
        )
        # Resolved once: these count every key and every fetch.
        self._keys_by_priority = {p: self._keys.labels(p.name.lower()) for p in Priority}
        self._fetches_by_result: dict[str, Counter] = {}

    def workers(self, count: int) -> None:
        if self._enabled:
            self._workers.set(count)

    def keys_pushed(self, priority: Priority, count: int = 1) -> None:
        if self._enabled:
            self._keys_by_priority[priority].inc(count)

    def fetch(self, result: str) -> None:
        if self._enabled:
            series = self._fetches_by_result.get(result)
            if series is None:
                series = self._fetches_by_result[result] = self._fetches.labels(result)
            series.inc()

    def barrier_timeout(self) -> None:
        if self._enabled:
            self._barrier_timeouts.inc()

    def revoked(self, slots: int) -> None:
        if self._enabled:
            self._revoked.inc(slots)

    def slots(self, counts: dict[str, int]) -> None:
        if not self._enabled:
            return
        self._slots.clear()
        for worker, count in counts.items():
            self._slots.labels(worker).set(count)

    def limited(self, counts: dict[str, tuple[int, int]]) -> None:
        """Per limited controller (``<Kind>/<name>``): (permits held, keys waiting)."""
        if not self._enabled:
            return
        self._permits.clear()
        self._waiting.clear()
        for controller, (held, waiting) in counts.items():
            self._permits.labels(controller).set(held)
            self._waiting.labels(controller).set(waiting)

    def other_managers(self, count: int) -> None:
        if self._enabled:
            self._others.set(count)

    def paused_parents(self, controller: str, count: Callable[[], float] | None) -> None:
        """``count()`` at each scrape as ``controller``'s paused parents; None: no series."""
        if not self._enabled:
            return
        if count is None:
            with contextlib.suppress(KeyError):
                self._paused.remove(controller)
            return
        self._paused.labels(controller).set_function(count)
