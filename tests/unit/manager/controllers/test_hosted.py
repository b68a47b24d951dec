"""manager.controllers.hosted: which controllers run, what is reported, and who cleans up."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from typing import Any

import orjson
import pytest
import structlog

from manager.controllers.hookrefs import HookReferences
from manager.controllers.hosted import Controllers
from manager.controllers.refusals import Refusals
from manager.controllers.running import ControllerSet
from manager.controllers.view import ControllerView
from manager.informers.informer import EventHandler
from manager.informers.store import Cached, Store
from manager.settings import CoordinatorSettings
from proto.api.controllers import HookName
from proto.api.endpoints import decode_connections
from proto.api.selectors import Selector
from proto.kube.errors import KubeError, NotFound, ResourceNotFound, ServerError, TransportError
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
        self.selectors: dict[str, Selector | None] = {}  # resource -> what the watch carries

    def acquire(self, resource: Resource, *, selector: Selector | None = None) -> Informer:
        self.selectors[resource.name] = selector
        return self.informers.setdefault(resource.name, Informer(resource))

    def reselect(self, resource: Resource, old: Selector | None, new: Selector | None) -> None:
        assert self.selectors[resource.name] == old
        self.selectors[resource.name] = new

    def watched(self) -> dict[str, str]:
        """What the watch of each parent and child resource carries ("": everything)."""
        return {
            name: str(selector or "")
            for name, selector in self.selectors.items()
            if name not in (DCS.name, CCS.name)
        }

    def get(self, resource: Resource) -> Informer | None:
        return self.informers.get(resource.name)

    def store(self, resource: Resource) -> Store | None:
        informer = self.informers.get(resource.name)
        return informer.store if informer is not None else None

    async def release(self, resource: Resource, *, selector: Selector | None = None) -> None:
        assert self.selectors.pop(resource.name, None) == selector


class Discovery:
    known = {r.name: r for r in (DCS, CCS, PODS, SERVICES)}
    failing: Exception | None = None  # raised for every controller's own resources

    async def resolve(self, api_version: str, *, resource: str) -> Resource:
        if self.failing is not None and resource not in (DCS.name, CCS.name):
            raise self.failing
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


class Secrets:
    """The API as ``manager.controllers.hookrefs`` reads it: Secrets by name."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, str]] = {}

    async def get(self, resource: Resource, name: str, **_: Any) -> dict[str, Any]:
        if name not in self.data:
            raise NotFound(404, {"message": f"secrets {name!r} not found"})
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in self.data[name].items()}
        return {"kind": "Secret", "metadata": {"name": name}, "data": encoded}


TOKEN_REF = {"name": "hook-token", "namespace": "ns", "key": "token"}


def decorator(
    shard: str,
    *,
    method: str = "InPlace",
    rv: str = "1",
    sync: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> Cached:
    metadata = {"name": "dc", "labels": {"shard": shard}, "resourceVersion": rv}
    return cached(
        {
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "DecoratorController",
            "metadata": {**metadata, "annotations": annotations or {}},
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
                    "sync": {"webhook": sync or {"url": "http://h/sync"}},
                    "finalize": {"webhook": {"url": "http://h/finalize"}},
                },
            },
        }
    )


