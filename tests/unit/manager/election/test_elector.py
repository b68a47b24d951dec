"""Leader election against an in-memory Lease with optimistic concurrency, on a fake clock."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, Unpack

import pytest
from prometheus_client import CollectorRegistry

from manager.election.config import ElectionConfig, default_identity
from manager.election.elector import LeaderElector, PreviousTerm
from manager.election.lease import LeaderRecord, Lease, micro_time
from manager.election.metrics import PrometheusLeaderMetrics
from proto.kube.errors import AlreadyExists, Conflict, error_from_status
from proto.runtime.clock import FakeClock

MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class Timings(TypedDict, total=False):
    """``ElectionConfig``'s timings, as keyword arguments."""

    lease_duration: float
    renew_deadline: float
    retry_period: float


FAST: Timings = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0}


def _status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "status": "Failure", "reason": reason, "code": code}


@dataclass
class LeaseServer:
    """One Lease object with resourceVersions; ``down`` makes every call fail with a 500."""

    lease: Lease | None = None
    rv: int = 0
    down: bool = False
    writes: list[LeaderRecord] = field(default_factory=list)

    def _check(self) -> None:
        if self.down:
            raise error_from_status(500, _status(500, "InternalError"))

    def store(self, spec: dict[str, Any], metadata: dict[str, Any] | None = None) -> Lease:
        self.rv += 1
        meta = {
            **(metadata or {}),
            "name": "lead",
            "namespace": "ns",
            "resourceVersion": str(self.rv),
        }
        self.lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": spec,
        }
        self.writes.append(LeaderRecord.from_lease(self.lease))
        return self.lease

    def holder(self) -> str:
        return LeaderRecord.from_lease(self.lease).holder if self.lease else ""


class FakeLock:
    def __init__(self, server: LeaseServer) -> None:
        self.server = server

    @property
    def description(self) -> str:
        return "ns/lead"

    async def get(self) -> Lease | None:
        await asyncio.sleep(0)
        self.server._check()
        return self.server.lease

    async def create(self, record: LeaderRecord) -> Lease:
        await asyncio.sleep(0)
        self.server._check()
        if self.server.lease is not None:
            raise AlreadyExists(409, _status(409, "AlreadyExists"))
        return self.server.store(record.to_spec())

    async def update(self, lease: Lease, record: LeaderRecord) -> Lease:
        await asyncio.sleep(0)
        self.server._check()
        current = self.server.lease
        assert current is not None
        if lease["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise Conflict(409, _status(409, "Conflict"))
        return self.server.store(record.to_spec(), lease["metadata"])


@dataclass
class Candidate:
    elector: LeaderElector
    registry: CollectorRegistry
    log: list[str]
    task: asyncio.Task[None] | None = None

    def leading(self) -> bool:
        """``elector.is_leader`` read anew: mypy keeps a narrowed property (mypy#11969)."""
        return self.elector.is_leader

    def status(self) -> float | None:
        return self.registry.get_sample_value("leader_election_master_status", {"name": "lead"})

    def slowpath(self) -> float | None:
        return self.registry.get_sample_value("leader_election_slowpath_total", {"name": "lead"})

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run())

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def candidate(
    server: LeaseServer,
    clock: FakeClock,
    name: str,
    *,
    release: bool = True,
    workers_stopped: bool = False,
    wall: datetime | None = None,
    **timings: Unpack[Timings],
) -> Candidate:
    log: list[str] = []
    registry = CollectorRegistry()

    async def started(epoch: int) -> None:
        log.append(f"started {epoch} holder={server.holder()}")

    async def stopped() -> None:
        await asyncio.sleep(0)
        log.append(f"stopped holder={server.holder()}")

    merged: Timings = {**FAST, **timings}
    config = ElectionConfig(identity=name, release_on_cancel=release, **merged)
    elector = LeaderElector(
        FakeLock(server),
        config,
        on_started_leading=started,
        on_stopped_leading=stopped,
        clock=clock,
        wall_clock=(lambda: wall) if wall is not None else (lambda: datetime.now(UTC)),
        metrics=PrometheusLeaderMetrics(registry).for_lease("lead"),
        rng=random.Random(name),
        workers_stopped=lambda: workers_stopped,
    )
    return Candidate(elector, registry, log)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def step(clock: FakeClock, seconds: float, *, dt: float = 0.1) -> None:
    """Advance the fake clock in small steps, letting tasks run between them."""
    for _ in range(round(seconds / dt)):
        clock.advance(dt)
        await settle()


@contextlib.asynccontextmanager
async def running(*candidates: Candidate) -> AsyncIterator[None]:
    for c in candidates:
        c.start()
    await settle()
    try:
        yield
    finally:
        for c in candidates:
            if c.task is not None and not c.task.done():
                await c.stop()


