"""The worker's side of the protocol, against a scripted coordinator on an in-memory link.

Time is a ``FakeClock``: HELLO retries, heartbeats, the fence timeout and a stalled process
happen when a test advances it, and never otherwise. The link is a pair of queues (the real
DEALER socket has its own tests), so after ``settle()`` everything the worker was going to do
has been done: a test can assert that something did not happen.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
import zmq
from structlog.testing import capture_logs

from proto.runtime.clock import FakeClock
from proto.wire import (
    SLOT_COUNT,
    Assign,
    Bye,
    Done,
    Fetch,
    Heartbeat,
    Hello,
    Keys,
    Message,
    Nack,
    NackReason,
    ParentKey,
    Priority,
    Released,
    Revoke,
    Snapshot,
    Welcome,
    slot_of,
)
from tests.unit.workers.runner.test_runner import Script, definition, settle
from tests.unit.zmq_sockets import within
from workers.link.contact import ContactReport
from workers.link.membership import Membership
from workers.link.snapshots import FetchFailed, Snapshots
from workers.link.standing import Standing
from workers.runner.runner import Runner

HELLO = 0.05
INTERVAL = 0.1
TIMEOUT = 0.6  # the worker fences after TIMEOUT - 2 * INTERVAL = 0.4 s of silence
FETCH_TIMEOUT = 0.05  # the event loop's timer, not the clock's (workers.link.snapshots)
KEY = ParentKey("CompositeController", "cc", "things.example.com", "ns", "p1")


@dataclass
class Pipe:
    """The worker's link: what it sends goes to ``sent``, ``to_worker`` is what it reads."""

    sent: asyncio.Queue[Message] = field(default_factory=asyncio.Queue)
    to_worker: asyncio.Queue[Message] = field(default_factory=asyncio.Queue)
    reconnects: int = 0
    retry_max: float | None = None  # what the last reconnect was given
    full: bool = False  # nothing can be queued (a full send buffer)
    monitor: list[tuple[zmq.Event, int]] = field(default_factory=list)  # for ``events()``

    async def send(self, msg: Message, *, wait: float = 0.0) -> bool:
        return self.send_now(msg)

    def send_now(self, msg: Message) -> bool:
        if self.full:
            return False
        self.sent.put_nowait(msg)
        return True

    def reconnect(self, *, flush: float = 0.0, reconnect_ivl_max: float | None = None) -> None:
        self.reconnects += 1
        self.retry_max = reconnect_ivl_max

    def events(self) -> list[tuple[zmq.Event, int]]:
        seen, self.monitor = self.monitor, []
        return seen

    async def __aiter__(self) -> AsyncIterator[Message]:
        while True:
            yield await self.to_worker.get()


def fenced(logs: list[MutableMapping[str, Any]]) -> list[str]:
    """The reasons of the fences logged."""
    return [e["reason"] for e in logs if e["event"] == "fenced: stopped all reconciles"]


