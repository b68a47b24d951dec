"""manager.kinds.composite: what a CompositeController's view watches."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from manager.controllers.view import Unusable, keeps_revisions
from manager.informers.store import Cached
from manager.kinds import Context
from manager.kinds.composite import KIND, CompositeView
from manager.settings import CoordinatorSettings
from proto.kube.errors import ResourceNotFound, ResourceNotFoundYet
from proto.kube.resources import Resource
from proto.runtime.flags import Common

THINGS = Resource("example.com", "v1", "things", "Thing", True, subresources=("status",))
PODS = Resource("", "v1", "pods", "Pod", True)
REVISIONS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "controllerrevisions", "ControllerRevision", True
)


class Discovery:
    def __init__(self, *known: Resource) -> None:
        self.known = {r.name: r for r in known}

    async def resolve(self, api_version: str, *, resource: str) -> Resource:
        if resource not in self.known:
            raise ResourceNotFound(f"no {resource}")
        return self.known[resource]


def controller(method: str) -> dict[str, Any]:
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": "cc", "uid": "u", "resourceVersion": "1"},
        "spec": {
            "parentResource": {"apiVersion": "example.com/v1", "resource": "things"},
            "childResources": [
                {"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": method}}
            ],
            "hooks": {"sync": {"webhook": {"url": "http://hook/sync"}}},
        },
    }


async def view_of(method: str, discovery: Discovery) -> CompositeView:
    obj = controller(method)
    raw = orjson.dumps(obj)
    settings = CoordinatorSettings(common=Common(cluster_revision_namespace="revs"))
    context = Context(discovery, settings)  # type: ignore[arg-type]
    view = await KIND.view(obj, Cached.from_object(obj, raw), context)
    assert isinstance(view, CompositeView)
    return view


@pytest.mark.asyncio
async def test_a_rolling_controller_also_watches_controller_revisions() -> None:
    rolling = await view_of("RollingRecreate", Discovery(THINGS, PODS, REVISIONS))
    assert rolling.children == (PODS, REVISIONS) and rolling.revisions is REVISIONS
    assert keeps_revisions(rolling) is not None
    assert rolling.cluster_revision_namespace == "revs"  # from the coordinator's settings
    assert [r.resource for r in rolling.definition.resources] == ["things", "pods"]
    plain = await view_of("Recreate", Discovery(THINGS, PODS))
    assert plain.children == (PODS,) and plain.revisions is None
    assert keeps_revisions(plain) is None


@pytest.mark.asyncio
async def test_a_rolling_controller_without_the_revision_crd_cannot_run() -> None:
    with pytest.raises(Unusable, match="controllerrevisions"):
        await view_of("RollingInPlace", Discovery(THINGS, PODS))


@pytest.mark.asyncio
async def test_a_parent_without_the_status_subresource_is_refused_in_metacontrollers_words() -> (
    None
):
    plain = Resource("example.com", "v1", "things", "Thing", True)
    with pytest.raises(Unusable) as refused:
        await view_of("Recreate", Discovery(plain, PODS))
    assert refused.value.reason == "SyncError"
    assert str(refused.value) == (
        "[cc] Sync error - ignoring, CRD [things.example.com] does not have subresource "
        "'Status' enabled"
    )


@pytest.mark.asyncio
async def test_a_resource_discovery_cannot_tell_about_yet_is_no_verdict() -> None:
    """``ResourceNotFoundYet`` passes through: the caller asks again instead of reporting."""

    class Lagging(Discovery):
        async def resolve(self, api_version: str, *, resource: str) -> Resource:
            raise ResourceNotFoundYet(f"no {resource} yet", retry_after=0.2)

    with pytest.raises(ResourceNotFoundYet):
        await view_of("Recreate", Lagging())
