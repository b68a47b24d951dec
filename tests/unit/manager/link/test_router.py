from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import replace
from pathlib import Path

import msgpack
import pytest
import pytest_asyncio
import zmq
import zmq.asyncio
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from manager.link.auth import REFUSED_METRIC, refused_peers_counter
from manager.link.router import RouterLink, SendResult
from proto.runtime.curve import client_keys, generate, server_keys
from proto.wire import (
    DROPPED_FRAMES_METRIC,
    PROTOCOL_VERSION,
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
    decode,
    dropped_frames_counter,
    encode,
)
from tests.unit import zmq_sockets
from tests.unit.zmq_sockets import within
from workers.link.dealer import DealerLink

KEY = ParentKey("CompositeController", "cc", "things.example.com", "ns", "p-1")


ctx = pytest_asyncio.fixture(zmq_sockets.context, name="ctx")


def _dealer(ctx: zmq.asyncio.Context, endpoint: str, routing_id: bytes) -> zmq.asyncio.Socket:
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.ROUTING_ID, routing_id)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    return sock


def _dropped(registry: CollectorRegistry, reason: str) -> float | None:
    return registry.get_sample_value(DROPPED_FRAMES_METRIC, {"reason": reason})


@pytest.mark.asyncio
async def test_bind_reports_the_port_chosen(ctx: zmq.asyncio.Context, tmp_path: Path) -> None:
    link = RouterLink(context=ctx)
    endpoint = link.bind("tcp://127.0.0.1:0")
    assert endpoint.startswith("tcp://127.0.0.1:") and not endpoint.endswith(":0")
    path = tmp_path / "coord.sock"
    assert link.bind(f"ipc://{path}") == f"ipc://{path}"
    link.close()


