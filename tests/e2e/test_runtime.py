"""The sharded runtime with real processes: exclusivity, nothing lost, movement, bad frames.

Every test runs a coordinator and worker processes whose reconciler only records what it does
(``tests.e2e.recorder``), while the test keeps changing parents and disturbs the processes.
Two things must hold throughout:
- no key is reconciled by two processes at overlapping times;
- every parent changed during the disruption is reconciled at (or after) its last change.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import secrets
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import msgpack
import pytest
import pytest_asyncio
import zmq
import zmq.asyncio

from loadtest.apiserver.faults import FaultControl
from manager.election.lease import LEASES
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.runtime import curve
from proto.wire import PROTOCOL_VERSION, Hello, encode
from tests.e2e.harness import Proc, Processes, Recording, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

THINGS = Resource(
    "e2e.metashard.io", "v1", "things", "Thing", namespaced=True, subresources=("status",)
)
CCS = Resource(
    "metacontroller.k8s.io",
    "v1alpha1",
    "compositecontrollers",
    "CompositeController",
    namespaced=False,
)
RECORDER = "tests.e2e.recorder:factory"
PARENTS = 40


@pytest_asyncio.fixture
async def controller(kube: Client) -> AsyncIterator[str]:
    name = f"e2e-{secrets.token_hex(3)}"
    await kube.create(
        CCS,
        {
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "CompositeController",
            "metadata": {"name": name},
            "spec": {
                "generateSelector": True,
                "parentResource": {"apiVersion": "e2e.metashard.io/v1", "resource": "things"},
                "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
                "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:9/unused"}}},
            },
        },
    )
    yield name
    with contextlib.suppress(errors.NotFound):
        await kube.delete(CCS, name)


class World:
    """Parents, the recording, and a writer that keeps changing parents."""

    def __init__(self, kube: Client, namespace: str, recording: Recording) -> None:
        self.kube = kube
        self.namespace = namespace
        self.recording = recording
        self.names = [f"p{i:03d}" for i in range(PARENTS)]
        self.written: dict[str, int] = {}

    async def create(self) -> None:
        for name in self.names:
            obj = await self.kube.create(
                THINGS,
                {
                    "apiVersion": "e2e.metashard.io/v1",
                    "kind": "Thing",
                    "metadata": {"name": name, "namespace": self.namespace},
                    "spec": {"v": 0},
                },
            )
            self.written[f"{self.namespace}/{name}"] = int(obj["metadata"]["resourceVersion"])

    async def touch(self, name: str) -> None:
        obj = await self.kube.patch(
            THINGS, name, {"spec": {"v": secrets.token_hex(4)}}, namespace=self.namespace
        )
        self.written[f"{self.namespace}/{name}"] = int(obj["metadata"]["resourceVersion"])

    async def churn(self, stop: asyncio.Event) -> None:
        rng = random.Random(7)
        while not stop.is_set():
            await self.touch(rng.choice(self.names))
            await asyncio.sleep(0.02)

    async def caught_up(self) -> bool:
        done = self.recording.last_rv()
        return all(done.get(key, -1) >= rv for key, rv in self.written.items())

    def behind(self) -> str:
        done = self.recording.last_rv()
        late = {k: (rv, done.get(k)) for k, rv in self.written.items() if done.get(k, -1) < rv}
        sample = dict(itertools.islice(late.items(), 5))
        return f"{len(late)} parents not reconciled after their last change: {sample}"


@pytest_asyncio.fixture
async def world(
    kube: Client, namespace: str, procs: Processes, controller: str, tmp_path: Path
) -> World:
    record = tmp_path / "reconciles.jsonl"
    procs.env.update({"METASHARD_RECORD": str(record), "METASHARD_RECORD_HOLD": "0.1"})
    w = World(kube, namespace, Recording(record))
    await w.create()
    return w


async def settle(world: World, procs: Processes) -> None:
    await eventually(world.caught_up, within=60, message=lambda: world.behind() + procs.logs())


async def disturbed(world: World, procs: Processes, disturb: object) -> None:
    """Keep changing parents while ``disturb`` runs, then wait until everything caught up."""
    stop = asyncio.Event()
    churn = asyncio.create_task(world.churn(stop))
    await asyncio.sleep(0.5)
    await disturb()  # type: ignore[operator]
    await asyncio.sleep(1.5)
    stop.set()
    await churn
    await settle(world, procs)


def assert_exclusive(world: World, died_at: dict[int, float] | None = None) -> None:
    overlaps = world.recording.overlaps(died_at)
    assert not overlaps, f"reconciled twice at once: {overlaps[:3]}"


def start_workers(procs: Processes, ids: list[str]) -> list[Proc]:
    return [procs.worker(i, reconciler=RECORDER) for i in ids]


async def test_worker_added_and_removed_gracefully(world: World, procs: Processes) -> None:
    procs.coordinator()
    workers = start_workers(procs, ["w-a", "w-b"])
    await settle(world, procs)

    async def add() -> None:
        start_workers(procs, ["w-c"])

    await disturbed(world, procs, add)
    assert {iv.worker for iv in world.recording.intervals()} >= {"w-a", "w-b", "w-c"}

    async def remove() -> None:
        assert await asyncio.to_thread(procs.stop, workers[0]) == 0

    await disturbed(world, procs, remove)
    assert_exclusive(world)


async def test_worker_killed(world: World, procs: Processes) -> None:
    procs.coordinator()
    victim, _ = start_workers(procs, ["w-a", "w-b"])
    await settle(world, procs)
    died: dict[int, float] = {}

    async def kill() -> None:
        died[victim.popen.pid] = time.time()
        procs.kill(victim)

    await disturbed(world, procs, kill)
    assert_exclusive(world, died)
    late = [
        iv
        for iv in world.recording.intervals()
        if iv.pid == victim.popen.pid and iv.start > died[victim.popen.pid]
    ]
    assert not late


async def test_leader_killed_and_replaced(world: World, procs: Processes) -> None:
    first = procs.coordinator("coordinator-1", leader_election=True)
    await eventually(first.ready, within=30, message=procs.logs)
    second = procs.coordinator("coordinator-2", leader_election=True)
    start_workers(procs, ["w-a", "w-b"])
    await settle(world, procs)
    assert not await second.ready()

    async def kill_leader() -> None:
        procs.kill(first)
        await eventually(second.ready, within=30, message=procs.logs)

    await disturbed(world, procs, kill_leader)
    assert_exclusive(world)


async def test_a_leader_stopped_gracefully_hands_over_without_a_wait(
    world: World, procs: Processes
) -> None:
    """SIGTERM: the leader's workers confirm they stopped, the Lease says so, and the next
    leader assigns at once instead of waiting out the worker timeout."""
    first = procs.coordinator("coordinator-1", leader_election=True)
    await eventually(first.ready, within=30, message=procs.logs)
    second = procs.coordinator("coordinator-2", leader_election=True)
    start_workers(procs, ["w-a", "w-b"])
    await settle(world, procs)

    async def stop_leader() -> None:
        assert await asyncio.to_thread(procs.stop, first) == 0
        await eventually(second.ready, within=30, message=procs.logs)

    await disturbed(world, procs, stop_leader)
    assert_exclusive(world)
    log = second.log.read_text()
    assert "no wait for workers of a previous term" in log, procs.logs()
    assert "the previous leader's workers confirmed they stopped" in log, procs.logs()
    assert "waiting 4 s for workers" not in log


async def test_adding_a_fifth_worker_moves_about_a_fifth_of_the_slots(
    world: World, procs: Processes
) -> None:
    coordinator = procs.coordinator()
    start_workers(procs, ["w-1", "w-2", "w-3", "w-4"])

    async def members(n: int) -> bool:
        return await coordinator.metric("metashard_coordinator_workers") == n

    await eventually(lambda: members(4), within=30, message=procs.logs)
    await settle(world, procs)
    before = await coordinator.metric("metashard_coordinator_slots_revoked_total") or 0.0
    start_workers(procs, ["w-5"])

    async def fifth_owns_its_share() -> bool:
        owned = await coordinator.metric("metashard_coordinator_worker_slots", {"worker": "w-5"})
        return owned is not None and owned > 100

    await eventually(fifth_owns_its_share, within=30, message=procs.logs)
    await asyncio.sleep(1.0)
    moved = (await coordinator.metric("metashard_coordinator_slots_revoked_total") or 0) - before
    assert 0.10 * 1024 <= moved <= 0.30 * 1024, moved
    owned = await coordinator.metric("metashard_coordinator_worker_slots", {"worker": "w-5"})
    # Nearly everything that moved went to the newcomer (the load cap may shift a few more).
    assert owned is not None and 0.9 * moved <= owned <= moved
    assert_exclusive(world)


async def test_garbage_on_the_socket_is_counted_and_ignored(world: World, procs: Processes) -> None:
    coordinator = procs.coordinator()
    start_workers(procs, ["w-a"])
    await settle(world, procs)
    ctx = zmq.asyncio.Context()
    try:
        evil = ctx.socket(zmq.DEALER)
        evil.setsockopt(zmq.ROUTING_ID, b"evil")
        evil.setsockopt(zmq.LINGER, 0)
        evil.connect(procs.endpoint)
        rng = random.Random(3)
        for _ in range(50):
            await evil.send(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300))))
        await evil.send(msgpack.packb({"v": 99, "t": "HELLO"}))
        await evil.send(msgpack.packb({"v": PROTOCOL_VERSION, "t": "NOSUCH"}))
        await evil.send_multipart([b"a", b"b", b"c"])

        async def counted() -> bool:
            values = [
                await coordinator.metric("metashard_wire_frames_dropped_total", {"reason": r})
                for r in ("malformed", "version", "unknown_type")
            ]
            return all(v is not None and v >= 1 for v in values)

        await eventually(counted, within=10, message=procs.logs)
        for name in world.names[:10]:
            await world.touch(name)
        await settle(world, procs)
        assert coordinator.alive
    finally:
        ctx.destroy(linger=0)


async def test_a_second_connection_with_a_live_workers_id_disturbs_nobody(
    world: World, procs: Processes
) -> None:
    """A client that connects with the routing id of a live worker (a rogue, or a stale
    process) neither stops the coordinator nor takes the worker's slots."""
    coordinator = procs.coordinator()
    start_workers(procs, ["w-a"])
    await settle(world, procs)
    ctx = zmq.asyncio.Context()
    try:
        for attempt in range(5):
            rogue = ctx.socket(zmq.DEALER)
            rogue.setsockopt(zmq.ROUTING_ID, b"w-a")
            rogue.setsockopt(zmq.LINGER, 0)
            rogue.connect(procs.endpoint)
            await rogue.send(encode(Hello("w-a", f"rogue{attempt}", 1, 1)))
            await asyncio.sleep(0.3)
            rogue.close(linger=0)
        for name in world.names:
            await world.touch(name)
        await settle(world, procs)
        assert coordinator.alive, procs.logs()
        assert {iv.worker for iv in world.recording.intervals()} == {"w-a"}
    finally:
        ctx.destroy(linger=0)


