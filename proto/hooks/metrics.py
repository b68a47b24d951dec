"""Webhook metrics under Metacontroller's names, so existing dashboards keep working.

For each hook name ``<hook>`` (``sync``, ``finalize``, ``customize``) one metric family of each:

- ``metacontroller_<hook>_requests_total{code,method}``: answered requests by status code
  (``"200"``, ``"429"``...); ``method`` is ``"post"`` (Go's promhttp spelling). Requests that
  got no HTTP answer (timeouts, refused connections) are not counted, as in promhttp.
- ``metacontroller_<hook>_request_duration_histogram_seconds{method}``: latency of answered
  requests, including reading the body, with the default buckets (.005 ... 10 s).
- ``metacontroller_<hook>_in_flight_requests``: calls under way.

Metacontroller attaches ``url``, ``controller_name`` and ``controller_type`` as constant labels
of one collector per controller; here they are ordinary labels of the one family per hook,
which exposes the same series. The ``url`` label is the hook URL without ``user:password@``,
query string or fragment (``proto.runtime.redact.safe_url``), so no credential is exported.
Unlike Metacontroller, ``forget`` drops a deleted controller's series instead of exporting
them forever (calls still under way then record nothing more).
The DNS and TLS phase histograms are not exported.

``HookMetrics`` is the seam the executor calls; ``NoHookMetrics`` is the no-op default and
``PrometheusHookMetrics`` binds the families to an injected ``CollectorRegistry``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from proto.api.controllers import HookName

METHOD = "post"


@dataclass(slots=True)
class _Call:
    """The series of one hook of one controller at one URL, each resolved once, when first
    needed (the latency and request series appear with the first answer, as in promhttp)."""

    in_flight: Gauge
    duration: Histogram | None = None
    requests: dict[int, Counter] = field(default_factory=dict)  # by status code


class HookMetrics(Protocol):
    def started(self, hook: HookName, labels: tuple[str, str, str]) -> None:
        """A call begins; ``labels`` are (url, controller_name, controller_type)."""

    def finished(
        self, hook: HookName, labels: tuple[str, str, str], *, code: int | None, seconds: float
    ) -> None:
        """A call ends; ``code`` is ``None`` when no HTTP answer came."""

    def forget(self, *, controller_type: str, controller_name: str) -> None:
        """Drop every series of a controller that no longer exists."""


class NoHookMetrics:
    """Records nothing."""

    def started(self, hook: HookName, labels: tuple[str, str, str]) -> None:
        pass

    def finished(
        self, hook: HookName, labels: tuple[str, str, str], *, code: int | None, seconds: float
    ) -> None:
        pass

    def forget(self, *, controller_type: str, controller_name: str) -> None:
        pass


class PrometheusHookMetrics:
    """The hook metric families, registered once in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ("url", "controller_name", "controller_type")
        self._requests = {
            hook: Counter(
                f"metacontroller_{hook}_requests",
                "A counter for outgoing requests from the wrapped client.",
                ("code", "method", *labels),
                registry=registry,
            )
            for hook in HookName
        }
        self._durations = {
            hook: Histogram(
                f"metacontroller_{hook}_request_duration_histogram_seconds",
                "A histogram of outgoing request latencies.",
                ("method", *labels),
                registry=registry,
            )
            for hook in HookName
        }
        self._in_flight = {
            hook: Gauge(
                f"metacontroller_{hook}_in_flight_requests",
                "A gauge of in-flight outgoing requests for the wrapped client.",
                labels,
                registry=registry,
            )
            for hook in HookName
        }
        # (hook, (url, controller_name, controller_type)) -> that call's series, resolved once
        self._calls: dict[tuple[HookName, tuple[str, str, str]], _Call] = {}

    def started(self, hook: HookName, labels: tuple[str, str, str]) -> None:
        call = self._calls.get((hook, labels))
        if call is None:
            call = self._calls[(hook, labels)] = _Call(self._in_flight[hook].labels(*labels))
        call.in_flight.inc()

    def finished(
        self, hook: HookName, labels: tuple[str, str, str], *, code: int | None, seconds: float
    ) -> None:
        call = self._calls.get((hook, labels))
        if call is None:
            return  # the controller was forgotten while the call ran: record nothing more
        call.in_flight.dec()
        if code is None:
            return
        requests = call.requests.get(code)
        if requests is None:
            requests = call.requests[code] = self._requests[hook].labels(str(code), METHOD, *labels)
        requests.inc()
        if call.duration is None:
            call.duration = self._durations[hook].labels(METHOD, *labels)
        call.duration.observe(seconds)

    def forget(self, *, controller_type: str, controller_name: str) -> None:
        ours = (controller_name, controller_type)
        for hook, labels in [key for key in self._calls if key[1][1:] == ours]:
            call = self._calls.pop((hook, labels))
            self._in_flight[hook].remove(*labels)
            if call.duration is not None:
                self._durations[hook].remove(METHOD, *labels)
            for code in call.requests:
                self._requests[hook].remove(str(code), METHOD, *labels)