class World:
    def __init__(
        self,
        discovery: Discovery | None = None,
        refusals: Refusals | None = None,
        *,
        narrow_watches: bool = True,
    ) -> None:
        self.informers = Informers()
        self.discovery = discovery if discovery is not None else Discovery()
        self.recorder = Recorder()
        self.writer = Writer()
        self.secrets = Secrets()
        self.references = HookReferences(self.secrets)
        self.changes: list[set[tuple[str, str]]] = []

        self.controllers = ControllerSet()
        self.hosted = Controllers(
            discovery=self.discovery,  # type: ignore[arg-type]
            informers=self.informers,  # type: ignore[arg-type]
            recorder=self.recorder,  # type: ignore[arg-type]
            controllers=self.controllers,
            routes=self,
            listeners=[self],
            writer=self.writer,
            settings=CoordinatorSettings(
                target_label_selector="shard=a", narrow_watches=narrow_watches
            ),
            references=self.references,
            refusals=refusals,
        )

    def handler(self, resource: Resource) -> EventHandler:
        return lambda *_: None

    def controllers_changed(
        self, views: Sequence[ControllerView], added: Sequence[ControllerView]
    ) -> None:
        self.changes.append({view.id for view in views})

    async def sync(self) -> None:
        await self.hosted._watch_controllers()
        await self.hosted._sync()
        await asyncio.gather(*self.hosted._tasks)

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
async def test_a_paused_controller_runs_and_says_so_and_an_unreadable_pause_is_a_warning() -> None:
    world = World()
    world.put(decorator("a", annotations={"metashard.io/paused": "true"}))
    await world.sync()
    assert set(world.controllers.views) == {("DecoratorController", "dc")}
    assert world.recorder.events[1:] == [
        (
            "dc",
            "Paused",
            'the syncs of its parents are paused (metashard.io/paused: "true"); a parent being '
            "deleted is still finalized",
        )
    ]
    world.put(decorator("a", rv="2", annotations={"metashard.io/paused": "on"}))
    await world.sync()
    assert world.recorder.events[3:] == [
        (
            "dc",
            "InvalidAnnotation",
            'annotation metashard.io/paused: \'on\' is neither "true" nor "false"; not paused',
        )
    ]
    world.put(decorator("a", rv="3", annotations={"metashard.io/paused": "false"}))
    await world.sync()
    assert [e[1] for e in world.recorder.events[4:]] == ["Started"]


@pytest.mark.asyncio
async def test_an_unparseable_limit_is_a_warning_and_the_controller_runs() -> None:
    world = World()
    limits = {
        "metashard.io/max-concurrent-reconciles": "lots",
        "metashard.io/reconciles-per-second": "5",
    }
    world.put(decorator("a", annotations=limits))
    await world.sync()
    assert set(world.controllers.views) == {("DecoratorController", "dc")}
    assert [(e[1], e[2]) for e in world.recorder.events] == [
        ("Started", "controller started"),
        (
            "InvalidAnnotation",
            "annotation metashard.io/max-concurrent-reconciles: 'lots' is not a positive "
            "integer; not limited by it",
        ),
    ]


@pytest.mark.asyncio
async def test_a_transient_api_error_keeps_the_running_view_and_backs_off() -> None:
    world = World()
    world.put(decorator("a"))
    await world.sync()
    running = world.controllers.views[("DecoratorController", "dc")]
    world.discovery.failing = ServerError(503, {"message": "etcd is slow"})
    world.put(decorator("a", rv="2"))  # an edit that cannot be resolved right now
    for backoff in (1.0, 2.0, 4.0):
        await world.sync()
        assert world.controllers.views == {("DecoratorController", "dc"): running}
        assert world.hosted._backoff == backoff
    assert [e[1] for e in world.recorder.events] == ["Started"]  # no verdict on the controller
    world.discovery.failing = TimeoutError()
    await world.sync()
    assert world.hosted._backoff == 8.0
    world.discovery.failing = None
    await world.sync()
    assert world.controllers.views[("DecoratorController", "dc")].resource_version == "2"
    assert world.hosted._backoff == 0.0


@pytest.mark.asyncio
async def test_a_new_decorator_that_meets_a_transient_error_is_not_reported() -> None:
    world = World()
    world.discovery.failing = ServerError(500, {"message": "boom"})
    world.put(decorator("a"))
    await world.sync()
    assert world.controllers.views == {} and world.recorder.events == []
    world.discovery.failing = None
    await world.sync()
    assert [e[1] for e in world.recorder.events] == ["Started"]


