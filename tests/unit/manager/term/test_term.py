"""manager.term.term: a term starts its parts, walks a key and a FETCH through them, ends with
TermFailed when a part fails or stops, and says BYE to its workers. On a fake clock, with the
ROUTER socket, the API and the informers faked at their edges."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import orjson
import pytest

from manager.informers.shared import Informers
from manager.informers.store import Cached, Store
from manager.link.router import RouterLink, SendResult
from manager.settings import CoordinatorSettings
from manager.term.grace import Grace
from manager.term.term import Term, TermFailed
from proto.api.selectors import Selector
from proto.hooks.client import HookClient
from proto.kube.errors import ResourceNotFound
from proto.kube.events import EventRecorder
from proto.kube.resources import Discovery, Resource
from proto.runtime.clock import FakeClock
from proto.wire import (
    Assign,
    Bye,
    Fetch,
    Heartbeat,
    Hello,
    Keys,
    LinkClosed,
    Message,
    ParentKey,
    Priority,
    Snapshot,
    Welcome,
)

pytestmark = pytest.mark.asyncio

CCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", "CompositeController", False
)
THINGS = Resource("example.com", "v1", "things", "Thing", True, subresources=("status",))
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
KEY = ParentKey("CompositeController", "cc", "things.example.com", "ns", "p1")
ROUTE = b"r0"
PARTS = {"controllers", "receive", "send", "tick", "resync", "related"}


def cached(obj: dict[str, Any]) -> Cached:
    return Cached.from_object(obj, orjson.dumps(obj))


CC = cached(
    {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": "cc", "uid": "cc-uid", "resourceVersion": "1"},
        "spec": {
            "parentResource": {"apiVersion": "example.com/v1", "resource": "things"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": {"webhook": {"url": "http://hook/sync"}}},
        },
    }
)


def thing(name: str, rv: str, **labels: str) -> Cached:
    return cached(
        {
            "apiVersion": "example.com/v1",
            "kind": "Thing",
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "resourceVersion": rv,
                "labels": labels,
            },
        }
    )


class Informer:
    """A listed cache; ``emit`` plays an event to the handlers, as the informer would."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self.store = Store()
        self.handlers: list[Any] = []
        self.synced = True
        self.last_resource_version = "10"

    def add_handler(self, handler: Any) -> None:
        self.handlers.append(handler)
        for obj in self.store:
            handler("ADDED", None, obj, True)

    def remove_handler(self, handler: Any) -> None:
        self.handlers.remove(handler)

    async def wait_synced(self) -> None:
        pass

    def emit(self, new: Cached) -> None:
        old = self.store.upsert(new)
        for handler in self.handlers:
            handler("MODIFIED", old, new, False)


class FakeInformers:
    def __init__(self) -> None:
        self.informers = {r.name: Informer(r) for r in (CCS, THINGS, CONFIGMAPS)}
        self.informers["compositecontrollers"].store.upsert(CC)
        self.informers["things"].store.upsert(thing("p1", "2"))
        self.synced = True

    def acquire(self, resource: Resource, *, selector: Selector | None = None) -> Informer:
        return self.informers[resource.name]

    def get(self, resource: Resource) -> Informer | None:
        return self.informers.get(resource.name)

    def store(self, resource: Resource) -> Store | None:
        informer = self.informers.get(resource.name)
        return informer.store if informer is not None else None

    async def release(self, resource: Resource, *, selector: Selector | None = None) -> None:
        pass


class FakeDiscovery:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    async def resolve(self, api_version: str, *, resource: str) -> Resource:
        if self.error is not None:
            raise self.error
        for known in (CCS, THINGS, CONFIGMAPS):
            if known.name == resource:
                return known
        raise ResourceNotFound(404, {"message": f"no {resource}"})


class Recorder:
    def emit(self, *args: Any) -> None:
        pass


class Link:
    """The ROUTER socket as the term uses it: what workers send (``inbox``; None: the socket
    closed) and what they were sent. A worker told BYE answers BYE, unless ``deaf``."""

    def __init__(self, *, bind_error: Exception | None = None, deaf: bool = False) -> None:
        self.bind_error = bind_error
        self.deaf = deaf
        self.inbox: asyncio.Queue[tuple[bytes, Message] | None] = asyncio.Queue()
        self.sent: list[tuple[bytes, Message]] = []
        self.closed = False

    def bind(self, endpoint: str) -> str:
        if self.bind_error is not None:
            raise self.bind_error
        return endpoint

    def close(self) -> None:
        self.closed = True

    async def __aiter__(self) -> AsyncIterator[tuple[bytes, Message]]:
        while (item := await self.inbox.get()) is not None:
            yield item

    async def recv(self) -> tuple[bytes, Message]:
        item = await self.inbox.get()
        if item is None:
            raise LinkClosed("closed")
        return item

    async def send(self, route: bytes, msg: Message) -> SendResult:
        if isinstance(msg, Bye) and self.deaf:
            return SendResult.FULL
        self.sent.append((route, msg))
        if isinstance(msg, Bye):
            self.inbox.put_nowait((route, Bye("stopped")))
        return SendResult.SENT

    def taken(self, kind: type) -> list[Any]:
        """The messages of ``kind`` sent so far, forgetting everything sent."""
        sent, self.sent = self.sent, []
        assert all(route == ROUTE for route, _ in sent)
        return [msg for _, msg in sent if isinstance(msg, kind)]


