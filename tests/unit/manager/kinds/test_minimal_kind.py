"""A kind is a small plug-in: a test-only kind without revisions or children implements the
coordinator's seam (``manager.kinds.Kind``, ``manager.controllers.view.ControllerView``) with
what it has, no stubs, and is hosted, routed and snapshotted by code that names no kind.

A real kind is one module of ``manager.kinds`` exposing ``KIND``; it also needs its member of
``proto.wire.ControllerKind`` and its API parser in ``proto.api``, which this test stands in
for with ``MINIMAL`` and ``Spec``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any, ClassVar, cast

import orjson
import pytest

from manager.controllers.hosted import Controllers
from manager.controllers.rbac import PARENT_VERBS, Needs, Resolve, resolved
from manager.controllers.running import ControllerSet
from manager.controllers.view import (
    ControllerView,
    SpecView,
    group_resource,
    keeps_revisions,
    resolve_all,
)
from manager.informers.informer import EventHandler
from manager.informers.store import Cached, Store
from manager.kinds import Context, Kind
from manager.routing.router import KeyIndex, Router
from manager.term.snapshots import parent_of, snapshot_of
from proto.api.controllers import Hook, HookName
from proto.api.endpoints import Settings
from proto.api.fields import Fields
from proto.api.selectors import Selector
from proto.kube.errors import ResourceNotFound
from proto.kube.resources import Resource
from proto.wire import ControllerDef, ControllerKind, ParentKey, Priority
from tests.unit.manager.informers.fakes import Stores


class OnlyHereKinds(StrEnum):
    MINIMAL = "MinimalController"


MINIMAL = cast(ControllerKind, OnlyHereKinds.MINIMAL)
MINIMALS = Resource("metacontroller.k8s.io", "v1alpha1", "minimalcontrollers", "Minimal", False)
THINGS = Resource("example.com", "v1", "things", "Thing", True, subresources=("status",))


@dataclass(frozen=True)
class Hooks:
    customize: Hook | None = None


@dataclass(frozen=True)
class Spec:
    """What the kind's API parser would give: every thing it names is a parent."""

    name: str
    uid: str
    api_version: str
    resource: str
    hooks: Hooks = Hooks()
    resync_period_seconds: float | None = None

    @property
    def finalizer(self) -> str:
        return f"metacontroller.io/minimal-{self.name}"

    def connection_settings(self) -> dict[HookName, Settings]:
        return {}


@dataclass(frozen=True, eq=False)
class MinimalView(SpecView[Spec]):
    spec: Spec
    raw: bytes
    resource_version: str
    parent: Resource
    children: tuple[Resource, ...] = ()
    connections: bytes = field(default=b"", repr=False)

    kind: ClassVar[ControllerKind] = MINIMAL

    @property
    def parents(self) -> tuple[Resource, ...]:
        return (self.parent,)

    @cached_property
    def definition(self) -> ControllerDef:
        return self._definition(self.parents)

    def parent_resource(self, key: ParentKey) -> Resource | None:
        return self.parent if key.resource == group_resource(self.parent) else None

    def handles(self, resource: Resource, parent: Cached) -> bool:
        return True

    def ignores_update(self, resource: Resource, old: Cached, new: Cached) -> bool:
        return False

    def watch_selector(self, resource: Resource) -> Selector | None:
        return None

    def owner_key(self, child: Cached) -> ParentKey | None:
        return None

    def may_adopt(self, orphan: Cached) -> bool:
        return False

    def adopts(self, parent: Cached, orphan: Cached) -> bool:
        return False

    def children_of(self, parent: Cached, resource: Resource, store: Store) -> tuple[bytes, ...]:
        return ()


