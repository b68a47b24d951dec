"""Resource paths and discovery (aggregated, legacy fallback, refresh, resolve errors)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from proto.kube.errors import ResourceNotFound, ResourceNotFoundYet, ServerError
from proto.kube.resources import AGGREGATED, Discovery, Resource, split_api_version
from tests.unit.proto.kube_fake import FakeApiServer, FakeClock, Reply, load_transcript, serve

PODS = Resource("", "v1", "pods", "Pod", namespaced=True, subresources=("status",))
GIZMOS = Resource("example.com", "v1", "gizmos", "Gizmo", namespaced=False)


def test_resource_paths() -> None:
    assert PODS.api_version == "v1" and GIZMOS.api_version == "example.com/v1"
    assert PODS.path() == "/api/v1/pods"
    assert PODS.path("ns") == "/api/v1/namespaces/ns/pods"
    assert PODS.path("ns", "p") == "/api/v1/namespaces/ns/pods/p"
    assert PODS.path("ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert GIZMOS.path() == "/apis/example.com/v1/gizmos"
    assert GIZMOS.path(name="system:g") == "/apis/example.com/v1/gizmos/system%3Ag"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: GIZMOS.path("ns"), "cluster-scoped"),
        (lambda: PODS.path(name="p"), "needs a namespace"),
        (lambda: PODS.path("ns", subresource="status"), "object name"),
        (lambda: split_api_version("a/b/c"), "apiVersion"),
        (lambda: split_api_version(""), "apiVersion"),
    ],
)
def test_bad_paths_are_refused(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def _discovery_steps(shared_dir: Path) -> list[dict[str, Any]]:
    return load_transcript(shared_dir, "01-discovery.json")


def _aggregated_server(shared_dir: Path) -> FakeApiServer:
    steps = _discovery_steps(shared_dir)
    server = FakeApiServer()
    for index in (19, 18):  # aggregated /api and /apis
        step = steps[index]
        server.route("GET", step["request"]["path"], Reply.recorded(step["response"]))
    return server


def _legacy_server(shared_dir: Path) -> FakeApiServer:
    """A server that ignores the aggregated Accept and only has the legacy documents."""
    server = FakeApiServer()
    for index in (6, 7, 8, 10, 12, 13, 15):
        step = _discovery_steps(shared_dir)[index]
        server.route("GET", step["request"]["path"], Reply.recorded(step["response"]))
    return server


@pytest.mark.asyncio
async def test_aggregated_discovery_takes_two_requests(shared_dir: Path) -> None:
    server = _aggregated_server(shared_dir)
    async with serve(server) as session:
        discovery = Discovery(session)
        await discovery.refresh()
        deployments = await discovery.resolve("apps/v1", kind="Deployment")
        pods = await discovery.resolve("v1", resource="po")
        namespaces = await discovery.resolve("v1", resource="namespaces")
        widgets = await discovery.resolve("example.com/v1", resource="widgets")
    assert len(server.received) == 2
    assert all(AGGREGATED in r.headers["Accept"] for r in server.received)
    assert deployments.name == "deployments" and deployments.namespaced
    assert deployments.subresources == ("scale", "status")
    assert "watch" in deployments.verbs and deployments.short_names == ("deploy",)
    assert pods.kind == "Pod" and "status" in pods.subresources
    assert not namespaces.namespaced and namespaces.subresources == ("finalize", "status")
    assert widgets == Resource(
        group="example.com",
        version="v1",
        name="widgets",
        kind="Widget",
        namespaced=True,
        verbs=("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"),
        subresources=("status",),
        short_names=("wd",),
    )


@pytest.mark.asyncio
async def test_legacy_discovery_when_the_server_has_no_aggregated_form(shared_dir: Path) -> None:
    server = _legacy_server(shared_dir)
    async with serve(server) as session:
        discovery = Discovery(session)
        await discovery.refresh()
        deployments = await discovery.resolve("apps/v1", kind="Deployment")
        leases = await discovery.resolve("coordination.k8s.io/v1", resource="leases")
        pods = await discovery.resolve("v1", kind="Pod")
        crds = await discovery.resolve(
            "apiextensions.k8s.io/v1", resource="customresourcedefinitions"
        )
    assert deployments.subresources == ("scale", "status") and deployments.namespaced
    assert leases.kind == "Lease"
    assert pods.name == "pods" and "eviction" in pods.subresources
    assert not crds.namespaced
    paths = {r.path for r in server.received}
    assert {"/api", "/api/v1", "/apis", "/apis/apps/v1", "/apis/example.com/v1"} <= paths
    # subresources are folded into their resource, never resolvable on their own
    assert all("/" not in r.name for r in discovery.resources)


@pytest.mark.asyncio
async def test_406_falls_back_to_plain_json(shared_dir: Path) -> None:
    steps = _discovery_steps(shared_dir)
    server = _legacy_server(shared_dir)
    not_acceptable = Reply.recorded(steps[22]["response"])
    for path in ("/api", "/apis"):
        server.route("GET", path, not_acceptable, accept=f"{AGGREGATED},application/json")
    async with serve(server) as session:
        discovery = Discovery(session)
        await discovery.refresh()
        assert (await discovery.resolve("apps/v1", resource="deployments")).kind == "Deployment"


@pytest.mark.asyncio
async def test_a_failing_group_version_is_skipped(shared_dir: Path) -> None:
    server = _legacy_server(shared_dir)
    server.route("GET", "/apis/coordination.k8s.io/v1", Reply(status=503, body=b"unavailable"))
    async with serve(server) as session:
        discovery = Discovery(session)
        await discovery.refresh()
        assert (await discovery.resolve("apps/v1", kind="Deployment")).name == "deployments"
        with pytest.raises(ResourceNotFound, match=r"does not serve coordination\.k8s\.io/v1"):
            await discovery.resolve("coordination.k8s.io/v1", kind="Lease")


def _with_gizmos(body: dict[str, Any]) -> dict[str, Any]:
    """The legacy ``/apis/example.com/v1`` document once the Gizmo CRD is served."""
    gizmo = {
        "name": "gizmos",
        "singularName": "gizmo",
        "namespaced": False,
        "kind": "Gizmo",
        "verbs": ["get", "list", "watch"],
    }
    status = {"name": "gizmos/status", "namespaced": False, "kind": "Gizmo", "verbs": ["get"]}
    return {**body, "resources": [*body["resources"], gizmo, status]}


def _example_v1(shared_dir: Path) -> dict[str, Any]:
    body: dict[str, Any] = _discovery_steps(shared_dir)[15]["response"]["body"]
    return body


GIZMOS_FOUND = Resource(
    "example.com",
    "v1",
    "gizmos",
    "Gizmo",
    namespaced=False,
    verbs=("get", "list", "watch"),
    subresources=("status",),
)


@pytest.mark.asyncio
async def test_a_miss_rereads_its_group_version_at_once(shared_dir: Path) -> None:
    """A CRD created after the last read resolves at the first attempt: one request for its
    group/version's own document, not the whole discovery again."""
    server = _aggregated_server(shared_dir)
    clock = FakeClock()
    async with serve(server) as session:
        discovery = Discovery(session, clock=clock)
        await discovery.refresh()
        server.route(
            "GET", "/apis/example.com/v1", Reply.json(200, _with_gizmos(_example_v1(shared_dir)))
        )
        clock.time += 0.5
        assert await discovery.resolve("example.com/v1", kind="Gizmo") == GIZMOS_FOUND
        assert await discovery.resolve("example.com/v1", resource="widgets")
    assert [r.path for r in server.received] == ["/api", "/apis", "/apis/example.com/v1"]


