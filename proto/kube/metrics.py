"""The Kubernetes client's metrics, as client-go exports them (``k8s.io/component-base/
metrics/prometheus/restclient``), so dashboards built for Go controllers work unchanged.

``RestClientMetrics(registry)`` registers the families on ``registry`` and is the
``proto.kube.session.RequestMetrics`` a ``Session`` is given; each process (coordinator,
worker) registers it once on its own registry:

- ``rest_client_requests_total{code,method,host}``: every attempt, retries included, by the
  HTTP status code of its answer, or ``<error>`` when none came (connection refused or reset,
  a name that does not resolve, a TLS failure, a client-side timeout), as client-go counts
  them. ``method`` is the HTTP method (``GET`` for lists and watches too), ``host`` the API
  server's ``host:port``.
- ``rest_client_request_duration_seconds{verb,host}``: how long each attempt took until its
  response headers (a watch: until its stream opened), with client-go's buckets; ``verb`` is
  the HTTP method, as client-go has it.
- ``rest_client_rate_limiter_duration_seconds{verb,host}``: how long each attempt waited for
  the client-side rate limit (``--client-go-qps``); nothing is observed without a limit.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

ERROR_CODE = "<error>"
"""The ``code`` of an attempt that got no answer (client-go's)."""
BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
"""client-go's buckets for both histograms."""


class RestClientMetrics:
    """``proto.kube.session.RequestMetrics`` through prometheus_client (see the module
    docstring)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=registry,
        )
        self._duration = Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=BUCKETS,
            registry=registry,
        )
        self._throttled = Histogram(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=BUCKETS,
            registry=registry,
        )
        self._series: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}

    def attempted(self, *, host: str, method: str, status: int | None, seconds: float) -> None:
        code = ERROR_CODE if status is None else str(status)
        series = self._series.get((code, method, host))
        if series is None:  # labels() costs more than the observation itself: once per set
            series = self._series[(code, method, host)] = (
                self._requests.labels(code, method, host),
                self._duration.labels(method, host),
            )
        requests, duration = series
        requests.inc()
        duration.observe(seconds)

    def throttled(self, *, host: str, method: str, seconds: float) -> None:
        self._throttled.labels(method, host).observe(seconds)
