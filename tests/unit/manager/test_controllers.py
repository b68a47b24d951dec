"""manager.controllers: which controllers run, what is reported, and who cleans up."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
import structlog

from manager.controllers import Controllers
from manager.store import Cached, Store
from proto.api.selectors import parse
from proto.kube.errors import ResourceNotFound
from proto.kube.resources import Resource

DCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "decoratorcontrollers", "DecoratorController", False
)
CCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", "CompositeController", False
)
PODS = Resource("", "v1", "pods", "Pod", True, subresources=("status",))
SERVICES = Resource("", "v1", "services", "Service", True)
FINALIZER = "metacontroller.io/decoratorcontroller-dc"


class Informer:
    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self.store = Store()

    def add_handler(self, handler: Any) -> None:
        pass

    def remove_handler(self, handler: Any) -> None:
        pass

    async def wait_synced(self) -> None:
        pass


class Informers:
    def __init__(self) -> None:
        self.informers: dict[str, Informer] = {}

    def acquire(self, resource: Resource) -> Informer:
        return self.informers.setdefault(resource.name, Informer(resource))

    def get(self, resource: Resource) -> Informer | None:
        return self.informers.get(resource.name)

    async def release(self, resource: Resource) -> None:
        pass


class Discovery:
    known = {r.name: r for r in (DCS, CCS, PODS, SERVICES)}

    async def resolve(self, api_version: str, *, resource: str) -> Resource:
        if resource not in self.known:
            raise ResourceNotFound(404, {"message": f"no {resource}"})
        return self.known[resource]


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def emit(self, obj: Any, type: str, reason: str, message: str) -> None:
        self.events.append((obj["metadata"]["name"], reason, message))


class Writer:
    def __init__(self) -> None:
        self.patched: list[tuple[str, Any]] = []

    async def get(self, resource: Resource, name: str, **_: Any) -> dict[str, Any]:
        raise AssertionError("no conflict expected")

    async def patch(self, resource: Resource, name: str, patch: Any, **_: Any) -> dict[str, Any]:
        self.patched.append((name, patch))
        return {}


def cached(obj: dict[str, Any]) -> Cached:
    obj["metadata"].setdefault("resourceVersion", "1")
    return Cached.from_object(obj, orjson.dumps(obj))


def decorator(shard: str, *, method: str = "InPlace", rv: str = "1") -> Cached:
    return cached(
        {
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "DecoratorController",
            "metadata": {"name": "dc", "labels": {"shard": shard}, "resourceVersion": rv},
            "spec": {
                "resources": [{"apiVersion": "v1", "resource": "pods"}],
                "attachments": [
                    {
                        "apiVersion": "v1",
                        "resource": "services",
                        "updateStrategy": {"method": method},
                    }
                ],
                "hooks": {
                    "sync": {"webhook": {"url": "http://h/sync"}},
                    "finalize": {"webhook": {"url": "http://h/finalize"}},
                },
            },
        }
    )


class World:
    def __init__(self) -> None:
        self.informers = Informers()
        self.recorder = Recorder()
        self.writer = Writer()
        self.changes: list[set[tuple[str, str]]] = []

        async def on_change(views: Any, added: set[tuple[str, str]]) -> None:
            self.changes.append(set(views))

        self.controllers = Controllers(
            discovery=Discovery(),  # type: ignore[arg-type]
            informers=self.informers,  # type: ignore[arg-type]
            recorder=self.recorder,  # type: ignore[arg-type]
            handler=lambda resource: lambda *_: None,
            on_change=on_change,
            writer=self.writer,
            selector=parse("shard=a"),
        )

    async def sync(self) -> None:
        await self.controllers._watch_controllers()
        await self.controllers._sync()
        await asyncio.gather(*self.controllers._tasks)

    def put(self, obj: Cached) -> None:
        self.informers.acquire(DCS).store.upsert(obj)


@pytest.mark.asyncio
async def test_only_selected_controllers_run_and_only_deleted_ones_lose_finalizers() -> None:
    world = World()
    world.put(decorator("b"))
    await world.sync()
    assert world.controllers.views == {} and world.recorder.events == []  # not ours: silent
    world.put(decorator("a", rv="2"))
    await world.sync()
    assert set(world.controllers.views) == {("DecoratorController", "dc")}
    assert [e[1] for e in world.recorder.events] == ["Started"]
    pod = {"metadata": {"name": "p", "namespace": "ns", "finalizers": [FINALIZER, "other"]}}
    world.informers.acquire(PODS).store.upsert(cached(pod))
    # Moved to another installation: stopped, but its finalizers are that one's business.
    world.put(decorator("b", rv="3"))
    await world.sync()
    assert world.controllers.views == {} and world.writer.patched == []
    # Back, then deleted: the finalizer leaves the objects that carry it.
    world.put(decorator("a", rv="4"))
    await world.sync()
    world.informers.acquire(DCS).store.delete("", "dc")
    await world.sync()
    assert world.changes[-1] == set()
    assert world.writer.patched == [
        ("p", {"metadata": {"finalizers": ["other"], "resourceVersion": "1"}})
    ]


@pytest.mark.asyncio
async def test_unsupported_fields_are_reported_when_loaded_and_the_controller_runs() -> None:
    world = World()
    world.put(decorator("a", method="RollingRecreate"))
    await world.sync()
    assert set(world.controllers.views) == {("DecoratorController", "dc")}
    reasons = [(e[1], e[2].split(":")[0]) for e in world.recorder.events]
    assert reasons == [
        ("Started", "controller started"),
        ("UnsupportedField", "spec.attachments[0].updateStrategy.method"),
    ]
    await world.sync()  # unchanged object: not reported again
    assert len(world.recorder.events) == 2


@pytest.mark.asyncio
async def test_a_started_controller_is_logged_and_again_when_its_informers_synced() -> None:
    world = World()
    synced = asyncio.Event()

    async def wait_synced() -> None:
        await synced.wait()

    world.put(decorator("a"))
    with structlog.testing.capture_logs() as logs:
        await world.controllers._watch_controllers()
        world.informers.acquire(SERVICES).wait_synced = wait_synced  # type: ignore[method-assign]
        await world.controllers._sync()
        await asyncio.sleep(0)
        events = [e["event"] for e in logs]
        assert "controller started" in events
        assert "controller informers synced" not in events  # the Services are not listed yet
        synced.set()
        await asyncio.gather(*world.controllers._tasks)
    done = [e for e in logs if e["event"] == "controller informers synced"]
    assert [(e["controller"], e["kind"], e["log_level"]) for e in done] == [
        ("dc", "DecoratorController", "info")
    ]
