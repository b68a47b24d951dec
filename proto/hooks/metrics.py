"""Webhook metrics under Metacontroller's names, so existing dashboards keep working.

For each hook name ``<hook>`` (``sync``, ``finalize``, ``customize``) one metric family of each:

- ``metacontroller_<hook>_requests_total{code,method}``: every call, by outcome; ``method`` is
  ``"post"`` (Go's promhttp spelling). An answered call counts under its status code
  (``"200"``, ``"429"``...), as in Metacontroller, except a 200 whose body the hook contract's
  parser refused: ``"invalid-response"``. A call that got no HTTP answer counts under why
  (``"timeout"``, ``"dns"``, ``"connect"``, ``"tls"``, ``"transport"``, ``"too-large"``,
  ``"config"``: ``proto.hooks.errors``), where Metacontroller's promhttp counts nothing, so
  that a hook that is down shows in the series dashboards already read. Failure codes start
  with a letter, status codes with a digit.
- ``metacontroller_<hook>_request_duration_histogram_seconds{method}``: latency of calls that
  got an HTTP answer, including reading the body, with the default buckets (.005 ... 10 s).
- ``metacontroller_<hook>_in_flight_requests``: calls under way.

And metashard's own: ``metashard_hook_answers_reused_total{hook,url,controller_name,
controller_type}``, the calls not sent because an earlier answer to the same request was
still valid (its ``ttlSeconds``, ``proto.api.ttl``); they are not requests, so they are not in
the families above.

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
    needed (a request series with the first call of its code, the latency series with the
    first HTTP answer)."""

    in_flight: Gauge
    duration: Histogram | None = None
    requests: dict[str, Counter] = field(default_factory=dict)  # by code


class HookMetrics(Protocol):
    def started(self, hook: HookName, labels: tuple[str, str, str]) -> None:
        """A call begins; ``labels`` are (url, controller_name, controller_type)."""

    def finished(
        self,
        hook: HookName,
        labels: tuple[str, str, str],
        *,
        code: str | None,
        seconds: float | None,
    ) -> None:
        """A call ends with ``code`` (see the module docstring), ``None`` when the caller
        abandoned it; ``seconds`` is its latency, ``None`` when no HTTP answer came."""

    def reused(self, hook: HookName, labels: tuple[str, str, str]) -> None:
        """A call was answered by an earlier answer still valid: nothing was sent."""

    def forget(self, *, controller_type: str, controller_name: str) -> None:
        """Drop every series of a controller that no longer exists."""


class NoHookMetrics:
    """Records nothing."""

    def started(self, hook: HookName, labels: tuple[str, str, str]) -> None:
        pass

    def finished(
        self,
        hook: HookName,
        labels: tuple[str, str, str],
        *,
        code: str | None,
        seconds: float | None,
    ) -> None:
        pass

    def reused(self, hook: HookName, labels: tuple[str, str, str]) -> None:
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
        self._reused = Counter(
            "metashard_hook_answers_reused",
            "Hook calls not sent: an earlier answer to the same request was still valid "
            "(its ttlSeconds).",
            ("hook", *labels),
            registry=registry,
        )
        self._reused_series: set[tuple[HookName, tuple[str, str, str]]] = set()
        # (hook, (url, controller_name, controller_type)) -> that call's series, resolved once
        self._calls: dict[tuple[HookName, tuple[str, str, str]], _Call] = {}

    def started(self, hook: HookName, labels: tuple[str, str, str]) -> None:
        call = self._calls.get((hook, labels))
        if call is None:
            call = self._calls[(hook, labels)] = _Call(self._in_flight[hook].labels(*labels))
        call.in_flight.inc()

    def finished(
        self,
        hook: HookName,
        labels: tuple[str, str, str],
        *,
        code: str | None,
        seconds: float | None,
    ) -> None:
        call = self._calls.get((hook, labels))
        if call is None:
            return  # the controller was forgotten while the call ran: record nothing more
        call.in_flight.dec()
        if code is None:
            return
        requests = call.requests.get(code)
        if requests is None:
            requests = call.requests[code] = self._requests[hook].labels(code, METHOD, *labels)
        requests.inc()
        if seconds is None:
            return
        if call.duration is None:
            call.duration = self._durations[hook].labels(METHOD, *labels)
        call.duration.observe(seconds)

    def reused(self, hook: HookName, labels: tuple[str, str, str]) -> None:
        self._reused_series.add((hook, labels))
        self._reused.labels(hook.value, *labels).inc()

    def forget(self, *, controller_type: str, controller_name: str) -> None:
        ours = (controller_name, controller_type)
        for hook, labels in [key for key in self._reused_series if key[1][1:] == ours]:
            self._reused_series.discard((hook, labels))
            self._reused.remove(hook.value, *labels)
        for hook, labels in [key for key in self._calls if key[1][1:] == ours]:
            call = self._calls.pop((hook, labels))
            self._in_flight[hook].remove(*labels)
            if call.duration is not None:
                self._durations[hook].remove(METHOD, *labels)
            for code in call.requests:
                self._requests[hook].remove(code, METHOD, *labels)
