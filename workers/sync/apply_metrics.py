"""Server-side apply counts per controller.

``metashard_ssa_applies_total{controller,result}``, ``controller`` as the work queue names it
(``<Kind>-<name>``), ``result`` in:

- ``sent``: an apply PATCH sent (a create or an update of a child or attachment),
- ``skipped``: no PATCH, because the apply cache holds the same body for the child's current
  uid and generation (or resourceVersion),
- ``dry_run``: an apply sent with ``dryRun=All`` (``Recreate`` and ``RollingRecreate``).

A controller's series are created at zero when it is first counted and removed by
``forget_controller``.
"""

from __future__ import annotations

import contextlib
import enum
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry, Counter


class ApplyResult(enum.StrEnum):
    SENT = "sent"
    SKIPPED = "skipped"
    DRY_RUN = "dry_run"


class ApplyMetrics(Protocol):
    def count(self, controller: str, result: ApplyResult) -> None:
        """One apply of ``controller`` ended as ``result``."""
        ...

    def forget_controller(self, controller: str) -> None:
        """Remove the series of ``controller``."""
        ...


class NoApplyMetrics:
    """The default: records nothing."""

    __slots__ = ()

    def count(self, controller: str, result: ApplyResult) -> None:
        pass

    def forget_controller(self, controller: str) -> None:
        pass


class PrometheusApplyMetrics:
    """``metashard_ssa_applies_total`` on ``registry``."""

    __slots__ = ("_known", "_total")

    def __init__(self, *, registry: CollectorRegistry = REGISTRY) -> None:
        self._total = Counter(
            "metashard_ssa_applies_total",
            "Server-side applies per controller: sent, skipped (cache hit) or dry runs",
            ("controller", "result"),
            registry=registry,
        )
        self._known: set[str] = set()

    def count(self, controller: str, result: ApplyResult) -> None:
        if controller not in self._known:
            self._known.add(controller)
            for each in ApplyResult:
                self._total.labels(controller, each)
        self._total.labels(controller, result).inc()

    def forget_controller(self, controller: str) -> None:
        self._known.discard(controller)
        for result in ApplyResult:
            with contextlib.suppress(KeyError):
                self._total.remove(controller, result)
