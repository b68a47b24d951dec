"""The worker's side of the protocol, against a scripted coordinator on a real ROUTER."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import zmq.asyncio

from manager.link.router import RouterLink
from proto.wire import (
    SLOT_COUNT,
    Assign,
    Bye,
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
from tests.unit.workers.runner.test_runner import Script, definition
from tests.unit.zmq_sockets import within
from workers.link.dealer import DealerLink
from workers.link.membership import Membership
from workers.link.snapshots import FetchFailed, Snapshots
from workers.link.standing import Standing
from workers.runner.runner import Runner

INTERVAL = 0.1
TIMEOUT = 0.6  # the worker fences after TIMEOUT - 2 * INTERVAL = 0.4 s of silence
FETCH_TIMEOUT = 0.3
KEY = ParentKey("CompositeController", "cc", "things.example.com", "ns", "p1")


class Coordinator:
    def __init__(self, link: RouterLink) -> None:
        self.link = link
        self.route = b""  # the worker's current connection, as last heard from

    async def expect(self, kind: type[Message], seconds: float = 3.0) -> tuple[bytes, Message]:
        async def wait() -> tuple[bytes, Message]:
            while True:
                peer, msg = await self.link.recv()
                self.route = peer
                if isinstance(msg, kind):
                    return peer, msg

        return await within(wait(), seconds)

    async def send(self, msg: Message) -> None:
        await self.link.send(self.route, msg)

    async def welcome(self, epoch: int = 5, slots: tuple[int, ...] = ()) -> Hello:
        _, hello = await self.expect(Hello)
        assert isinstance(hello, Hello)
        await self.send(
            Welcome(
                epoch,
                "coord",
                hello.incarnation,
                (definition(),),
                SLOT_COUNT,
                slots,
                INTERVAL,
                TIMEOUT,
            )
        )
        return hello


World = tuple[Coordinator, Standing, Script, Snapshots, Membership]


@pytest_asyncio.fixture
async def world() -> AsyncIterator[World]:
    ctx = zmq.asyncio.Context()
    router = RouterLink(context=ctx)
    endpoint = router.bind("tcp://127.0.0.1:0")
    link = DealerLink("w-1", endpoint, context=ctx, reconnect_ivl=0.05)
    standing = Standing()
    snapshots = Snapshots(link, standing, timeout=FETCH_TIMEOUT)
    script = Script()
    runner = Runner(factory=lambda _: script, snapshots=snapshots, gate=standing, concurrency=2)
    membership = Membership(
        link, standing, snapshots, runner, worker_id="w-1", concurrency=2, hello_interval=0.05
    )
    task = asyncio.create_task(membership.run())
    yield Coordinator(router), standing, script, snapshots, membership
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await runner.close()
    link.close()
    router.close()
    ctx.destroy(linger=0)


async def serve_fetch(coordinator: Coordinator, epoch: int = 5) -> Fetch:
    _, fetch = await coordinator.expect(Fetch)
    assert isinstance(fetch, Fetch)
    await coordinator.send(Snapshot(epoch, fetch.request_id, fetch.key, b"{}", {}, (), {}))
    return fetch


@pytest.mark.asyncio
async def test_join_then_reconcile_assigned_and_pushed_keys(world: World) -> None:
    coordinator, standing, script, _, _ = world
    hello = await coordinator.welcome()
    assert hello.worker_id == "w-1" and hello.concurrency == 2
    await within(standing.joined.wait())
    slot = slot_of(KEY)
    await coordinator.send(Assign(5, (slot,), (KEY,)))
    fetch = await serve_fetch(coordinator)
    assert fetch.key == KEY and fetch.epoch == 5
    other = ParentKey("CompositeController", "cc", "things.example.com", "ns", "unowned")
    await coordinator.send(
        Keys(5, Priority.LIVE, (KEY, other) if slot_of(other) != slot else (KEY,))
    )
    await serve_fetch(coordinator)
    await asyncio.sleep(0.1)
    assert script.reconciled == ["p1", "p1"]  # the unowned key was ignored
    _, beat = await coordinator.expect(Heartbeat)
    assert isinstance(beat, Heartbeat) and beat.epoch == 5


@pytest.mark.asyncio
async def test_messages_of_another_epoch_are_ignored(world: World) -> None:
    coordinator, standing, script, _, _ = world
    await coordinator.welcome(epoch=5)
    await within(standing.joined.wait())
    await coordinator.send(Assign(4, (slot_of(KEY),), (KEY,)))
    await asyncio.sleep(0.2)
    assert not standing.owns(KEY) and script.reconciled == []


@pytest.mark.asyncio
async def test_silence_fences_the_worker_and_it_joins_again(world: World) -> None:
    coordinator, standing, script, _, _ = world
    script.release.clear()
    first = await coordinator.welcome()
    await within(standing.joined.wait())
    await coordinator.send(Assign(5, (slot_of(KEY),), (KEY,)))
    await serve_fetch(coordinator)
    await asyncio.sleep(0.05)
    assert script.running == 1 and standing.in_contact()
    # No heartbeat from the coordinator: within the fence timeout the reconcile is cancelled.
    started = asyncio.get_running_loop().time()
    _, again = await coordinator.expect(Hello, seconds=3.0)
    assert isinstance(again, Hello) and again.incarnation == first.incarnation
    assert asyncio.get_running_loop().time() - started < 1.5
    assert script.running == 0 and not standing.welcomed and not standing.owns(KEY)
    assert not standing.in_contact()


@pytest.mark.asyncio
async def test_bye_and_unknown_worker_nack_make_it_join_again(world: World) -> None:
    coordinator, standing, _, _, _ = world
    await coordinator.welcome()
    await within(standing.joined.wait())
    await coordinator.send(Bye("term ended"))
    await coordinator.welcome(epoch=6)
    await within(standing.joined.wait())
    assert standing.epoch == 6
    await coordinator.send(Nack(6, 0, NackReason.STALE_EPOCH, "unknown worker"))
    await coordinator.welcome(epoch=7)
    await within(standing.joined.wait())
    assert standing.epoch == 7


@pytest.mark.asyncio
async def test_revoke_releases_only_after_the_running_reconcile(world: World) -> None:
    coordinator, standing, script, _, _ = world
    script.release.clear()
    await coordinator.welcome()
    await within(standing.joined.wait())
    slot = slot_of(KEY)
    await coordinator.send(Assign(5, (slot,), (KEY,)))
    await serve_fetch(coordinator)
    await asyncio.sleep(0.05)
    await coordinator.send(Revoke(5, (slot,)))
    await asyncio.sleep(0.2)
    assert not standing.owns(KEY) and script.running == 1
    script.release.set()
    _, released = await coordinator.expect(Released)
    assert isinstance(released, Released) and released.slots == (slot,)
    assert script.running == 0


@pytest.mark.asyncio
async def test_fetch_nack_drops_the_key_and_leave_says_bye(world: World) -> None:
    coordinator, standing, script, _, membership = world
    await coordinator.welcome()
    await within(standing.joined.wait())
    await coordinator.send(Assign(5, (slot_of(KEY),), (KEY,)))
    _, fetch = await coordinator.expect(Fetch)
    assert isinstance(fetch, Fetch)
    await coordinator.send(Nack(5, fetch.request_id, NackReason.NOT_OWNER, "moved"))
    await asyncio.sleep(0.1)
    assert script.reconciled == []
    await within(membership.leave())
    _, bye = await coordinator.expect(Bye)
    assert isinstance(bye, Bye)


@pytest.mark.asyncio
async def test_keys_sent_before_the_snapshot_of_a_running_fetch_cause_no_rerun(
    world: World,
) -> None:
    coordinator, standing, script, _, _ = world
    await coordinator.welcome()
    await within(standing.joined.wait())
    await coordinator.send(Assign(5, (slot_of(KEY),), (KEY,)))
    _, fetch = await coordinator.expect(Fetch)
    assert isinstance(fetch, Fetch)
    await coordinator.send(Keys(5, Priority.LIVE, (KEY,)))  # a change the snapshot includes
    await coordinator.send(Snapshot(5, fetch.request_id, KEY, b"{}", {}, (), {}))
    await asyncio.sleep(0.3)
    assert script.reconciled == ["p1"]
    await coordinator.send(Keys(5, Priority.LIVE, (KEY,)))  # a later change: a new run
    await serve_fetch(coordinator)
    await asyncio.sleep(0.1)
    assert script.reconciled == ["p1", "p1"]


@pytest.mark.asyncio
async def test_an_unanswered_fetch_fails_at_the_timeout_and_its_late_snapshot_is_dropped(
    world: World,
) -> None:
    coordinator, standing, _, snapshots, _ = world
    await coordinator.welcome()
    await within(standing.joined.wait())

    async def heartbeats() -> None:  # keep the worker from fencing meanwhile
        while True:
            await coordinator.send(Heartbeat(5))
            await asyncio.sleep(INTERVAL / 2)

    beating = asyncio.create_task(heartbeats())
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        fetching = asyncio.create_task(snapshots.fetch(KEY, {}))
        _, first = await coordinator.expect(Fetch)
        assert isinstance(first, Fetch)
        with pytest.raises(FetchFailed, match=f"no snapshot within {FETCH_TIMEOUT:g}s"):
            await within(fetching)
        assert loop.time() - started >= FETCH_TIMEOUT

        # the answer that comes too late is dropped; the next fetch gets its own answer
        await coordinator.send(Snapshot(5, first.request_id, KEY, b'{"late":1}', {}, (), {}))
        again = asyncio.create_task(snapshots.fetch(KEY, {}))
        _, second = await coordinator.expect(Fetch)
        assert isinstance(second, Fetch) and second.request_id != first.request_id
        await coordinator.send(Snapshot(5, second.request_id, KEY, b"{}", {}, (), {}))
        snapshot = await within(again)
        assert snapshot.request_id == second.request_id and snapshot.parent == b"{}"
    finally:
        beating.cancel()


@pytest.mark.asyncio
async def test_a_stalled_worker_fences_though_the_coordinator_spoke_during_the_stall(
    world: World,
) -> None:
    """The process stalls (stopped, swapped out, a blocking call) for longer than the
    coordinator's timeout, which has then given its slots to another worker. The heartbeats
    that wait in the socket meanwhile were sent before that: read after the stall, they must
    not keep the worker in contact."""
    coordinator, standing, script, _, _ = world
    script.release.clear()
    await coordinator.welcome()
    await within(standing.joined.wait())
    await coordinator.send(Assign(5, (slot_of(KEY),), (KEY,)))
    await serve_fetch(coordinator)
    await asyncio.sleep(0.05)
    assert script.running == 1 and standing.in_contact()
    await coordinator.send(Heartbeat(5))
    time.sleep(2 * TIMEOUT)  # noqa: ASYNC251 - the stall: nothing on this event loop runs
    await asyncio.sleep(0.02)
    assert not standing.in_contact()
    assert script.running == 0 and not standing.welcomed
