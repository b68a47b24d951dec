"""manager.term.resync: a new controller's parents once they are listed, then every parent again
on two jittered clocks, and nothing by the clocks before slots are assigned. On a fake clock."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import orjson
import pytest
import pytest_asyncio

from manager.controllers.running import ControllerSet
from manager.controllers.view import ControllerView
from manager.informers.shared import Informers
from manager.term.resync import PUSH_CHUNK, ResyncPlanner
from proto.kube.resources import Resource
from proto.runtime.clock import FakeClock
from proto.wire import ParentKey, Priority

pytestmark = pytest.mark.asyncio

THINGS = Resource("example.com", "v1", "things", "Thing", True)
FLUSH = 40.0  # seconds between cache flushes (36 to 44 jittered: exact in binary)


@dataclass(frozen=True)
class View:
    """The part of a ``ControllerView`` the resyncs read."""

    name: str
    resync_period_seconds: float | None = None
    parents: tuple[Resource, ...] = (THINGS,)
    annotations: tuple[tuple[str, str], ...] = ()

    @property
    def raw(self) -> bytes:
        return orjson.dumps(
            {"metadata": {"name": self.name, "annotations": dict(self.annotations)}}
        )

    @property
    def id(self) -> tuple[str, str]:
        return ("CompositeController", self.name)


class Jitter(random.Random):
    """``uniform`` answers the same end of the range every time, and says what it was asked."""

    def __init__(self, end: str) -> None:
        super().__init__(0)
        self.end = end
        self.asked: set[tuple[float, float]] = set()

    def uniform(self, a: float, b: float) -> float:
        self.asked.add((a, b))
        return a if self.end == "low" else b


class Informer:
    def __init__(self) -> None:
        self.listed = asyncio.Event()

    async def wait_synced(self) -> None:
        await self.listed.wait()


class World:
    def __init__(self, end: str = "high") -> None:
        self.clock = FakeClock()
        self.rng = Jitter(end)
        self.controllers = ControllerSet()
        self.assigning = asyncio.Event()
        self.informer = Informer()
        self.pushed: list[tuple[ParentKey, Priority]] = []
        self.many: dict[str, int] = {}  # controllers with that many parents (else one)
        informers: Any = type("I", (), {"get": lambda _, resource: self.informer})()
        self.resync = ResyncPlanner(
            controllers=self.controllers,
            parents=self,
            sink=self,
            informers=cast(Informers, informers),
            assigning=self.assigning,
            clock=self.clock,
            rng=self.rng,
            cache_flush_interval=FLUSH,
        )

    def of_controller(self, controller: tuple[str, str]) -> list[ParentKey]:
        name = controller[1]
        count = self.many.get(name)
        names = [f"{name}-p"] if count is None else [f"{name}-{i}" for i in range(count)]
        return [ParentKey(*controller, "things.example.com", "ns", n) for n in names]

    def push(self, key: ParentKey, priority: Priority) -> None:
        self.pushed.append((key, priority))

    def run(self, *views: View) -> None:
        self.controllers.replace({v.id: cast(ControllerView, v) for v in views})

    def names(self) -> list[str]:
        """The names of the parents pushed since last asked (all at LOW)."""
        assert all(priority is Priority.LOW for _, priority in self.pushed)
        names, self.pushed = [key.name for key, _ in self.pushed], []
        return names

    async def step(self, seconds: float) -> None:
        """Advance the clock a second at a time (the resync's tick), letting it run."""
        for _ in range(round(seconds)):
            self.clock.advance(1.0)
            for _ in range(3):
                await asyncio.sleep(0)


@pytest_asyncio.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    task = asyncio.create_task(w.resync.run())
    await asyncio.sleep(0)
    yield w
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_nothing_is_pushed_by_the_clocks_before_slots_are_assigned(world: World) -> None:
    world.run(View("a", resync_period_seconds=10.0))
    await world.step(3 * FLUSH)
    assert world.names() == []
    world.assigning.set()
    await world.step(1)
    assert world.names() == ["a-p"]  # the flush was due long ago: at the first tick
    await world.step(10)
    assert world.names() == []  # its own period started when it was first seen
    await world.step(1)
    assert world.names() == ["a-p"]


async def test_the_flush_pushes_every_parent_and_a_period_only_its_own(world: World) -> None:
    world.assigning.set()
    world.run(View("a", resync_period_seconds=20.0), View("b"))
    await world.step(1)
    assert world.names() == []
    await world.step(22)  # a's period, jittered high: 22 s after it was first seen
    assert world.names() == ["a-p"]
    await world.step(21)  # 44 s, the flush jittered high: every parent
    assert sorted(world.names()) == ["a-p", "b-p"]
    await world.step(44)  # a at 66 and 88 s, b with the flush at 88 s (a once then)
    assert sorted(world.names()) == ["a-p", "a-p", "b-p"]


@pytest.mark.parametrize(("end", "first"), [("low", 36), ("high", 44)])
async def test_the_flush_is_jittered_within_ten_percent(end: str, first: int) -> None:
    world = World(end)
    task = asyncio.create_task(world.resync.run())
    await asyncio.sleep(0)
    world.assigning.set()
    world.run(View("a"))
    await world.step(first - 1)
    assert world.names() == []
    await world.step(1)
    assert world.names() == ["a-p"]
    assert world.rng.asked == {(0.9, 1.1)}
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_controller_that_goes_is_not_pushed_again(world: World) -> None:
    world.assigning.set()
    world.run(View("a", resync_period_seconds=10.0))
    await world.step(12)
    assert world.names() == ["a-p"]
    world.run()
    await world.step(30)
    assert world.names() == []


async def test_a_new_controllers_parents_are_pushed_once_they_are_listed(world: World) -> None:
    view = cast(ControllerView, View("a"))
    world.resync.controllers_changed([view], [view])
    await world.step(1)
    assert world.names() == []  # its parents' informer has not listed yet
    world.informer.listed.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert world.names() == ["a-p"]  # not waiting for slots: the dispatch drops what has none
    world.resync.controllers_changed([view], [])
    for _ in range(3):
        await asyncio.sleep(0)
    assert world.names() == []  # only those that started


async def test_ending_cancels_the_pushes_still_waiting_for_informers() -> None:
    world = World()
    task = asyncio.create_task(world.resync.run())
    await asyncio.sleep(0)
    view = cast(ControllerView, View("a"))
    world.resync.controllers_changed([view], [view])
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    world.informer.listed.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert world.names() == []


async def test_many_keys_go_a_chunk_per_loop_turn(world: World) -> None:
    world.assigning.set()
    world.many["m"] = 2 * PUSH_CHUNK + 1
    world.run(View("m"))
    await world.step(43)
    assert world.names() == []
    world.clock.advance(1.0)  # the flush
    seen: list[int] = []
    while len(seen) < 50 and (not seen or seen[-1] < 2 * PUSH_CHUNK + 1):
        await asyncio.sleep(0)
        seen.append(len(world.pushed))
    assert seen[-1] == 2 * PUSH_CHUNK + 1
    steps = [b - a for a, b in zip([0, *seen], seen, strict=False)]
    assert max(steps) == PUSH_CHUNK  # never more in one turn
    assert world.names() == [f"m-{i}" for i in range(2 * PUSH_CHUNK + 1)]


PAUSED = ("metashard.io/paused", "true")


def asked(*annotations: tuple[str, str]) -> ControllerView:
    return cast(ControllerView, View("a", annotations=annotations))


async def changed(world: World, view: ControllerView) -> list[tuple[str, Priority]]:
    """The parents pushed (name, priority) once ``view`` replaces the running one."""
    world.resync.controllers_changed([view], [view])
    for _ in range(3):
        await asyncio.sleep(0)
    pushed, world.pushed = [(key.name, priority) for key, priority in world.pushed], []
    return pushed


async def test_a_sync_request_or_an_unpause_pushes_every_parent_live(world: World) -> None:
    world.informer.listed.set()
    assert await changed(world, asked()) == [("a-p", Priority.LOW)]  # it starts
    one = ("metashard.io/sync-requested-at", "2026-11-27T20:35:00.000001Z")
    assert await changed(world, asked(one)) == [("a-p", Priority.LIVE)]
    assert await changed(world, asked(one, ("other", "edit"))) == [("a-p", Priority.LOW)]
    assert await changed(world, asked(one, PAUSED)) == []
    assert await changed(world, asked(one, ("metashard.io/paused", "false"))) == [
        ("a-p", Priority.LIVE)
    ]
    assert await changed(world, asked(one, PAUSED)) == []
    assert await changed(world, asked(one)) == [("a-p", Priority.LIVE)]
    two = ("metashard.io/sync-requested-at", "2026-11-27T20:35:00.000002Z")
    assert await changed(world, asked(two)) == [("a-p", Priority.LIVE)]


async def test_a_controller_that_comes_back_starts_at_low(world: World) -> None:
    world.informer.listed.set()
    one = ("metashard.io/sync-requested-at", "1")
    await changed(world, asked(one))
    world.resync.controllers_changed([], [])
    assert await changed(world, asked(("metashard.io/sync-requested-at", "2"))) == [
        ("a-p", Priority.LOW)
    ]


async def test_a_paused_controller_is_not_pushed_by_the_clocks(world: World) -> None:
    world.informer.listed.set()
    world.assigning.set()
    paused = asked(PAUSED)
    world.run(cast(View, paused))
    assert await changed(world, paused) == []
    await world.step(3 * FLUSH)
    assert world.names() == []
    awake = asked()
    world.run(cast(View, awake))
    assert await changed(world, awake) == [("a-p", Priority.LIVE)]
    await world.step(FLUSH + 4)
    assert world.names() == ["a-p"]
