"""Resource paths and discovery (aggregated, legacy fallback, refresh, resolve errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proto.kube.errors import ResourceNotFound
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
    items = []
    for group in body["items"]:
        if group["metadata"]["name"] == "example.com":
            version = group["versions"][0]
            gizmo = {
                "resource": "gizmos",
                "responseKind": {"group": "example.com", "version": "v1", "kind": "Gizmo"},
                "scope": "Cluster",
                "singularResource": "gizmo",
                "verbs": ["get", "list", "watch"],
            }
            version = {**version, "resources": [*version["resources"], gizmo]}
            group = {**group, "versions": [version]}
        items.append(group)
    return {**body, "items": items}


@pytest.mark.asyncio
async def test_refresh_picks_up_a_new_crd_and_misses_refresh_at_most_every_interval(
    shared_dir: Path,
) -> None:
    steps = _discovery_steps(shared_dir)
    apis = steps[18]["response"]
    server = _aggregated_server(shared_dir)
    clock = FakeClock()
    async with serve(server) as session:
        discovery = Discovery(session, clock=clock, min_refresh_interval=5.0)
        await discovery.refresh()
        with pytest.raises(ResourceNotFound) as caught:
            await discovery.resolve("example.com/v1", kind="Gizmo")
        assert "no kind 'Gizmo' in example.com/v1 (example.com/v1 serves: widgets)" in str(
            caught.value
        )
        # the CRD appears: a miss within the interval does not ask the server again
        server.route(
            "GET", "/apis", Reply.json(200, _with_gizmos(apis["body"]), content_type=AGGREGATED)
        )
        with pytest.raises(ResourceNotFound):
            await discovery.resolve("example.com/v1", kind="Gizmo")
        assert len(server.requests_to("/apis")) == 1
        clock.time += 5.0
        gizmos = await discovery.resolve("example.com/v1", kind="Gizmo")
    assert gizmos == Resource(
        "example.com", "v1", "gizmos", "Gizmo", namespaced=False, verbs=("get", "list", "watch")
    )
    assert len(server.requests_to("/apis")) == 2


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
