from __future__ import annotations

import asyncio
import os
from pathlib import Path

import msgpack
import pytest
import pytest_asyncio
import zmq
import zmq.asyncio
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from proto.wire import (
    DROPPED_FRAMES_METRIC,
    PROTOCOL_VERSION,
    Bye,
    Fetch,
    Heartbeat,
    Hello,
    LinkClosed,
    Message,
    ParentKey,
    Released,
    decode,
    dropped_frames_counter,
    encode,
)
from tests.unit import zmq_sockets
from tests.unit.zmq_sockets import within
from workers.link.dealer import DealerLink

KEY = ParentKey("CompositeController", "cc", "things.example.com", "ns", "p-1")


ctx = pytest_asyncio.fixture(zmq_sockets.context, name="ctx")


def _router(ctx: zmq.asyncio.Context, endpoint: str = "tcp://127.0.0.1:0") -> zmq.asyncio.Socket:
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
    sock.bind(endpoint)
    return sock


def _endpoint(sock: zmq.asyncio.Socket) -> str:
    endpoint: str = sock.getsockopt_string(zmq.LAST_ENDPOINT)
    return endpoint


async def _recv(router: zmq.asyncio.Socket) -> tuple[bytes, Message]:
    routing_id, frame = await within(router.recv_multipart())
    return routing_id, decode(frame)


async def _joined(link: DealerLink, router: zmq.asyncio.Socket) -> bytes:
    """Wait until ``router`` has heard from ``link``; the routing id to address it by."""
    hello = Hello("w", "inc", 1, os.getpid())
    assert await within(link.send(hello, wait=5))
    route, msg = await _recv(router)
    assert msg == hello
    return route