@pytest.mark.asyncio
async def test_rereads_are_rate_limited_per_group_version(shared_dir: Path) -> None:
    server = _aggregated_server(shared_dir)
    server.route("GET", "/apis/example.com/v1", Reply.json(200, _example_v1(shared_dir)))
    clock = FakeClock()
    async with serve(server) as session:
        discovery = Discovery(session, clock=clock, min_refresh_interval=0.5)
        await discovery.refresh()
        clock.time += 1.0
        with pytest.raises(ResourceNotFound) as caught:
            await discovery.resolve("example.com/v1", kind="Gizmo")
        assert type(caught.value) is ResourceNotFound  # read after it was asked for: for sure
        assert str(caught.value) == (
            "no kind 'Gizmo' in example.com/v1 (example.com/v1 serves: widgets)"
        )
        assert len(server.requests_to("/apis/example.com/v1")) == 1

        # Within the interval: the same miss again is still sure (that read came after it was
        # first asked for), without a request.
        clock.time += 0.1
        with pytest.raises(ResourceNotFound) as caught:
            await discovery.resolve("example.com/v1", kind="Gizmo")
        assert type(caught.value) is ResourceNotFound
        # Another resource first asked for now: that read may predate it. Not yet an answer.
        with pytest.raises(ResourceNotFoundYet) as not_yet:
            await discovery.resolve("example.com/v1", resource="gadgets")
        assert not_yet.value.retry_after == pytest.approx(0.4)
        assert len(server.requests_to("/apis/example.com/v1")) == 1
        # Another group/version is not held back.
        with pytest.raises(ResourceNotFound, match=r"does not serve example\.com/v2"):
            await discovery.resolve("example.com/v2", resource="widgets")
        assert len(server.requests_to("/apis/example.com/v2")) == 1

        # Once the interval has passed, the miss reads again, and its answer is sure.
        server.route(
            "GET", "/apis/example.com/v1", Reply.json(200, _with_gizmos(_example_v1(shared_dir)))
        )
        clock.time += 0.4
        with pytest.raises(ResourceNotFound) as caught:
            await discovery.resolve("example.com/v1", resource="gadgets")
        assert type(caught.value) is ResourceNotFound
        assert "serves: gizmos, widgets" in str(caught.value)
        assert await discovery.resolve("example.com/v1", kind="Gizmo") == GIZMOS_FOUND
    assert len(server.requests_to("/apis/example.com/v1")) == 2