@pytest.mark.asyncio
async def test_first_candidate_creates_the_lease_and_leads_with_epoch_0() -> None:
    server, clock = LeaseServer(), FakeClock()
    a = candidate(server, clock, "a")
    async with running(a):
        assert a.leading() and a.elector.epoch == 0
        assert a.elector.previous_term is PreviousTerm.NONE  # it created the Lease
        assert a.log == ["started 0 holder=a"]
        assert a.status() == 1
        spec = server.lease["spec"]  # type: ignore[index]
        assert spec["holderIdentity"] == "a"
        assert spec["leaseDurationSeconds"] == 15
        assert spec["leaseTransitions"] == 0
        assert MICRO_TIME.match(spec["acquireTime"]) and MICRO_TIME.match(spec["renewTime"])
        before = server.rv
        await step(clock, 6.0)
        assert server.rv >= before + 2  # renewed every retry period
        assert all(w.holder == "a" and w.transitions == 0 for w in server.writes)


@pytest.mark.asyncio
async def test_two_candidates_never_lead_at_once_and_a_crash_fails_over_within_the_lease() -> None:
    server, clock = LeaseServer(), FakeClock()
    a = candidate(server, clock, "a", release=False)
    b = candidate(server, clock, "b")
    async with running(a, b):
        assert a.leading() and not b.leading()
        for _ in range(100):  # 10 s of renewals
            await step(clock, 0.1)
            assert not (a.leading() and b.leading())
        assert a.leading()
        # "Crash" a: it stops renewing and does not release.
        await a.stop()
        crashed_at = clock.now()
        assert a.log[-1] == "stopped holder=a"
        assert server.holder() == "a"
        took_over = None
        for _ in range(300):
            await step(clock, 0.1)
            if b.leading():
                took_over = clock.now() - crashed_at
                break
        assert took_over is not None
        # b must wait out a whole lease from its last observed change (a's last renewal, at
        # most one retry period before the crash), then take it on its next jittered try.
        assert 15.0 - 2.0 <= took_over <= 15.0 + 2.0 * 2.2 + 0.5
        assert b.elector.epoch == 1 and server.lease["spec"]["leaseTransitions"] == 1  # type: ignore[index]
        assert b.elector.previous_term is PreviousTerm.EXPIRED
        assert b.log == ["started 1 holder=b"]
        assert b.status() == 1 and a.status() == 0


@pytest.mark.asyncio
async def test_release_on_cancel_hands_over_within_a_retry_period() -> None:
    server, clock = LeaseServer(), FakeClock()
    a = candidate(server, clock, "a")
    b = candidate(server, clock, "b")
    async with running(a, b):
        await step(clock, 5.0)
        await a.stop()
        # The stopped callback ran while a still held the lease; the release came after.
        assert a.log == ["started 0 holder=a", "stopped holder=a"]
        released = server.writes[-1]
        assert released.holder == "" and released.lease_duration_seconds == 1
        assert released.transitions == 0
        assert a.status() == 0
        waited = 0.0
        while not b.leading():
            await step(clock, 0.1)
            waited += 0.1
        assert waited <= 2.0 * 2.2 + 0.2  # one jittered retry period, not a lease duration
        assert b.elector.epoch == 1
        assert b.elector.previous_term is PreviousTerm.RELEASED


@pytest.mark.asyncio
@pytest.mark.parametrize("stopped", [True, False])
async def test_a_release_says_whether_the_terms_workers_stopped(stopped: bool) -> None:
    server, clock = LeaseServer(), FakeClock()
    a = candidate(server, clock, "a", workers_stopped=stopped)
    b = candidate(server, clock, "b")
    async with running(a, b):
        await step(clock, 3.0)
        await a.stop()
        while not b.leading():
            await step(clock, 0.1)
        expected = PreviousTerm.HANDED_OVER if stopped else PreviousTerm.RELEASED
        assert b.elector.previous_term is expected
        # The mark names the term it was written for: b's own release (no mark) is not
        # taken for a hand-over by the next leader.
        c = candidate(server, clock, "c")
        c.start()
        await b.stop()
        while not c.leading():
            await step(clock, 0.1)
        assert c.elector.previous_term is PreviousTerm.RELEASED
        await c.stop()