@dataclass
class World:
    pipe: Pipe
    clock: FakeClock
    standing: Standing
    snapshots: Snapshots
    membership: Membership
    script: Script

    def send(self, msg: Message) -> None:
        """A message from the coordinator."""
        self.pipe.to_worker.put_nowait(msg)

    async def next(self) -> Message:
        """What the worker sent next, once it has done all it was going to do."""
        await settle()
        assert not self.pipe.sent.empty(), "the worker sent nothing"
        return self.pipe.sent.get_nowait()

    async def quiet(self) -> None:
        """The worker sent nothing more."""
        await settle()
        assert self.pipe.sent.empty(), f"the worker sent {self.pipe.sent.get_nowait()}"

    async def welcome(self, epoch: int = 5, *, hello: Message | None = None) -> Hello:
        """Answer the worker's next HELLO (or ``hello``, already read) with a WELCOME."""
        hello = hello or await self.next()
        assert isinstance(hello, Hello)
        self.send(
            Welcome(
                epoch,
                "coord",
                hello.incarnation,
                (definition(),),
                SLOT_COUNT,
                (),
                INTERVAL,
                TIMEOUT,
            )
        )
        await settle()
        assert self.standing.joined.is_set() and self.standing.epoch == epoch
        return hello

    async def serve_fetch(self, epoch: int = 5) -> Fetch:
        fetch = await self.next()
        assert isinstance(fetch, Fetch)
        self.send(Snapshot(epoch, fetch.request_id, fetch.key, b"{}", {}, (), {}))
        await settle()
        return fetch

    def state(self) -> tuple[bool, bool, int, int]:
        """Joined, in contact, reconciles running, sockets recreated."""
        standing = self.standing
        return (standing.welcomed, standing.in_contact(), self.script.running, self.pipe.reconnects)

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass, a heartbeat interval at a time."""
        while seconds > 1e-9:
            step = min(INTERVAL, seconds)
            self.clock.advance(step)
            seconds -= step
            await settle()


@pytest_asyncio.fixture
async def world() -> AsyncIterator[World]:
    pipe = Pipe()
    clock = FakeClock()
    standing = Standing(clock=clock)
    snapshots = Snapshots(pipe, standing, timeout=FETCH_TIMEOUT)
    script = Script()
    runner = Runner(
        factory=lambda _: script, snapshots=snapshots, gate=standing, concurrency=2, clock=clock
    )
    membership = Membership(
        pipe,
        standing,
        snapshots,
        runner,
        contact=ContactReport("inproc://coordinator", clock=clock),
        worker_id="w-1",
        concurrency=2,
        clock=clock,
        hello_interval=HELLO,
    )
    task = asyncio.create_task(membership.run())
    yield World(pipe, clock, standing, snapshots, membership, script)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await runner.close()


@pytest.mark.asyncio
async def test_hello_is_repeated_every_interval_until_welcomed(world: World) -> None:
    first = await world.next()
    assert isinstance(first, Hello) and first.worker_id == "w-1" and first.concurrency == 2
    world.clock.advance(HELLO / 2)
    await world.quiet()
    world.clock.advance(HELLO / 2)
    again = await world.next()
    assert isinstance(again, Hello) and again.incarnation == first.incarnation
    await world.welcome(hello=again)
    await world.advance(INTERVAL)
    beat = await world.next()
    assert isinstance(beat, Heartbeat) and beat.epoch == 5


@pytest.mark.asyncio
async def test_join_then_reconcile_assigned_and_pushed_keys(world: World) -> None:
    await world.welcome()
    slot = slot_of(KEY)
    world.send(Assign(5, (slot,), (KEY,)))
    fetch = await world.serve_fetch()
    assert fetch.key == KEY and fetch.epoch == 5
    assert world.script.reconciled == ["p1"]
    other = ParentKey("CompositeController", "cc", "things.example.com", "ns", "unowned")
    assert slot_of(other) != slot
    world.send(Keys(5, Priority.LIVE, (KEY, other)))
    assert (await world.serve_fetch()).key == KEY
    assert world.script.reconciled == ["p1", "p1"]
    await world.quiet()  # no FETCH for the key of a slot this worker does not own
    await world.advance(INTERVAL)
    beat = await world.next()
    assert beat == Heartbeat(5, 0, 0)


@pytest.mark.asyncio
async def test_low_keys_say_whether_more_wait_at_the_coordinator(world: World) -> None:
    def low_waiting(world: World) -> bool:  # read anew each time (no narrowing)
        return world.standing.low_waiting

    await world.welcome()
    assert not low_waiting(world)
    world.send(Assign(5, (slot_of(KEY),), ()))
    world.send(Keys(5, Priority.LOW, (KEY,), more=True))
    await world.serve_fetch()
    assert low_waiting(world)
    world.send(Keys(5, Priority.LIVE, (KEY,)))  # a LIVE KEYS says nothing of LOW keys
    await world.serve_fetch()
    assert low_waiting(world)
    world.send(Keys(5, Priority.LOW, (KEY,)))  # the last of them
    await world.serve_fetch()
    assert not low_waiting(world)


@pytest.mark.asyncio
async def test_messages_of_another_epoch_are_ignored(world: World) -> None:
    await world.welcome(epoch=5)
    world.send(Assign(4, (slot_of(KEY),), (KEY,)))
    await world.quiet()
    assert not world.standing.owns(KEY) and world.script.reconciled == []


@pytest.mark.asyncio
async def test_silence_fences_the_worker_and_it_joins_again(world: World) -> None:
    world.script.release.clear()
    first = await world.welcome()
    world.send(Assign(5, (slot_of(KEY),), (KEY,)))
    await world.serve_fetch()
    assert world.script.running == 1 and world.standing.in_contact()
    # Heartbeats go out, but the coordinator says nothing: within the fence timeout, nothing.
    await world.advance(TIMEOUT - 2 * INTERVAL - INTERVAL / 2)
    assert world.state() == (True, True, 1, 0)
    # Past it, the reconcile is cancelled, the socket recreated, and the worker joins again.
    await world.advance(INTERVAL)
    assert world.state() == (False, False, 0, 1) and not world.standing.owns(KEY)
    assert world.pipe.retry_max == INTERVAL  # the coordinator's, to be back within its window
    sent = [await world.next() for _ in range(world.pipe.sent.qsize())]
    hellos = [m for m in sent if isinstance(m, Hello)]
    assert hellos and all(h.incarnation == first.incarnation for h in hellos)


@pytest.mark.asyncio
async def test_bye_and_unknown_worker_nack_make_it_join_again(world: World) -> None:
    await world.welcome()
    world.send(Bye("term ended"))
    assert await world.next() == Bye("stopped")  # sent once fenced, before the new socket
    assert world.pipe.reconnects == 1 and not world.standing.welcomed
    await world.advance(INTERVAL)  # the heartbeat loop wakes up unjoined: HELLO
    await world.welcome(epoch=6)
    world.send(Nack(6, 0, NackReason.STALE_EPOCH, "unknown worker"))
    await world.quiet()
    assert not world.standing.welcomed and world.pipe.reconnects == 1
    await world.advance(INTERVAL)
    await world.welcome(epoch=7)


@pytest.mark.asyncio
async def test_revoke_releases_only_after_the_running_reconcile(world: World) -> None:
    world.script.release.clear()
    await world.welcome()
    slot = slot_of(KEY)
    world.send(Assign(5, (slot,), (KEY,)))
    await world.serve_fetch()
    world.send(Revoke(5, (slot,)))
    await world.quiet()  # no RELEASED while the reconcile runs
    assert not world.standing.owns(KEY) and world.script.running == 1
    world.script.release.set()
    released = await world.next()
    assert isinstance(released, Released) and released.slots == (slot,)
    assert world.script.running == 0


@pytest.mark.asyncio
async def test_fetch_nack_drops_the_key_and_leave_says_bye(world: World) -> None:
    await world.welcome()
    world.send(Assign(5, (slot_of(KEY),), (KEY,)))
    fetch = await world.next()
    assert isinstance(fetch, Fetch)
    world.send(Nack(5, fetch.request_id, NackReason.NOT_OWNER, "moved"))
    await world.quiet()  # dropped, not retried
    assert world.script.reconciled == []
    await within(world.membership.leave())
    assert await world.next() == Bye("shutting down")


@pytest.mark.asyncio
async def test_throttled_drops_the_key_and_a_permit_is_given_back_with_done(
    world: World,
) -> None:
    hello = await world.welcome()
    assert isinstance(hello, Hello) and hello.limits  # takes part in per-controller limits
    world.send(Assign(5, (slot_of(KEY),), (KEY,)))
    fetch = await world.next()
    assert isinstance(fetch, Fetch)
    world.send(Nack(5, fetch.request_id, NackReason.THROTTLED, "cc is at its limit"))
    await world.quiet()  # dropped, not retried: the coordinator pushes it again
    assert world.script.reconciled == []
    world.send(Keys(5, Priority.LIVE, (KEY,)))  # its turn
    fetch = await world.next()
    assert isinstance(fetch, Fetch)
    world.send(Snapshot(5, fetch.request_id, KEY, b"{}", {}, (), {}, permit=True))
    assert await world.next() == Done(5, KEY)
    assert world.script.reconciled == ["p1"]


@pytest.mark.asyncio
async def test_keys_sent_before_the_snapshot_of_a_running_fetch_cause_no_rerun(
    world: World,
) -> None:
    await world.welcome()
    world.send(Assign(5, (slot_of(KEY),), (KEY,)))
    fetch = await world.next()
    assert isinstance(fetch, Fetch)
    world.send(Keys(5, Priority.LIVE, (KEY,)))  # a change the snapshot includes
    world.send(Snapshot(5, fetch.request_id, KEY, b"{}", {}, (), {}))
    await world.quiet()
    assert world.script.reconciled == ["p1"]
    world.send(Keys(5, Priority.LIVE, (KEY,)))  # a later change: a new run
    await world.serve_fetch()
    assert world.script.reconciled == ["p1", "p1"]


@pytest.mark.asyncio
async def test_an_unanswered_fetch_fails_at_the_timeout_and_its_late_snapshot_is_dropped(
    world: World,
) -> None:
    await world.welcome()
    loop = asyncio.get_running_loop()
    started = loop.time()
    fetching = asyncio.create_task(world.snapshots.fetch(KEY, {}))
    first = await world.next()
    assert isinstance(first, Fetch)
    with pytest.raises(FetchFailed, match=f"no snapshot within {FETCH_TIMEOUT:g}s"):
        await within(fetching)
    assert loop.time() - started >= FETCH_TIMEOUT

    # the answer that comes too late is dropped; the next fetch gets its own answer
    world.send(Snapshot(5, first.request_id, KEY, b'{"late":1}', {}, (), {}))
    again = asyncio.create_task(world.snapshots.fetch(KEY, {}))
    second = await world.next()
    assert isinstance(second, Fetch) and second.request_id != first.request_id
    world.send(Snapshot(5, second.request_id, KEY, b"{}", {}, (), {}))
    snapshot = await within(again)
    assert snapshot.request_id == second.request_id and snapshot.parent == b"{}"


@pytest.mark.asyncio
async def test_a_stalled_worker_fences_though_the_coordinator_spoke_during_the_stall(
    world: World,
) -> None:
    """The process stalls (stopped, swapped out, a blocking call) for longer than the
    coordinator's timeout, which has then given its slots to another worker. The heartbeats
    that wait in the socket meanwhile were sent before that: read after the stall, they must
    not keep the worker in contact."""
    world.script.release.clear()
    await world.welcome()
    world.send(Assign(5, (slot_of(KEY),), (KEY,)))
    await world.serve_fetch()
    assert world.script.running == 1 and world.standing.in_contact()
    world.send(Heartbeat(5))
    world.clock.advance(2 * TIMEOUT)  # the stall: nothing on this event loop runs meanwhile
    assert not world.standing.in_contact()
    with capture_logs() as logs:
        await settle()  # the heartbeat is read first, then the heartbeat loop finds it late
    assert not world.standing.in_contact()
    assert world.script.running == 0 and not world.standing.welcomed
    assert world.pipe.reconnects == 1
    assert fenced(logs) == ["this process stalled for 1.2s"]


@pytest.mark.asyncio
async def test_heartbeats_that_cannot_leave_end_contact_though_the_coordinator_speaks(
    world: World,
) -> None:
    """The coordinator counts silence from the last heartbeat it got: hearing from it is not
    enough to keep acting once this worker's heartbeats stopped leaving."""
    await world.welcome()
    world.pipe.full = True
    for _ in range(3):  # 0.3 s: the coordinator keeps talking
        world.send(Heartbeat(5))
        await world.advance(INTERVAL)
    assert world.standing.in_contact()
    world.send(Heartbeat(5))
    with capture_logs() as logs:
        await world.advance(INTERVAL + INTERVAL / 2)  # the last heartbeat left 0.45 s ago
    assert not world.standing.welcomed and world.pipe.reconnects == 1
    # Not a stall: the heartbeat loop ran on time, and its heartbeats found no room.
    assert fenced(logs) == [
        "no heartbeat could be queued for 0.4s (no connection to the coordinator)"
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "event", [zmq.Event.HANDSHAKE_FAILED_AUTH, zmq.Event.HANDSHAKE_FAILED_PROTOCOL]
)
async def test_a_refused_handshake_gets_a_new_socket_a_heartbeat_interval_later(
    world: World, event: zmq.Event
) -> None:
    """ZeroMQ gives such a connection up; the worker does not (default interval: 1 s)."""
    await settle()  # the first tick has read the monitor
    world.pipe.monitor += [(zmq.Event.CONNECTED, 7), (event, 400)]
    await world.advance(HELLO)  # the next one sees the refusal
    await world.advance(0.8)
    assert world.pipe.reconnects == 0
    await world.advance(0.4)
    assert world.pipe.reconnects == 1 and world.pipe.retry_max == 1.0
    await world.advance(3.0)  # the new socket is not refused: nothing more to do
    assert world.pipe.reconnects == 1
    world.pipe.monitor.append((event, 400))
    await world.advance(1.0 + 2 * INTERVAL)
    assert world.pipe.reconnects == 2


@pytest.mark.asyncio
async def test_a_handshake_zeromq_retries_itself_gets_no_new_socket(world: World) -> None:
    world.pipe.monitor += [
        (zmq.Event.HANDSHAKE_FAILED_NO_DETAIL, 0),
        (zmq.Event.CONNECT_RETRIED, 100),
    ]
    await world.advance(3.0)
    assert world.pipe.reconnects == 0
