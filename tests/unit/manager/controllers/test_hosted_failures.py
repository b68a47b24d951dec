"""manager.controllers.hosted: what is reported when a controller cannot run, and when it is
tried again (each distinct reason once; nothing while discovery cannot tell yet)."""

from __future__ import annotations

from typing import Any

import pytest

from manager.controllers.hosted import MISSING_RETRY
from proto.kube.errors import ResourceNotFound, ResourceNotFoundYet
from proto.kube.resources import Resource
from tests.unit.manager.controllers.test_hosted import CCS, PODS, Discovery, World, cached

THINGS = Resource("example.com", "v1", "things", "Thing", True, subresources=("status",))
PLAIN_THINGS = Resource("example.com", "v1", "things", "Thing", True)


def composite(rv: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": "cc", "labels": {"shard": "a"}, "resourceVersion": rv},
        "spec": {
            "parentResource": {"apiVersion": "example.com/v1", "resource": "things"},
            "childResources": [{"apiVersion": "v1", "resource": "pods"}],
            "hooks": {"sync": {"webhook": {"url": "http://h/sync"}}},
        },
    }


class Changing(Discovery):
    """Discovery whose answer for ``things`` the test sets: a resource, an exception, or
    (None) not found."""

    def __init__(self) -> None:
        self.things: Resource | Exception | None = None

    async def resolve(self, api_version: str, *, resource: str) -> Resource:
        if resource != "things":
            return await super().resolve(api_version, resource=resource)
        if isinstance(self.things, Exception):
            raise self.things
        if self.things is None:
            raise ResourceNotFound("no resource 'things' in example.com/v1")
        return self.things


def world_with(discovery: Changing) -> World:
    world = World(discovery)
    world.informers.acquire(CCS).store.upsert(cached(composite()))
    return world


def reasons(world: World) -> list[tuple[str, str]]:
    return [(reason, message) for _, reason, message in world.recorder.events]


@pytest.mark.asyncio
async def test_each_distinct_reason_is_reported_once_also_a_later_one() -> None:
    discovery = Changing()
    world = world_with(discovery)
    await world.sync()
    await world.sync()  # the same reason again: not reported again
    assert reasons(world) == [
        (
            "CreateError",
            "cannot resolve a resource: no resource 'things' in example.com/v1",
        )
    ]
    # The CRD appears without the status subresource: a different reason, reported too,
    # in Metacontroller's words, although the controller object did not change.
    discovery.things = PLAIN_THINGS
    await world.sync()
    await world.sync()
    assert reasons(world)[1:] == [
        (
            "SyncError",
            "[cc] Sync error - ignoring, CRD [things.example.com] does not have subresource "
            "'Status' enabled",
        )
    ]
    discovery.things = THINGS
    await world.sync()
    assert [r for r, _ in reasons(world)] == ["CreateError", "SyncError", "Started"]
    assert ("CompositeController", "cc") in world.controllers.views


@pytest.mark.asyncio
async def test_nothing_is_reported_while_discovery_cannot_tell_and_it_is_asked_again_soon() -> None:
    discovery = Changing()
    discovery.things = ResourceNotFoundYet("not read since", retry_after=0.3)
    world = world_with(discovery)
    await world.sync()
    assert reasons(world) == [] and world.controllers.views == {}
    assert world.hosted._next_pass() == pytest.approx(0.3)
    discovery.things = THINGS  # what the re-read finds: the CRD created a moment ago
    await world.sync()
    assert [r for r, _ in reasons(world)] == ["Started"]
    assert world.hosted._next_pass() == 30.0


@pytest.mark.asyncio
async def test_a_controller_whose_resource_is_missing_is_retried_soon_then_less_often() -> None:
    discovery = Changing()
    world = world_with(discovery)
    waits = []
    for _ in range(8):
        await world.sync()
        waits.append(world.hosted._next_pass())
    assert waits == [MISSING_RETRY * 2**i for i in range(6)] + [30.0, 30.0]
    discovery.things = THINGS
    await world.sync()
    assert world.hosted._next_pass() == 30.0
    assert ("CompositeController", "cc") in world.controllers.views
    assert PODS in world.controllers.views[("CompositeController", "cc")].children