@pytest.mark.asyncio
async def test_renewals_failing_past_the_deadline_end_the_term_then_a_new_one_begins() -> None:
    server, clock = LeaseServer(), FakeClock()
    a = candidate(server, clock, "a")
    async with running(a):
        await step(clock, 3.0)
        server.down = True
        down_at = clock.now()
        while a.leading():
            await step(clock, 0.1)
        lost_after = clock.now() - down_at
        assert 10.0 - 2.0 <= lost_after <= 10.0 + 2.0 + 0.2
        assert a.log[-1] == "stopped holder=a" and a.status() == 0
        server.down = False
        while not a.leading():
            await step(clock, 0.1)
        # The Lease still named it: whether its old term's workers stopped is not known.
        assert a.elector.previous_term is PreviousTerm.UNKNOWN
        # Same identity, but a new term: a new epoch.
        assert a.elector.epoch == 1
        assert a.log[-1] == "started 1 holder=a"


@pytest.mark.asyncio
async def test_a_stale_resource_version_on_renew_takes_the_slow_path_and_keeps_leading() -> None:
    server, clock = LeaseServer(), FakeClock()
    a = candidate(server, clock, "a")
    async with running(a):
        assert a.slowpath() == 0
        # Someone else updates the lease (an annotation): a's cached resourceVersion is stale.
        lease = server.lease
        assert lease is not None
        server.store(lease["spec"], {**lease["metadata"], "annotations": {"x": "y"}})
        await step(clock, 2.5)
        assert a.slowpath() == 1
        assert a.leading() and a.elector.epoch == 0
        assert server.writes[-1].holder == "a" and server.writes[-1].transitions == 0
        assert server.lease["metadata"]["annotations"] == {"x": "y"}  # type: ignore[index]


@pytest.mark.asyncio
async def test_seeing_another_holder_ends_the_term_at_once() -> None:
    server, clock = LeaseServer(), FakeClock()
    a = candidate(server, clock, "a")
    async with running(a):
        lease = server.lease
        assert lease is not None
        server.store({**lease["spec"], "holderIdentity": "intruder", "leaseTransitions": 1})
        await step(clock, 2.5)
        assert not a.leading()
        assert a.log[-1] == "stopped holder=intruder"


@pytest.mark.asyncio
async def test_observed_time_not_record_timestamps_decides_expiry() -> None:
    server, clock = LeaseServer(), FakeClock()
    # A lease renewed "long ago" by the record's own timestamps, held by someone else.
    ancient = micro_time(datetime(2001, 1, 1, tzinfo=UTC))
    server.store(
        {
            "holderIdentity": "other",
            "leaseDurationSeconds": 15,
            "acquireTime": ancient,
            "renewTime": ancient,
            "leaseTransitions": 4,
        }
    )
    future = datetime.now(UTC) + timedelta(days=365)  # b's wall clock is a year off
    b = candidate(server, clock, "b", wall=future)
    async with running(b):
        await step(clock, 12.0)
        assert not b.leading()  # 15 s from when b first saw it, whatever it says
        await step(clock, 8.0)
        assert b.leading() and b.elector.epoch == 5
        assert server.lease["spec"]["acquireTime"] == micro_time(future)  # type: ignore[index]


@pytest.mark.asyncio
async def test_the_started_task_is_cancelled_before_the_stopped_callback() -> None:
    server, clock = LeaseServer(), FakeClock()
    events: list[str] = []

    async def started(epoch: int) -> None:
        events.append("started")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append("started cancelled")
            raise

    async def stopped() -> None:
        events.append("stopped")

    async def failing_stopped() -> None:
        events.append("stopped")
        raise RuntimeError("callback bug")

    for on_stopped in (stopped, failing_stopped):
        events.clear()
        server = LeaseServer()
        elector = LeaderElector(
            FakeLock(server),
            ElectionConfig(identity="a", **FAST),
            on_started_leading=started,
            on_stopped_leading=on_stopped,
            clock=clock,
        )
        task = asyncio.create_task(elector.run())
        await settle()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert events == ["started", "started cancelled", "stopped"]
        assert server.holder() == ""  # released even though the callback raised


@pytest.mark.parametrize(
    ("timings", "message"),
    [
        ({"lease_duration": 10.0, "renew_deadline": 10.0}, "greater than renew_deadline"),
        ({"renew_deadline": 2.4, "retry_period": 2.0}, r"1.2 x retry_period"),
        ({"retry_period": 0.0}, "positive"),
        ({"lease_duration": 15.5}, "whole number"),
        ({"identity": ""}, "identity"),
    ],
)
def test_config_is_validated(timings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ElectionConfig(**timings)


def test_identity_and_micro_time() -> None:
    first, second = default_identity(), default_identity()
    assert first != second and "_" in first
    moment = datetime(2030, 1, 1, 0, 0, 0, 500, tzinfo=UTC)
    assert micro_time(moment) == "2030-01-01T00:00:00.000500Z"
    assert MICRO_TIME.match(micro_time(datetime.now(UTC)))