async def test_a_stalled_worker_replaced_under_its_own_id_then_resumed(
    world: World, procs: Processes
) -> None:
    """SIGSTOP a worker, start a replacement with the same id, resume the old one: the
    coordinator survives and every parent converges."""
    coordinator = procs.coordinator()
    (old,) = start_workers(procs, ["w-a"])
    await settle(world, procs)
    frozen_at = time.time()
    old.popen.send_signal(signal.SIGSTOP)
    try:
        (new,) = start_workers(procs, ["w-a"])
        await asyncio.sleep(2.0)
        for name in world.names:
            await world.touch(name)
        await settle(world, procs)
    finally:
        old.popen.send_signal(signal.SIGCONT)
    await asyncio.sleep(3.0)
    for name in world.names:
        await world.touch(name)
    await settle(world, procs)
    assert coordinator.alive, procs.logs()
    assert new.alive, procs.logs()
    # The old process never starts a reconcile after its stall (one in flight when it was
    # frozen counts as ending there: it did nothing while frozen).
    pid = old.popen.pid
    assert not [iv for iv in world.recording.intervals() if iv.pid == pid and iv.start > frozen_at]
    overlaps = [
        (a, b)
        for a, b in world.recording.overlaps()
        if not (pid in (a.pid, b.pid) and min(a.start, b.start) < frozen_at)
    ]
    assert not overlaps, overlaps[:3]


