"""``proto.runtime.loopsocket.LoopSocket`` on real ZeroMQ sockets: order, no lost wake-up,
back-pressure, fairness to other tasks, closing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import zmq
import zmq.asyncio

from proto.runtime.loopsocket import INBOX_LIMIT, YIELD_EVERY, LoopSocket, SocketClosed
from tests.unit import zmq_sockets
from tests.unit.zmq_sockets import within


@pytest_asyncio.fixture
async def ctx() -> AsyncIterator[zmq.asyncio.Context]:
    async for c in zmq_sockets.context():
        yield c


def _pair(
    ctx: zmq.asyncio.Context, endpoint: str, *, unbounded: bool = False
) -> tuple[LoopSocket, LoopSocket]:
    """A bound ROUTER and a DEALER (routing id ``d``) connected to it; ``unbounded``: no
    message is dropped at a high-water mark (a ROUTER drops silently)."""
    router = LoopSocket(ctx, zmq.ROUTER)
    dealer = LoopSocket(ctx, zmq.DEALER)
    if unbounded:
        for side in (router, dealer):
            side.socket.setsockopt(zmq.SNDHWM, 0)
            side.socket.setsockopt(zmq.RCVHWM, 0)
    router.socket.bind(endpoint)
    dealer.socket.setsockopt(zmq.ROUTING_ID, b"d")
    dealer.socket.connect(endpoint)
    return router, dealer


@pytest.mark.asyncio
async def test_messages_arrive_in_order_both_ways(ctx: zmq.asyncio.Context) -> None:
    router, dealer = _pair(ctx, "inproc://order")
    assert await dealer.send_within((b"hello",), 5)
    assert await within(router.recv()) == [b"d", b"hello"]
    for i in range(300):
        router.send((b"d", str(i).encode()))
    got = [await within(dealer.recv()) for _ in range(300)]
    assert got == [[str(i).encode()] for i in range(300)]


@pytest.mark.asyncio
async def test_ping_pong_never_loses_a_wake_up(ctx: zmq.asyncio.Context) -> None:
    """Each side sends while the other waits: a send that consumes the readiness signal of a
    message that has arrived must not leave the waiting reader asleep (the test times out)."""
    router, dealer = _pair(ctx, "inproc://pingpong")
    assert await dealer.send_within((b"0",), 5)
    rounds = 2000

    async def echo() -> None:
        for _ in range(rounds):
            (payload,) = await dealer.recv()
            dealer.send((payload,))

    echoing = asyncio.create_task(echo())
    for i in range(rounds):
        route, payload = await within(router.recv(), 2)
        assert payload == str(i).encode()
        router.send((route, str(i + 1).encode()))
    await within(echoing)


@pytest.mark.asyncio
async def test_sending_while_a_reader_waits_on_the_same_socket_loses_nothing(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    """The coordinator's shape: one task always waiting to receive, another sending on the
    same socket; a send that consumes the readiness signal must not strand the reader."""
    router, dealer = _pair(ctx, f"ipc://{tmp_path}/same.sock", unbounded=True)
    assert await dealer.send_within((b"hello",), 5)
    await within(router.recv())
    count = 3000
    received: list[bytes] = []

    async def echo() -> None:
        while True:
            (payload,) = await dealer.recv()
            dealer.send((payload,))

    async def read() -> None:
        while len(received) < count:
            received.append((await router.recv())[1])

    echoing, reading = asyncio.create_task(echo()), asyncio.create_task(read())
    for i in range(count):
        router.send((b"d", str(i).encode()))
        if i % 3 == 0:
            await asyncio.sleep(0)
    await within(reading, 10)
    echoing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await echoing
    assert received == [str(i).encode() for i in range(count)]


@pytest.mark.asyncio
async def test_a_receive_that_replaces_a_cancelled_one_is_woken(ctx: zmq.asyncio.Context) -> None:
    router, dealer = _pair(ctx, "inproc://replaced")
    assert await dealer.send_within((b"hello",), 5)
    await within(router.recv())
    first = asyncio.create_task(dealer.recv())
    await asyncio.sleep(0.01)
    second = asyncio.create_task(dealer.recv())  # the next phase's reader, already waiting
    await asyncio.sleep(0.01)
    first.cancel()  # its clean-up runs after the second began waiting
    with contextlib.suppress(asyncio.CancelledError):
        await first
    router.send((b"d", b"late"))
    assert await within(second, 2) == [b"late"]


@pytest.mark.asyncio
async def test_more_than_the_inbox_limit_all_arrive(ctx: zmq.asyncio.Context) -> None:
    router, dealer = _pair(ctx, "inproc://limit", unbounded=True)
    assert await dealer.send_within((b"hello",), 5)
    await within(router.recv())
    count = INBOX_LIMIT * 2 + 10
    for i in range(count):
        router.send((b"d", i.to_bytes(4, "big")))
    await asyncio.sleep(0.05)  # all of it has arrived, more than the inbox takes at once
    got = [int.from_bytes((await within(dealer.recv()))[0], "big") for _ in range(count)]
    assert got == list(range(count))


@pytest.mark.asyncio
async def test_a_reader_served_from_the_inbox_lets_other_tasks_run(
    ctx: zmq.asyncio.Context,
) -> None:
    router, dealer = _pair(ctx, "inproc://fair")
    assert await dealer.send_within((b"hello",), 5)
    await within(router.recv())
    for _ in range(YIELD_EVERY * 4):
        router.send((b"d", b"m"))
    await asyncio.sleep(0.05)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    for _ in range(YIELD_EVERY * 4):
        await within(dealer.recv())
    ticking.cancel()
    assert ticks - before >= 3


@pytest.mark.asyncio
async def test_close_wakes_a_waiting_reader_and_fails_later_calls(
    ctx: zmq.asyncio.Context,
) -> None:
    router, _ = _pair(ctx, "inproc://close")
    waiting = asyncio.create_task(router.recv())
    await asyncio.sleep(0.01)
    router.close(linger=0)
    with pytest.raises(SocketClosed):
        await within(waiting)
    with pytest.raises(SocketClosed):
        await router.recv()
    with pytest.raises(SocketClosed):
        router.send((b"d", b"x"))
    router.close()  # idempotent
    assert router.closed


@pytest.mark.asyncio
async def test_destroying_the_context_wakes_a_waiting_reader() -> None:
    context = zmq.asyncio.Context()
    router = LoopSocket(context, zmq.ROUTER)
    router.socket.bind("inproc://destroy")
    waiting = asyncio.create_task(router.recv())
    await asyncio.sleep(0.01)
    context.destroy(linger=0)
    with pytest.raises(SocketClosed):
        await within(waiting)
    assert router.closed


@pytest.mark.asyncio
async def test_sends_without_a_connection_fail_or_wait_for_one(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    endpoint = f"ipc://{tmp_path}/later.sock"
    dealer = LoopSocket(ctx, zmq.DEALER)
    dealer.socket.setsockopt(zmq.IMMEDIATE, 1)
    dealer.socket.setsockopt(zmq.RECONNECT_IVL, 10)
    dealer.socket.connect(endpoint)
    with pytest.raises(zmq.Again):
        dealer.send((b"x",))
    assert not await dealer.send_within((b"x",), 0.05)
    sending = asyncio.create_task(dealer.send_within((b"late",), 5))
    await asyncio.sleep(0.05)
    router = LoopSocket(ctx, zmq.ROUTER)
    router.socket.bind(endpoint)
    assert await within(sending)
    assert (await within(router.recv()))[1] == b"late"
