"""manager.term.snapshots: a snapshot held back for its read-your-writes barrier, and the key
changes pushed meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from manager.controllers.running import ControllerSet
from manager.controllers.view import ControllerView
from manager.informers.shared import Informers
from manager.informers.store import Cached
from manager.routing.related import Related
from manager.routing.router import KeyIndex
from manager.term.dispatch import Dispatch, Target
from manager.term.metrics import TermMetrics
from manager.term.snapshots import SnapshotServer
from manager.term.throttle import Throttle
from proto.kube.resources import Resource
from proto.runtime.clock import FakeClock
from proto.wire import Fetch, Keys, Message, Nack, NackReason, ParentKey, Priority, Snapshot

pytestmark = pytest.mark.asyncio

THINGS = Resource("example.com", "v1", "things", "Thing", True)
KEY = ParentKey("CompositeController", "cc", "things.example.com", "ns", "p")


class View:
    """The part of a ``ControllerView`` a snapshot of a childless controller reads."""

    id = ("CompositeController", "cc")
    raw = b'{"metadata": {"annotations": {"metashard.io/max-concurrent-reconciles": "1"}}}'
    parents = (THINGS,)
    children: tuple[Resource, ...] = ()
    customize = None

    def parent_resource(self, key: ParentKey) -> Resource:
        return THINGS

    def handles(self, resource: Resource, parent: Cached) -> bool:
        return True


class Informer:
    """An informer whose cache reaches the awaited resourceVersion when told to."""

    last_resource_version = "5"
    store = None

    def __init__(self) -> None:
        self.reached = asyncio.Event()

    async def wait_for(self, resource_version: str, timeout: float) -> bool:  # noqa: ASYNC109
        await self.reached.wait()
        return True


class World:
    """One slot owner, which the test may change; the informer above."""

    def __init__(self) -> None:
        self.owned_by = "a"
        self.informer = Informer()
        self.dispatch = Dispatch(
            epoch=7, owners=self, members=self, slots=KeyIndex(), metrics=TermMetrics(None)
        )
        controllers = ControllerSet()
        view = cast(ControllerView, View())
        controllers.replace({("CompositeController", "cc"): view})
        self.throttle = Throttle(
            sink=self.dispatch, members=self, metrics=TermMetrics(None), clock=FakeClock()
        )
        self.throttle.controllers_changed([view], [view])
        informers: Any = type(
            "I", (), {"get": lambda _, resource: self.informer, "store": lambda _, resource: None}
        )()
        self.server = SnapshotServer(
            epoch=7,
            owners=self,
            slots=KeyIndex(),
            controllers=controllers,
            informers=cast(Informers, informers),
            related=cast(Related, None),
            dispatch=self.dispatch,
            throttle=self.throttle,
            metrics=TermMetrics(None),
            barrier_timeout=5.0,
        )

    def owner(self, slot: int) -> str | None:
        return self.owned_by

    def dispatch_target(self, slot: int) -> str | None:
        return self.owned_by

    def route(self, worker_id: str) -> bytes | None:
        return worker_id.encode()

    async def sent(self) -> list[tuple[Target, Message]]:
        for _ in range(5):
            await asyncio.sleep(0)
        out = []
        while True:
            try:
                out.append(await asyncio.wait_for(self.dispatch.next(), 0.01))
            except TimeoutError:
                return out


def told(sent: list[tuple[Target, Message]], worker: str) -> bool:
    return any(t == worker and isinstance(m, Keys) and KEY in m.keys for t, m in sent)


async def test_a_snapshot_waits_for_its_barrier_and_then_answers_its_owner() -> None:
    world = World()
    world.server.fetch("a", Fetch(7, 1, KEY, {"things.example.com": "10"}))
    assert await world.sent() == []  # held back: the cache is at 5
    world.informer.reached.set()
    (sent,) = await world.sent()
    assert sent[0] == "a" and isinstance(sent[1], Snapshot) and sent[1].request_id == 1


async def test_a_change_while_a_snapshot_waits_reaches_the_slots_new_owner() -> None:
    world = World()
    world.server.fetch("a", Fetch(7, 1, KEY, {"things.example.com": "10"}))
    await world.sent()
    world.owned_by = "b"  # a was lost meanwhile; b owns the slot now
    world.dispatch.push(KEY, Priority.LIVE)  # then the parent changes
    world.informer.reached.set()
    sent = await world.sent()
    assert told(sent, "b")
    assert not any(isinstance(m, Snapshot) for _, m in sent)  # a's snapshot is not sent


async def test_a_change_while_a_snapshot_waits_is_pushed_to_the_worker_that_fetches() -> None:
    # That worker drops it if it still waits for the snapshot, which reflects the change; it
    # runs the key if it gave up waiting (fenced and joined again).
    world = World()
    world.server.fetch("a", Fetch(7, 1, KEY, {"things.example.com": "10"}))
    await world.sent()
    world.dispatch.push(KEY, Priority.LIVE)
    assert told(await world.sent(), "a")


async def test_a_snapshot_holds_a_permit_and_a_fetch_beyond_the_limit_is_throttled() -> None:
    world = World()
    world.throttle.joined("a", limits=True)
    other = KEY._replace(name="q")
    world.server.fetch("a", Fetch(7, 1, KEY, {}))
    world.server.fetch("a", Fetch(7, 2, other, {}))
    first, second = await world.sent()
    assert isinstance(first[1], Snapshot) and first[1].permit
    assert isinstance(second[1], Nack) and second[1].reason is NackReason.THROTTLED
    world.throttle.release("a", KEY)  # DONE
    (pushed,) = await world.sent()
    assert pushed == ("a", Keys(7, Priority.LIVE, (other,)))