@pytest.mark.asyncio
async def test_round_trip_on_a_routing_id_the_router_chose(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    router = _router(ctx, f"ipc://{tmp_path}/c.sock")
    link = DealerLink("w-7", _endpoint(router), context=ctx)
    route = await _joined(link, router)
    assert route != b"w-7" and route.startswith(b"\0")  # the worker sets no routing id
    assert await link.send(Fetch(2, 11, KEY, {"pods": "3"}))
    assert await _recv(router) == (route, Fetch(2, 11, KEY, {"pods": "3"}))
    await router.send_multipart([route, encode(Heartbeat(2))])
    assert await within(link.recv()) == Heartbeat(2)
    link.close()
    router.close()


@pytest.mark.asyncio
async def test_without_a_connection_sends_fail_instead_of_queueing(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    endpoint = f"ipc://{tmp_path}/later.sock"  # nothing listens there yet
    link = DealerLink("w-1", endpoint, context=ctx)
    assert await link.send(Heartbeat(1)) is False
    assert await link.send(Heartbeat(1), wait=0.05) is False
    router = _router(ctx, endpoint)
    hello = Hello("w-1", "inc", 1, 1)
    assert await within(link.send(hello, wait=5))  # waits for the connection
    assert (await _recv(router))[1] == hello  # and only the HELLO was queued
    assert not await router.poll(50)  # no event (pyzmq types the int mask as a list)
    link.close()
    router.close()


@pytest.mark.asyncio
async def test_bad_frames_are_counted_logged_once_and_skipped(ctx: zmq.asyncio.Context) -> None:
    registry = CollectorRegistry()
    router = _router(ctx)
    with capture_logs() as logs:
        link = DealerLink(
            "w-2", _endpoint(router), context=ctx, dropped=dropped_frames_counter(registry)
        )
        route = await _joined(link, router)
        for parts in (
            [os.urandom(32)],
            [b""],
            [encode(Heartbeat(1)), encode(Heartbeat(2))],
            [msgpack.packb({"v": 0, "t": "WELCOME"})],
            [msgpack.packb({"v": 0, "t": "WELCOME"})],
            [msgpack.packb({"v": PROTOCOL_VERSION, "t": "TELEPORT"})],
        ):
            await router.send_multipart([route, *parts])
        await router.send_multipart([route, encode(Bye("leader lost"))])
        assert await within(link.recv()) == Bye("leader lost")
    assert registry.get_sample_value(DROPPED_FRAMES_METRIC, {"reason": "malformed"}) == 3
    assert registry.get_sample_value(DROPPED_FRAMES_METRIC, {"reason": "version"}) == 2
    assert registry.get_sample_value(DROPPED_FRAMES_METRIC, {"reason": "unknown_type"}) == 1
    assert registry.get_sample_value(DROPPED_FRAMES_METRIC, {"reason": "oversized"}) == 0
    dropped = [(e["peer"], e["reason"]) for e in logs if e["event"] == "wire frame dropped"]
    peer = _endpoint(router)
    assert dropped == [(peer, "malformed"), (peer, "version"), (peer, "unknown_type")]
    link.close()
    router.close()


@pytest.mark.asyncio
async def test_reconnect_drops_stale_queued_messages(ctx: zmq.asyncio.Context) -> None:
    # The old coordinator hangs: it keeps the connection but reads nothing, so the worker's
    # messages pile up in its DEALER's queue. After reconnect() to the new coordinator, only
    # fresh messages may arrive anywhere.
    old = _router(ctx)
    old.setsockopt(zmq.RCVHWM, 1)
    link = DealerLink("w-3", _endpoint(old), context=ctx, hwm=1)
    await _joined(link, old)
    stale = Released(1, tuple(range(1024)))
    queued = 0
    for _ in range(10_000):  # socket buffers absorb some megabytes before the queue fills
        if not await link.send(stale, wait=0.2):  # False: no room for 0.2 s
            break
        queued += 1
    else:
        pytest.fail("the DEALER's queue never filled")

    new = _router(ctx)
    link.reconnect(_endpoint(new))
    fresh = Heartbeat(2)
    assert await within(link.send(fresh, wait=5))
    assert (await _recv(new))[1] == fresh
    assert not await new.poll(50)  # no event (pyzmq types the int mask as a list)

    delivered = 1  # the HELLO
    while await old.poll(200):
        await old.recv_multipart()
        delivered += 1
    assert delivered < 1 + queued  # what sat in the closed socket's queue is gone
    link.close()
    old.close()
    new.close()


@pytest.mark.asyncio
async def test_a_pending_receive_carries_on_across_reconnect(ctx: zmq.asyncio.Context) -> None:
    first = _router(ctx)
    link = DealerLink("w-4", _endpoint(first), context=ctx)
    await _joined(link, first)
    receiver = asyncio.create_task(link.recv())
    await asyncio.sleep(0.01)
    second = _router(ctx)
    link.reconnect(_endpoint(second))
    route = await _joined(link, second)
    await second.send_multipart([route, encode(Heartbeat(5))])
    assert await within(receiver) == Heartbeat(5)
    link.close()
    first.close()
    second.close()


@pytest.mark.asyncio
async def test_close_ends_receiving_and_sending(ctx: zmq.asyncio.Context) -> None:
    router = _router(ctx)
    link = DealerLink("w-5", _endpoint(router), context=ctx)
    route = await _joined(link, router)
    received: list[Message] = []

    got_one = asyncio.Event()

    async def consume() -> None:
        async for msg in link:
            received.append(msg)
            got_one.set()

    consumer = asyncio.create_task(consume())
    await router.send_multipart([route, encode(Heartbeat(1))])
    await within(got_one.wait())
    link.close()
    await within(consumer)
    assert received == [Heartbeat(1)]
    with pytest.raises(LinkClosed):
        await link.recv()
    with pytest.raises(LinkClosed):
        await link.send(Heartbeat(1))
    with pytest.raises(LinkClosed):
        link.reconnect()
    link.close()
    router.close()


@pytest.mark.asyncio
async def test_a_send_waiting_for_a_connection_fails_on_reconnect(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    endpoint = f"ipc://{tmp_path}/nobody.sock"
    link = DealerLink("w-6", endpoint, context=ctx)
    sender = asyncio.create_task(link.send(Heartbeat(1), wait=10))
    await asyncio.sleep(0.05)
    link.reconnect()
    assert await within(sender) is False
    waiting = asyncio.create_task(link.send(Heartbeat(1), wait=10))
    await asyncio.sleep(0.05)
    link.close()
    with pytest.raises(LinkClosed):
        await within(waiting)


@pytest.mark.parametrize("worker_id", ["", "\0w", "w" * 256])
def test_worker_ids_must_be_valid_routing_ids(worker_id: str) -> None:
    with pytest.raises(ValueError, match="worker id"):
        DealerLink(worker_id, "tcp://127.0.0.1:1")


@pytest.mark.asyncio
async def test_terminating_the_context_closes_the_link(tmp_path: Path) -> None:
    context = zmq.asyncio.Context()
    link = DealerLink("w-8", f"ipc://{tmp_path}/nobody.sock", context=context)
    receiver = asyncio.create_task(link.recv())
    sender = asyncio.create_task(link.send(Heartbeat(1), wait=10))
    await asyncio.sleep(0.01)
    context.destroy(linger=0)
    for task in (receiver, sender):
        with pytest.raises(LinkClosed):
            await within(task)


async def _events_until(link: DealerLink, wanted: zmq.Event) -> list[zmq.Event]:
    """The monitor's events, read until ``wanted`` comes (or the test fails after 5 s)."""
    seen: list[zmq.Event] = []

    async def read() -> None:
        while wanted not in seen:
            seen.extend(event for event, _ in link.events())
            await asyncio.sleep(0.01)

    await within(read())
    return seen


@pytest.mark.asyncio
async def test_events_tell_a_refused_connection_from_a_handshake(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    link = DealerLink("w-e", f"ipc://{tmp_path}/nobody.sock", context=ctx, reconnect_ivl=0.01)
    seen = await _events_until(link, zmq.Event.CONNECT_RETRIED)
    assert zmq.Event.CONNECTED not in seen
    router = _router(ctx)
    link.reconnect(_endpoint(router))
    seen = await _events_until(link, zmq.Event.HANDSHAKE_SUCCEEDED)
    assert seen[:2] == [zmq.Event.CONNECTED, zmq.Event.HANDSHAKE_SUCCEEDED]
    assert link.events() == []
    link.close()
    assert link.events() == []
    router.close()
