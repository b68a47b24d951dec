"""proto.kube.metrics: client-go's rest_client_* families, fed by a Session's attempts."""

from __future__ import annotations

import socket

import pytest
from prometheus_client import CollectorRegistry

from proto.kube import errors
from proto.kube.cluster import ClusterConfig
from proto.kube.metrics import RestClientMetrics
from proto.kube.session import Session
from tests.unit.proto.kube_fake import FakeApiServer, FakeClock, Reply, serve

PATH = "/api/v1/namespaces/default/configmaps/c"


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


@pytest.mark.asyncio
async def test_every_attempt_is_counted_by_code_method_and_host_and_timed() -> None:
    registry = CollectorRegistry()
    server = FakeApiServer()
    server.route("GET", PATH, Reply.json(200, {"kind": "ConfigMap"}))
    server.route("DELETE", PATH, Reply.json(404, {"kind": "Status", "code": 404}))
    async with serve(server, metrics=RestClientMetrics(registry)) as session:
        host = server.url.removeprefix("http://")
        await session.request("GET", PATH)
        await session.request("GET", PATH)
        with pytest.raises(errors.NotFound):
            await session.request("DELETE", PATH)
    assert sample(registry, "rest_client_requests_total", code="200", method="GET", host=host) == 2
    assert (
        sample(registry, "rest_client_requests_total", code="404", method="DELETE", host=host) == 1
    )
    count = "rest_client_request_duration_seconds_count"
    assert sample(registry, count, verb="GET", host=host) == 2
    assert sample(registry, count, verb="DELETE", host=host) == 1
    # No client-side limit (qps 0): nothing waited for one.
    assert (
        sample(registry, "rest_client_rate_limiter_duration_seconds_count", verb="GET", host=host)
        is None
    )


@pytest.mark.asyncio
async def test_an_attempt_without_an_answer_counts_as_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    registry = CollectorRegistry()
    config = ClusterConfig(server=f"https://127.0.0.1:{port}", insecure_skip_tls_verify=True)
    async with Session(config, qps=0, metrics=RestClientMetrics(registry)) as session:
        with pytest.raises(errors.TransportError):
            await session.request("GET", "/api")
    host = f"127.0.0.1:{port}"
    assert (
        sample(registry, "rest_client_requests_total", code="<error>", method="GET", host=host) == 1
    )


@pytest.mark.asyncio
async def test_the_rate_limit_wait_is_observed() -> None:
    registry = CollectorRegistry()
    server = FakeApiServer()
    server.route("GET", PATH, Reply.json(200, {"kind": "ConfigMap"}))
    clock = FakeClock()
    async with serve(
        server, clock=clock, qps=2, burst=1, metrics=RestClientMetrics(registry)
    ) as session:
        host = server.url.removeprefix("http://")
        for _ in range(3):
            await session.request("GET", PATH)
    waited = "rest_client_rate_limiter_duration_seconds"
    assert sample(registry, f"{waited}_count", verb="GET", host=host) == 3
    assert sample(registry, f"{waited}_sum", verb="GET", host=host) == pytest.approx(1.0)