async def test_keys_survive_a_stall_between_the_fence_and_the_worker_timeout(
    world: World, procs: Processes
) -> None:
    """A worker stalled longer than its fence timeout but shorter than the coordinator's
    worker timeout drops its queue when it fences: every key of its slots is delivered again."""
    procs.coordinator()
    (worker,) = start_workers(procs, ["w-a"])
    await settle(world, procs)
    # Fast timings: heartbeat 0.2 s, worker timeout 1.2 s, so the worker fences after 0.8 s.
    for _ in range(3):
        stopped = time.monotonic()
        worker.popen.send_signal(signal.SIGSTOP)
        try:
            for name in world.names:
                await world.touch(name)
            await asyncio.sleep(max(0.0, 0.95 - (time.monotonic() - stopped)))
        finally:
            worker.popen.send_signal(signal.SIGCONT)
        await settle(world, procs)


async def test_transient_discovery_errors_do_not_stop_the_coordinator(
    world: World, procs: Processes, kube: Client, faults: FaultControl
) -> None:
    """500s on discovery while a controller names a resource that does not exist (so every
    retry refreshes discovery) are retried: the other controllers keep running."""
    coordinator = procs.coordinator()
    start_workers(procs, ["w-a"])
    await settle(world, procs)
    broken = f"e2e-broken-{secrets.token_hex(3)}"
    await kube.create(
        CCS,
        {
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "CompositeController",
            "metadata": {"name": broken},
            "spec": {
                "parentResource": {"apiVersion": "e2e.metashard.io/v1", "resource": "nothings"},
                "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:9/unused"}}},
            },
        },
    )
    try:
        faults.fail(4, status=500, method="GET", path=r"^/apis?$")
        await asyncio.sleep(7.0)  # discovery is refreshed at most every 5 s
        for name in world.names:
            await world.touch(name)
        await settle(world, procs)
        assert coordinator.alive and await coordinator.ready(), procs.logs()
    finally:
        await kube.delete(CCS, broken)