class _Minimal:
    kind = MINIMAL
    resource = MINIMALS.name

    async def view(self, obj: dict[str, Any], cached: Cached, context: Context) -> ControllerView:
        spec = Spec(obj["metadata"]["name"], "uid", **obj["spec"])
        (parent,) = await resolve_all(context.discovery, [(spec.api_version, spec.resource)])
        return MinimalView(spec, cached.raw, cached.resource_version, parent)

    def needs(self, spec: Fields, obj: Mapping[str, Any], resolve: Resolve) -> Needs:
        return Needs((resolved(spec, resolve),), (), PARENT_VERBS, {})


KIND: Kind = _Minimal()


def cached(obj: dict[str, Any]) -> Cached:
    return Cached.from_object(obj, orjson.dumps(obj))


def thing(name: str) -> Cached:
    return cached(
        {"metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "1"}}
    )


class Informer:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.resource = MINIMALS

    def add_handler(self, handler: EventHandler) -> None:
        pass

    async def wait_synced(self) -> None:
        pass


class World:
    """Hosts the kind's controllers and routes their events, as a term does."""

    def __init__(self) -> None:
        self.stores = Stores(minimalcontrollers=Store(), things=Store())
        self.controllers = ControllerSet()
        self.keys = KeyIndex()
        self.pushed: list[ParentKey] = []
        self.router = Router(sink=self, keys=self.keys, stores=self.stores)
        self.hosted = Controllers(
            discovery=self,  # type: ignore[arg-type]
            informers=self,  # type: ignore[arg-type]
            recorder=self,  # type: ignore[arg-type]
            controllers=self.controllers,
            routes=self.router,
            listeners=[self.router],
            kinds=(KIND,),
        )

    # the API, the informers and the recorder, as the hosted controllers use them
    async def resolve(self, api_version: str, *, resource: str) -> Resource:
        for known in (MINIMALS, THINGS):
            if known.name == resource:
                return known
        raise ResourceNotFound(404, {"message": resource})

    def acquire(self, resource: Resource, *, selector: Selector | None = None) -> Informer:
        return Informer(self.stores[resource.name])

    def get(self, resource: Resource) -> Informer:
        return Informer(self.stores[resource.name])

    def store(self, resource: Resource) -> Store | None:
        return self.stores.store(resource)

    def emit(self, *args: Any) -> None:
        pass

    def push(self, key: ParentKey, priority: Priority) -> None:
        self.pushed.append(key)


@pytest.mark.asyncio
async def test_a_kind_without_revisions_is_hosted_routed_and_snapshotted() -> None:
    world = World()
    world.stores["things"].upsert(thing("a"))
    world.stores["minimalcontrollers"].upsert(
        cached(
            {
                "apiVersion": "metacontroller.k8s.io/v1alpha1",
                "kind": "MinimalController",
                "metadata": {"name": "m", "resourceVersion": "1"},
                "spec": {"api_version": "example.com/v1", "resource": "things"},
            }
        )
    )
    await world.hosted._watch_controllers()
    await world.hosted._sync()
    await asyncio.gather(*world.hosted._tasks)
    (view,) = world.controllers.views.values()
    assert isinstance(view, MinimalView) and keeps_revisions(view) is None
    key = ParentKey("MinimalController", "m", "things.example.com", "ns", "a")
    assert world.keys.keys_of(range(1024)) == (key,)  # the router indexed its parent

    new = thing("b")
    world.stores["things"].upsert(new)
    world.router.handler(THINGS)("ADDED", None, new, False)
    key_b = ParentKey("MinimalController", "m", "things.example.com", "ns", "b")
    assert world.pushed == [key_b]
    parent, children, related = snapshot_of(
        view, parent_of(view, key_b, world.stores), stores=world.stores
    )
    assert parent == new.raw and children == {} and related == {}
    assert [r.resource for r in view.definition.resources] == ["things"]


def test_the_views_of_a_kind_need_no_revision_members() -> None:
    spec = Spec("m", "uid", "example.com/v1", "things")
    view: ControllerView = MinimalView(spec, b"{}", "1", THINGS)  # mypy checks the protocol
    assert not hasattr(view, "revision_parents") and keeps_revisions(view) is None