class World:
    def __init__(self, *, link: Link | None = None, discovery: FakeDiscovery | None = None):
        self.clock = FakeClock()
        self.link = link or Link()
        self.informers = FakeInformers()
        self.term = Term(
            epoch=7,
            coordinator_id="c",
            settings=CoordinatorSettings(
                bind="inproc://term",
                heartbeat_interval=1.0,
                worker_timeout=100.0,  # the worker is mute
                cache_flush_interval=40.0,
            ),
            grace=Grace(0.0),
            discovery=cast(Discovery, discovery or FakeDiscovery()),
            informers=cast(Informers, self.informers),
            recorder=cast(EventRecorder, Recorder()),
            hooks=cast(HookClient, None),  # no customize hook: never called
            clock=self.clock,
            link=cast(RouterLink, self.link),
        )

    async def settle(self) -> None:
        for _ in range(30):
            await asyncio.sleep(0)

    async def step(self, seconds: float) -> None:
        for _ in range(round(seconds / 0.1)):
            self.clock.advance(0.1)
            await self.settle()

    async def join(self) -> None:
        self.link.inbox.put_nowait((ROUTE, Hello("w0", "inc", 4, 1)))
        await self.settle()


async def test_a_term_runs_its_parts_and_walks_a_key_and_a_fetch_through_them() -> None:
    world = World()
    running = asyncio.create_task(world.term.run())
    await world.settle()
    assert {task.get_name() for task in asyncio.all_tasks()} >= PARTS
    assert world.term.endpoint == "inproc://term" and world.term.controllers.loaded

    await world.join()
    (welcome,) = world.link.taken(Welcome)
    assert [d.name for d in welcome.controllers] == ["cc"]
    await world.step(0.1)  # the caches are ready and there is no grace: the next tick assigns
    assign, low = world.link.taken(object)
    assert isinstance(assign, Assign) and len(assign.slots) == 1024 and assign.keys == ()
    assert low == Keys(7, Priority.LOW, (KEY,))  # every key of the assigned slots follows

    world.informers.informers["things"].emit(thing("p1", "3", app="x"))  # a watch event
    await world.settle()
    assert [(k.priority, k.keys) for k in world.link.taken(Keys)] == [(Priority.LIVE, (KEY,))]

    world.link.inbox.put_nowait((ROUTE, Fetch(7, 1, KEY, {})))
    await world.settle()
    (snapshot,) = world.link.taken(Snapshot)
    assert snapshot.request_id == 1 and orjson.loads(snapshot.parent)["metadata"]["labels"] == {
        "app": "x"
    }

    await world.step(1.0)
    assert world.link.taken(Heartbeat)  # the tick
    await world.step(44.0)  # the resyncs' cache flush, at most 44 s in
    low = [k.keys for k in world.link.taken(Keys) if k.priority is Priority.LOW]
    assert low == [(KEY,)]

    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert world.link.taken(Bye) == [Bye("coordinator term 7 ended")]
    assert world.term.workers_stopped and world.link.closed
    assert not PARTS & {task.get_name() for task in asyncio.all_tasks()}


async def test_a_new_term_sends_the_parents_edited_since_their_last_sync_first() -> None:
    """After a failover, what was edited while there was no leader does not wait in the full
    pass of every parent: every key of the assigned slots goes LOW, those first."""
    world = World()
    things = world.informers.informers["things"].store
    for name, generation, observed in (("p1", 1, 1), ("p2", 2, 1), ("p3", 1, None)):
        obj = orjson.loads(thing(name, "2").raw)
        obj["metadata"]["generation"] = generation
        if observed is not None:
            obj["status"] = {"observedGeneration": observed}
        things.upsert(cached(obj))
    running = asyncio.create_task(world.term.run())
    await world.settle()
    await world.join()
    world.link.taken(Welcome)
    await world.step(0.1)
    assign, low = (msg for _, msg in world.link.sent)
    assert isinstance(assign, Assign) and assign.keys == ()
    first = (KEY._replace(name="p2"), KEY._replace(name="p3"))
    assert low == Keys(7, Priority.LOW, (*first, KEY._replace(name="p1")))
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)


async def test_a_part_that_fails_ends_the_term_with_its_error() -> None:
    world = World(discovery=FakeDiscovery(RuntimeError("boom")))
    with pytest.raises(TermFailed, match=r"controllers failed: RuntimeError\('boom'\)") as e:
        await world.term.run()
    assert isinstance(e.value.__cause__, RuntimeError)
    assert world.link.closed and not PARTS & {t.get_name() for t in asyncio.all_tasks()}


async def test_a_part_that_stops_ends_the_term_and_workers_are_told() -> None:
    world = World()
    running = asyncio.create_task(world.term.run())
    await world.settle()
    await world.join()
    world.link.sent.clear()
    world.link.inbox.put_nowait(None)  # the socket's messages end: receive() returns
    with pytest.raises(TermFailed, match="receive stopped"):
        await running
    assert world.link.taken(Bye) == [Bye("coordinator term 7 ended")]
    assert world.term.workers_stopped


async def test_workers_that_cannot_be_told_bye_have_not_stopped() -> None:
    world = World(link=Link(deaf=True))
    running = asyncio.create_task(world.term.run())
    await world.settle()
    await world.join()
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    assert not world.term.workers_stopped and world.link.closed


async def test_a_socket_that_cannot_bind_fails_the_term_before_anything_starts() -> None:
    world = World(link=Link(bind_error=OSError("address in use")))
    with pytest.raises(TermFailed, match="cannot bind inproc://term: address in use"):
        await world.term.run()
    assert world.link.closed and world.term.endpoint == ""
    assert not PARTS & {task.get_name() for task in asyncio.all_tasks()}