@pytest.mark.asyncio
async def test_decorator_hook_connections_are_resolved_reported_once_and_refreshed() -> None:
    world = World()
    auth = {"url": "https://h/sync", "authorization": {"secretRef": TOKEN_REF}}
    world.put(decorator("a", sync=auth))
    await world.sync()
    first = world.controllers.views[("DecoratorController", "dc")]
    warnings = [e for e in world.recorder.events if e[1] == "CreateError"]
    assert len(warnings) == 1 and "ns/hook-token" in warnings[0][2]
    sync = decode_connections(first.definition.connections)[HookName.SYNC.value]
    assert sync.error is not None and first.connection(HookName.SYNC) == sync
    await world.sync()  # the same problem: not reported again, the same view
    assert world.controllers.views[("DecoratorController", "dc")] is first
    assert len([e for e in world.recorder.events if e[1] == "CreateError"]) == 1
    # The Secret appears: a new view carries the token, without an edit of the controller.
    world.secrets.data["hook-token"] = {"token": "s3cret"}
    assert await world.references.refresh()
    await world.sync()
    second = world.controllers.views[("DecoratorController", "dc")]
    assert second is not first and second.resource_version == first.resource_version
    assert world.changes[-1] == {("DecoratorController", "dc")}
    resolved = decode_connections(second.definition.connections)[HookName.SYNC.value]
    assert resolved.error is None and resolved.authorization == "Bearer s3cret"
    assert len([e for e in world.recorder.events if e[1] == "CreateError"]) == 1


class KindDiscovery(Discovery):
    """Discovery that fails for the controller kinds as ``failures`` says."""

    def __init__(self, failures: dict[str, KubeError | TimeoutError]) -> None:
        self.failures = failures

    async def resolve(self, api_version: str, *, resource: str) -> Resource:
        if resource in self.failures:
            raise self.failures[resource]
        return await super().resolve(api_version, resource=resource)


