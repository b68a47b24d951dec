"""``WorkerSessions.tick``: the first assignment waits for the grace and the caches, and says so;
it starts as soon as the last expected worker joins."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
import structlog

from manager.controllers.running import ControllerSet
from manager.term.grace import Grace
from manager.term.membership import Membership, Outbox
from manager.term.metrics import TermMetrics
from manager.term.sessions import WorkerSessions
from manager.term.throttle import Throttle
from proto.runtime.clock import FakeClock
from proto.wire import Assign, Hello, Keys, Message, ParentKey, Priority


class Dispatch:
    """Keeps what the sessions send; nothing here is delivered."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, Message]] = []
        self.deferred_keys: list[ParentKey] = []

    def send(self, target: Any, msg: Any) -> None:
        pass

    def emit(self, out: Outbox) -> None:
        self.emitted.extend(out)

    def reported(self, worker: str, queue_depth: int) -> None:
        pass

    def fetched(self, worker: str) -> None:
        pass

    def deferred(self, keys: Iterable[ParentKey]) -> None:
        self.deferred_keys.extend(keys)


class Link:
    """What ``receive()`` reads: the given messages, then nothing more."""

    def __init__(self, *messages: tuple[bytes, Message]) -> None:
        self._messages = messages

    async def __aiter__(self) -> AsyncIterator[tuple[bytes, Message]]:
        for message in self._messages:
            yield message
        await asyncio.Event().wait()


class Caches:
    """Ready when told: the controllers loaded and every informer synced."""

    def __init__(self, ready: bool) -> None:
        self.controllers = ControllerSet()
        self.controllers.loaded = ready
        self.synced = True

    def ready(self, ready: bool = True) -> None:
        self.controllers.loaded = ready


def sessions(
    grace: float | Grace, clock: FakeClock, caches: Caches, link: Link | None = None
) -> WorkerSessions:
    membership = Membership(
        epoch=7,
        coordinator_id="c",
        controllers=caches.controllers,
        start_at=math.inf,
    )
    return WorkerSessions(
        epoch=7,
        link=link or Link(),  # type: ignore[arg-type]
        membership=membership,
        dispatch=Dispatch(),  # type: ignore[arg-type]
        snapshots=None,  # type: ignore[arg-type]  # nor the snapshot server
        throttle=Throttle(
            sink=None,  # type: ignore[arg-type]
            members=membership,
            metrics=TermMetrics(None),
            clock=clock,
        ),
        controllers=caches.controllers,
        informers=caches,
        grace=grace if isinstance(grace, Grace) else Grace(grace),
        metrics=TermMetrics(None),
        clock=clock,
    )


async def step(clock: FakeClock, seconds: float) -> None:
    for _ in range(round(seconds / 0.1)):
        clock.advance(0.1)
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_the_grace_is_logged_once_and_assigning_waits_for_it_and_the_caches() -> None:
    clock, caches = FakeClock(), Caches(False)
    s = sessions(4.0, clock, caches)
    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(s.tick())
        await step(clock, 3.9)
        caches.ready()
        await step(clock, 0.1)
        assert not s.assigning.is_set()  # 3.9 s: the grace has not passed
        await step(clock, 0.3)
        assert s.assigning.is_set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    events = [e["event"] for e in logs]
    waiting = "waiting 4 s for workers of a previous term to fence before the first assignment"
    assert events.count(waiting) == 1
    assert events.index(waiting) < events.index("assigning slots")
    assert next(e for e in logs if e["event"] == waiting)["epoch"] == 7


@pytest.mark.asyncio
async def test_no_grace_no_waiting_line_but_the_caches_still_gate() -> None:
    clock, caches = FakeClock(), Caches(False)
    s = sessions(0.0, clock, caches)
    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(s.tick())
        await step(clock, 1.0)
        assert not s.assigning.is_set()
        caches.ready()
        await step(clock, 0.2)
        assert s.assigning.is_set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert not [e for e in logs if str(e["event"]).startswith("waiting")]


@pytest.mark.asyncio
async def test_expected_workers_are_waited_for_until_they_joined_or_the_bound_passed() -> None:
    clock, caches = FakeClock(), Caches(True)
    s = sessions(Grace(0.0, expected_workers=2, join_within=4.0), clock, caches)
    task = asyncio.create_task(s.tick())
    membership = s._membership
    membership.hello("w-0", "a", 4, clock.now(), b"r0")
    await step(clock, 1.0)
    assert not s.assigning.is_set()  # one of two
    membership.hello("w-1", "b", 4, clock.now(), b"r1")
    await step(clock, 0.2)
    assert s.assigning.is_set()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    clock, caches = FakeClock(), Caches(True)
    s = sessions(Grace(0.0, expected_workers=2, join_within=4.0), clock, caches)
    task = asyncio.create_task(s.tick())
    s._membership.hello("w-0", "a", 4, clock.now(), b"r0")
    await step(clock, 3.8)
    assert not s.assigning.is_set()
    await step(clock, 0.4)
    assert s.assigning.is_set()  # the second never came: assign to the one there is
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.asyncio
async def test_the_last_expected_worker_joining_starts_the_assignment_without_waiting_a_tick() -> (
    None
):
    clock, caches = FakeClock(), Caches(True)
    hello = Hello("w-0", "a", 4, 1)
    s = sessions(
        Grace(0.0, expected_workers=1, join_within=4.0), clock, caches, Link((b"r0", hello))
    )
    task = asyncio.create_task(s.tick())
    await step(clock, 0.2)
    assert not s.assigning.is_set()  # nobody yet
    receiving = asyncio.create_task(s.receive())
    for _ in range(3):
        await asyncio.sleep(0)  # the fake clock stands still: no tick runs meanwhile
    assert s.assigning.is_set()
    dispatch = s._dispatch
    assert isinstance(dispatch, Dispatch)
    assigned = [msg for worker, msg in dispatch.emitted if isinstance(msg, Assign)]
    assert assigned and all(worker == "w-0" for worker, msg in dispatch.emitted)
    assert sum(len(msg.slots) for msg in assigned) == s._membership.slot_count
    for t in (task, receiving):
        t.cancel()
    await asyncio.gather(task, receiving, return_exceptions=True)


@pytest.mark.asyncio
async def test_keys_a_member_hands_back_in_the_current_epoch_go_to_the_dispatch() -> None:
    def key(name: str) -> ParentKey:
        return ParentKey("CompositeController", "cc", "things.example.com", "ns", name)

    link = Link(
        (b"r1", Hello("w", "inc", 4, 1)),
        (b"r1", Keys(7, Priority.LOW, (key("a"), key("b")))),
        (b"r1", Keys(6, Priority.LOW, (key("stale"),))),  # of an older term
        (b"r2", Keys(7, Priority.LOW, (key("stranger"),))),  # not a member's
    )
    s = sessions(0.0, FakeClock(), Caches(ready=False), link)
    receiving = asyncio.create_task(s.receive())
    await asyncio.sleep(0.01)
    receiving.cancel()
    dispatch = s._dispatch
    assert isinstance(dispatch, Dispatch)
    assert dispatch.deferred_keys == [key("a"), key("b")]