@pytest.mark.asyncio
async def test_an_ipc_socket_is_created_for_its_owner_only_whatever_the_umask(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    path = tmp_path / "link.sock"
    saved = os.umask(0)  # left alone, libzmq would create the file 0777
    try:
        link = RouterLink(context=ctx)
        link.bind(f"ipc://{path}")
        assert os.umask(0) == 0  # restored after the bind
    finally:
        os.umask(saved)
    assert stat.S_ISSOCK(path.stat().st_mode)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    link.close()


@pytest.mark.asyncio
async def test_round_trip_with_a_worker_link(ctx: zmq.asyncio.Context, tmp_path: Path) -> None:
    link = RouterLink(context=ctx)
    endpoint = link.bind(f"ipc://{tmp_path}/c.sock")
    worker = DealerLink("w-0", endpoint, context=ctx)
    hello = Hello("w-0", "inc-1", 4, os.getpid())
    assert await within(worker.send(hello, wait=5))
    route, received = await within(link.recv())
    assert received == hello and route.startswith(b"\0")  # a routing id the ROUTER chose

    outbound: list[Message] = [
        Keys(3, Priority.LIVE, (KEY,)),
        Snapshot(3, 1, KEY, b'{"kind":"Thing"}', {"Pod.v1": (b"{}",)}, (), {}),
        Heartbeat(3),
    ]
    for msg in outbound:
        assert await link.send(route, msg) is SendResult.SENT
    assert [await within(worker.recv()) for _ in outbound] == outbound
    worker.close()
    link.close()


@pytest.mark.asyncio
async def test_bad_frames_are_counted_logged_once_and_skipped(ctx: zmq.asyncio.Context) -> None:
    registry = CollectorRegistry()
    with capture_logs() as logs:
        link = RouterLink(
            context=ctx, dropped=dropped_frames_counter(registry), max_frame_size=1024
        )
        endpoint = link.bind("tcp://127.0.0.1:0")
        evil = _dealer(ctx, endpoint, b"evil")
        other = _dealer(ctx, endpoint, b"other")
        garbage = [
            [os.urandom(64)],
            [b"\xc1"],
            [msgpack.packb({"v": PROTOCOL_VERSION + 1, "t": "HELLO"})],
            [msgpack.packb({"v": PROTOCOL_VERSION + 1, "t": "HELLO"})],
            [msgpack.packb({"v": PROTOCOL_VERSION, "t": "GOSSIP"})],
            [encode(Heartbeat(1)), encode(Heartbeat(2))],  # two frames
            [b"", encode(Heartbeat(1))],  # REQ-style empty delimiter
            [encode(Bye("x" * 2000))],  # over the 1 KiB limit
        ]
        for parts in garbage:
            await evil.send_multipart(parts)
        await other.send_multipart([b"\xc1"])
        await evil.send(encode(Heartbeat(7)))
        assert await within(link.recv()) == (b"evil", Heartbeat(7))
        # The other peer's frame went through the same pipe order as its own connection:
        # wait for its drop to be counted too, via a good message behind it.
        await other.send(encode(Heartbeat(8)))
        assert await within(link.recv()) == (b"other", Heartbeat(8))
    assert _dropped(registry, "malformed") == 5  # random, 0xc1, 2 frames, delimiter; other
    assert _dropped(registry, "version") == 2
    assert _dropped(registry, "unknown_type") == 1
    assert _dropped(registry, "oversized") == 1
    dropped = sorted((e["peer"], e["reason"]) for e in logs if e["event"] == "wire frame dropped")
    assert dropped == [
        ("evil", "malformed"),
        ("evil", "oversized"),
        ("evil", "unknown_type"),
        ("evil", "version"),
        ("other", "malformed"),
    ]
    assert all(e["log_level"] == "warning" for e in logs)
    evil.close()
    other.close()
    link.close()


@pytest.mark.asyncio
async def test_a_send_to_an_unknown_worker_is_reported(ctx: zmq.asyncio.Context) -> None:
    link = RouterLink(context=ctx)
    endpoint = link.bind("tcp://127.0.0.1:0")
    assert await link.send(b"nobody", Heartbeat(1)) is SendResult.UNREACHABLE
    peer = _dealer(ctx, endpoint, b"w-1")
    await peer.send(encode(Heartbeat(1)))
    assert await within(link.recv()) == (b"w-1", Heartbeat(1))
    assert await link.send(b"w-1", Bye("x")) is SendResult.SENT
    assert decode(await within(peer.recv())) == Bye("x")
    peer.close()
    link.close()


@pytest.mark.asyncio
async def test_a_message_over_the_limit_is_not_sent(ctx: zmq.asyncio.Context) -> None:
    link = RouterLink(context=ctx, max_frame_size=1024)
    link.bind("tcp://127.0.0.1:0")
    big = Snapshot(1, 1, KEY, b"x" * 2048, {}, (), {})
    assert await link.send(b"w-1", big) is SendResult.TOO_LARGE
    link.close()


@pytest.mark.asyncio
async def test_a_worker_that_stops_reading_does_not_block_the_others(
    ctx: zmq.asyncio.Context,
) -> None:
    link = RouterLink(context=ctx, hwm=4)
    endpoint = link.bind("tcp://127.0.0.1:0")
    stuck = _dealer(ctx, endpoint, b"stuck")
    stuck.setsockopt(zmq.RCVHWM, 4)
    live = _dealer(ctx, endpoint, b"live")
    for sock, name in ((stuck, b"stuck"), (live, b"live")):
        await sock.send(encode(Heartbeat(1)))
        assert (await within(link.recv()))[0] == name
    blob = Snapshot(1, 1, KEY, b"x" * 65536, {}, (), {})
    results = []
    for _ in range(10_000):  # socket buffers absorb some megabytes before the pipe fills
        results.append(await link.send(b"stuck", blob))
        if results[-1] is SendResult.FULL:
            break
    assert results[-1] is SendResult.FULL
    assert await link.send(b"live", Heartbeat(2)) is SendResult.SENT
    assert decode(await within(live.recv())) == Heartbeat(2)
    stuck.close()
    live.close()
    link.close()


@pytest.mark.asyncio
async def test_a_second_connection_claiming_a_live_routing_id_disturbs_nothing(
    ctx: zmq.asyncio.Context,
) -> None:
    link = RouterLink(context=ctx)
    endpoint = link.bind("tcp://127.0.0.1:0")
    old = _dealer(ctx, endpoint, b"w-3")
    await old.send(encode(Hello("w-3", "inc-1", 1, 1)))
    assert await within(link.recv()) == (b"w-3", Hello("w-3", "inc-1", 1, 1))
    new = _dealer(ctx, endpoint, b"w-3")  # the old connection is still up
    for _ in range(3):
        await new.send(encode(Hello("w-3", "inc-2", 1, 2)))
        await old.send(encode(Heartbeat(1)))
    for _ in range(3):  # only the first connection is heard, and nothing aborts
        assert await within(link.recv()) == (b"w-3", Heartbeat(1))
    assert await link.send(b"w-3", Heartbeat(9)) is SendResult.SENT
    assert decode(await within(old.recv())) == Heartbeat(9)
    assert not await new.poll(100)  # no event (pyzmq types the int mask as a list)
    old.close()
    new.close()
    link.close()


@pytest.mark.asyncio
async def test_close_ends_receiving_and_sending(ctx: zmq.asyncio.Context) -> None:
    link = RouterLink(context=ctx)
    endpoint = link.bind("tcp://127.0.0.1:0")
    peer = _dealer(ctx, endpoint, b"w-1")
    received: list[tuple[bytes, object]] = []

    got_one = asyncio.Event()

    async def consume() -> None:
        async for item in link:
            received.append(item)
            got_one.set()

    consumer = asyncio.create_task(consume())
    await peer.send(encode(Fetch(1, 1, KEY, {})))
    await within(got_one.wait())
    link.close()
    await within(consumer)  # iteration ended without an error
    assert received == [(b"w-1", Fetch(1, 1, KEY, {}))]
    with pytest.raises(LinkClosed):
        await link.recv()
    with pytest.raises(LinkClosed):
        await link.send(b"w-1", Heartbeat(1))
    link.close()  # idempotent
    peer.close()


@pytest.mark.asyncio
async def test_cancelling_a_receiver_is_a_cancellation(ctx: zmq.asyncio.Context) -> None:
    link = RouterLink(context=ctx)
    link.bind("tcp://127.0.0.1:0")
    receiver = asyncio.create_task(link.recv())
    await asyncio.sleep(0.01)
    receiver.cancel()
    with pytest.raises(asyncio.CancelledError):
        await receiver
    assert not link.closed
    link.close()


@pytest.mark.asyncio
async def test_terminating_the_context_closes_the_link() -> None:
    context = zmq.asyncio.Context()
    link = RouterLink(context=context)
    link.bind("tcp://127.0.0.1:0")
    receiver = asyncio.create_task(link.recv())
    await asyncio.sleep(0.01)
    context.destroy(linger=0)
    with pytest.raises(LinkClosed):
        await within(receiver)
    with pytest.raises(LinkClosed):
        await link.send(b"w-1", Heartbeat(1))


@pytest.mark.asyncio
async def test_with_curve_only_admitted_workers_get_in_and_others_are_counted(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    keys = generate(tmp_path / "keys")
    stranger = generate(tmp_path / "stranger")
    registry = CollectorRegistry()
    link = RouterLink(context=ctx, curve=server_keys(keys), refused=refused_peers_counter(registry))
    endpoint = link.bind("tcp://127.0.0.1:0")
    plain = _dealer(ctx, endpoint, b"plain")
    await plain.send(encode(Hello("w-0", "plain", 1, 1)))
    # Knows the coordinator's public key, but its own key is not admitted.
    unknown = replace(client_keys(stranger), server_public=client_keys(keys).server_public)
    impostor = DealerLink("w-0", endpoint, context=ctx, curve=unknown)
    await impostor.send(Hello("w-0", "impostor", 1, 1))
    worker = DealerLink("w-0", endpoint, context=ctx, curve=client_keys(keys))
    hello = Hello("w-0", "inc-1", 4, os.getpid())
    assert await within(worker.send(hello, wait=5))
    route, received = await within(link.recv())
    assert received == hello  # the only message that got through
    assert await link.send(route, Heartbeat(1)) is SendResult.SENT
    assert await within(worker.recv()) == Heartbeat(1)

    def refused(reason: str) -> float:
        return registry.get_sample_value(REFUSED_METRIC, {"reason": reason}) or 0.0

    def plain_refused() -> float:
        # ``protocol`` (mechanism mismatch) or ``other``: the plain client saw the mismatch
        # first and hung up mid-handshake. Which side notices first is a race.
        return refused("protocol") + refused("other")

    for _ in range(100):
        if plain_refused() >= 1 and refused("auth") >= 1:
            break
        await asyncio.sleep(0.02)
    assert plain_refused() >= 1 and refused("auth") >= 1
    with pytest.raises(TimeoutError):  # nothing else got through
        await asyncio.wait_for(link.recv(), 0.1)
    for sock in (plain, impostor, worker):
        sock.close()
    link.close()