@pytest.mark.parametrize(
    ("failures", "read", "says"),
    [
        ({}, True, []),
        (
            {DCS.name: ResourceNotFound("no decoratorcontrollers")},
            True,
            ["cannot watch DecoratorControllers: is the CRD installed?"],
        ),
        (
            {DCS.name: TransportError("refused"), CCS.name: TransportError("refused")},
            False,
            [
                f"cannot watch {k}Controllers: the API server is unreachable"
                for k in ("Composite", "Decorator")
            ],
        ),
        (
            {CCS.name: ServerError(503, {"message": "busy"})},
            False,
            ["cannot watch CompositeControllers: discovery failed"],
        ),
        (
            {DCS.name: TimeoutError()},
            False,
            ["cannot watch DecoratorControllers: discovery timed out"],
        ),
    ],
)
@pytest.mark.asyncio
async def test_controllers_count_as_read_only_when_every_kind_answered(
    failures: dict[str, KubeError | TimeoutError],
    read: bool,
    says: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A missing CRD is an answer (that kind has no controllers); an unreachable or failing
    API server is not: ``/readyz`` stays unready. The log says which, per kind."""
    logged: list[str] = []

    class Log:
        def error(self, event: str, **_: Any) -> None:
            logged.append(event)

        def __getattr__(self, level: str) -> Any:
            return lambda *_, **__: None

    monkeypatch.setattr("manager.controllers.hosted.log", Log())
    world = World()
    world.hosted._discovery = KindDiscovery(failures)  # type: ignore[assignment]
    world.hosted._retry_interval = 0.01
    task = asyncio.create_task(world.hosted.run())
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert world.controllers.loaded is read
    assert sorted(set(logged)) == sorted(says)


@pytest.mark.asyncio
async def test_a_started_controller_is_logged_and_again_when_its_informers_synced() -> None:
    world = World()
    synced = asyncio.Event()

    async def wait_synced() -> None:
        await synced.wait()

    world.put(decorator("a"))
    with structlog.testing.capture_logs() as logs:
        await world.hosted._watch_controllers()
        world.informers.acquire(SERVICES).wait_synced = wait_synced  # type: ignore[method-assign]
        await world.hosted._sync()
        await asyncio.sleep(0)
        events = [e["event"] for e in logs]
        assert "controller started" in events
        assert "controller informers synced" not in events  # the Services are not listed yet
        synced.set()
        await asyncio.gather(*world.hosted._tasks)
    done = [e for e in logs if e["event"] == "controller informers synced"]
    assert [(e["controller"], e["kind"], e["log_level"]) for e in done] == [
        ("dc", "DecoratorController", "info")
    ]


@pytest.mark.asyncio
async def test_a_discovery_timeout_is_retried_and_does_not_end_the_loop() -> None:
    """A kind whose discovery times out is watched once discovery answers again."""
    world = World()
    world.put(decorator("a"))
    discovery = KindDiscovery({DCS.name: TimeoutError()})
    world.hosted._discovery = discovery  # type: ignore[assignment]
    world.hosted._retry_interval = 0.01

    def loaded() -> bool:  # read anew each time: mypy keeps a narrowed property (mypy#11969)
        return world.controllers.loaded

    task = asyncio.create_task(world.hosted.run())
    await asyncio.sleep(0.05)
    assert not task.done() and not loaded()
    assert world.controllers.views == {}
    discovery.failures.clear()
    for _ in range(100):
        if loaded():
            break
        await asyncio.sleep(0.01)
    assert not task.done() and loaded()
    assert ("DecoratorController", "dc") in world.controllers.views
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def selecting(
    name: str, *selectors: dict[str, Any], finalize: bool = False, rv: str = "1"
) -> Cached:
    """A DecoratorController of shard a with one rule on pods per selector."""
    hooks: dict[str, Any] = {"sync": {"webhook": {"url": "http://h/sync"}}}
    if finalize:
        hooks["finalize"] = {"webhook": {"url": "http://h/finalize"}}
    rules = [{"apiVersion": "v1", "resource": "pods", "labelSelector": s} for s in selectors]
    return cached(
        {
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "DecoratorController",
            "metadata": {"name": name, "labels": {"shard": "a"}, "resourceVersion": rv},
            "spec": {
                "resources": rules,
                "attachments": [{"apiVersion": "v1", "resource": "services"}],
                "hooks": hooks,
            },
        }
    )


WEB = {"matchLabels": {"app": "web"}}
DB = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}


@pytest.mark.asyncio
async def test_parent_watches_carry_the_cover_of_the_controllers_label_selectors() -> None:
    world = World()
    world.put(selecting("one", WEB))
    await world.sync()
    assert world.informers.watched() == {"pods": "app in (web)", "services": ""}

    world.put(selecting("two", DB))  # a second controller on pods: the union
    await world.sync()
    assert world.informers.watched()["pods"] == "app in (db,web)"

    world.put(selecting("two", {}, rv="2"))  # a rule without a selector needs every pod
    await world.sync()
    assert world.informers.selectors["pods"] is None

    world.put(selecting("two", DB, finalize=True, rv="3"))  # finalize: also unselected pods
    await world.sync()
    assert world.informers.selectors["pods"] is None

    world.put(selecting("two", DB, rv="4"))
    await world.sync()
    assert world.informers.watched()["pods"] == "app in (db,web)"


@pytest.mark.asyncio
async def test_a_resource_that_is_also_a_child_is_watched_whole_and_narrowing_can_be_off() -> None:
    world = World()
    world.put(selecting("one", WEB))
    both = selecting("two", WEB)
    spec = orjson.loads(both.raw)
    spec["spec"]["attachments"] = [{"apiVersion": "v1", "resource": "pods"}]
    world.put(cached(spec))
    await world.sync()
    assert world.informers.selectors["pods"] is None

    off = World(narrow_watches=False)
    off.put(selecting("one", WEB))
    await off.sync()
    assert off.informers.selectors["pods"] is None