@pytest.mark.asyncio
async def test_concurrent_misses_share_one_read_and_a_failed_read_counts_as_none(
    shared_dir: Path,
) -> None:
    server = _aggregated_server(shared_dir)
    server.route(
        "GET",
        "/apis/example.com/v1",
        Reply(status=503, body=b"unavailable"),
        Reply.json(200, _with_gizmos(_example_v1(shared_dir))),
    )
    clock = FakeClock()
    async with serve(server) as session:
        discovery = Discovery(session, clock=clock)
        await discovery.refresh()
        clock.time += 1.0
        failed = await asyncio.gather(
            discovery.resolve("example.com/v1", kind="Gizmo"),
            discovery.resolve("example.com/v1", resource="gadgets"),
            return_exceptions=True,
        )
        assert [type(e) for e in failed] == [ServerError, ServerError]
        assert len(server.requests_to("/apis/example.com/v1")) == 1
        # The failed read did not count: the next miss reads at once.
        assert await discovery.resolve("example.com/v1", kind="Gizmo") == GIZMOS_FOUND
    assert len(server.requests_to("/apis/example.com/v1")) == 2


@pytest.mark.asyncio
async def test_resolve_before_refresh_refreshes_and_names_unknown_groups(
    shared_dir: Path,
) -> None:
    async with serve(_aggregated_server(shared_dir)) as session:
        discovery = Discovery(session)
        with pytest.raises(ResourceNotFound, match=r"does not serve nonexistent\.example\.org/v1"):
            await discovery.resolve("nonexistent.example.org/v1", resource="things")
        assert discovery.resources  # the miss refreshed
        with pytest.raises(ValueError, match="exactly one"):
            await discovery.resolve("v1")
