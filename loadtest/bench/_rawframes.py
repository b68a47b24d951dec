"""The floor of the link benchmarks: pre-encoded frames between a ROUTER and a DEALER.

Both ends are ``proto.runtime.loopsocket`` sockets (what the links are built on: the socket's
descriptor in the loop, every waiting message drained per wake-up, no future per message), in
this process over ``ipc://``. No codec and no link logic run, so a link's ratio to these
figures is what its encoding, decoding and bookkeeping cost on top of moving the same bytes.
A ``zmq.asyncio`` loop (one future per message) would be a lower, easier baseline: the links
beat it by an order of magnitude, which says nothing about them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import zmq

from proto.runtime.loopsocket import LoopSocket

WINDOW = 64
ROUTING_ID = b"raw-worker"
SEND_WITHIN = 5.0  # seconds a send may wait for room before the run fails


@contextlib.asynccontextmanager
async def _pair(endpoint: str) -> AsyncIterator[tuple[LoopSocket, LoopSocket]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    router = LoopSocket(ctx, zmq.ROUTER)
    dealer = LoopSocket(ctx, zmq.DEALER)
    try:
        router.socket.setsockopt(zmq.LINGER, 0)
        router.socket.setsockopt(zmq.ROUTER_MANDATORY, 1)  # no room: Again, not a silent drop
        dealer.socket.setsockopt(zmq.LINGER, 0)
        dealer.socket.setsockopt(zmq.ROUTING_ID, ROUTING_ID)
        router.socket.bind(endpoint)
        dealer.socket.connect(endpoint)
        await _sent(dealer, [b"hello"])
        await router.recv()  # connected both ways
        yield router, dealer
    finally:
        router.close()
        dealer.close()
        ctx.destroy(linger=0)


async def _sent(sock: LoopSocket, parts: list[bytes]) -> None:
    if not await sock.send_within(parts, SEND_WITHIN):
        raise RuntimeError(f"no room to send within {SEND_WITHIN:g} s")


async def messages(endpoint: str, frame: bytes, count: int) -> float:
    """ROUTER -> DEALER messages per second: ``count`` frames, received as they come."""
    async with _pair(endpoint) as (router, dealer):

        async def send() -> None:
            for _ in range(count):
                await _sent(router, [ROUTING_ID, frame])

        started = time.perf_counter()
        sending = asyncio.create_task(send())
        for _ in range(count):
            await dealer.recv()
        await sending
        return count / (time.perf_counter() - started)


async def pump(
    count: int, push: Callable[[], Awaitable[object]], pull: Callable[[], Awaitable[object]]
) -> float:
    """Round trips per second: ``count`` pushes, at most ``WINDOW`` unanswered at a time."""
    started = time.perf_counter()
    sent = 0
    for _ in range(min(WINDOW, count)):
        await push()
        sent += 1
    for _ in range(count):
        await pull()
        if sent < count:
            await push()
            sent += 1
    return count / (time.perf_counter() - started)


async def round_trips(endpoint: str, push: bytes, reply: bytes, count: int) -> float:
    """Round trips per second (``pump``): the ROUTER sends ``push``, the DEALER answers
    ``reply``."""
    async with _pair(endpoint) as (router, dealer):

        async def echo() -> None:
            while True:
                await dealer.recv()
                await _sent(dealer, [reply])

        echoing = asyncio.create_task(echo())
        try:
            return await pump(count, lambda: _sent(router, [ROUTING_ID, push]), router.recv)
        finally:
            echoing.cancel()
            await asyncio.gather(echoing, return_exceptions=True)