async def test_a_term_that_cannot_bind_gives_up_the_lease_and_exits(
    procs: Processes, kube: Client, cluster: str
) -> None:
    """The port is taken (say, by a stalled old leader): the coordinator does not lead on
    without a socket; it releases the Lease and exits non-zero so a standby takes over."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = procs.coordinator(leader_election=True, extra=["--bind", f"tcp://127.0.0.1:{port}"])
        code = await asyncio.to_thread(proc.popen.wait, 30)
    assert code == 1, procs.logs()
    assert "the term failed" in proc.log.read_text()
    lease = await kube.get(
        LEASES, f"ms-{procs.endpoint[-5:]}", namespace=load_config(cluster).namespace
    )
    assert lease["spec"].get("holderIdentity", "") == "", lease


async def test_with_curve_keys_a_plain_client_is_refused_and_counted(
    world: World, procs: Processes, tmp_path: Path
) -> None:
    """The worker socket admits only workers holding the key: a plain ZeroMQ client that
    says HELLO gets nothing (no WELCOME, no slots, no snapshots) and is counted."""
    keys = str(curve.generate(tmp_path / "keys"))
    coordinator = procs.coordinator(extra=["--curve-keys", keys])
    procs.worker("w-a", reconciler=RECORDER, extra=["--curve-keys", keys])
    await settle(world, procs)
    ctx = zmq.asyncio.Context()
    try:
        rogue = ctx.socket(zmq.DEALER)
        rogue.setsockopt(zmq.LINGER, 0)
        rogue.connect(procs.endpoint)
        await rogue.send(encode(Hello("w-rogue", "rogue", 64, 1)), flags=zmq.NOBLOCK)

        async def refused() -> bool:
            # A plain client is refused for the mechanism (``protocol``) or, when it sees the
            # mismatch first and hangs up mid-handshake, for no detail (``other``).
            values = [
                await coordinator.metric("metashard_wire_peers_refused_total", {"reason": reason})
                for reason in ("protocol", "other")
            ]
            return sum(v or 0.0 for v in values) >= 1

        await eventually(refused, within=10, message=procs.logs)
        assert not await rogue.poll(500)  # no event (pyzmq types the int mask as a list)
        assert await coordinator.metric("metashard_coordinator_workers") == 1
        for name in world.names:
            await world.touch(name)
        await settle(world, procs)
        assert {iv.worker for iv in world.recording.intervals()} == {"w-a"}
    finally:
        ctx.destroy(linger=0)
