"""Leader election on a cluster's Lease, with fast timings (lease 2 s, renew 1.5 s, retry 0.3 s)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

import pytest
from prometheus_client import CollectorRegistry

from manager.election.config import ElectionConfig
from manager.election.elector import LeaderElector
from manager.election.lease import LEASES, ClientLeaseLock, LeaderRecord
from manager.election.metrics import PrometheusLeaderMetrics
from tests.integration.conftest import Kube

LEASE = "metashard-leader"


class Timings(TypedDict, total=False):
    """``ElectionConfig``'s timings, as keyword arguments."""

    lease_duration: float
    renew_deadline: float
    retry_period: float


FAST: Timings = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.3}
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@dataclass
class Candidate:
    name: str
    elector: LeaderElector
    registry: CollectorRegistry
    journal: list[tuple[float, str, str]]
    task: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        return self.elector.is_leader

    def status(self) -> float | None:
        return self.registry.get_sample_value("leader_election_master_status", {"name": LEASE})

    def slowpath(self) -> float:
        value = self.registry.get_sample_value("leader_election_slowpath_total", {"name": LEASE})
        return value or 0.0

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@dataclass
class Election:
    kube: Kube
    namespace: str
    journal: list[tuple[float, str, str]] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)

    def start(self, name: str, *, release: bool = True, **timings: Unpack[Timings]) -> Candidate:
        registry = CollectorRegistry()

        async def started(epoch: int) -> None:
            self.journal.append((time.monotonic(), name, f"started {epoch}"))

        async def stopped() -> None:
            await asyncio.sleep(0.05)  # work guarded by the lease winds down
            self.journal.append((time.monotonic(), name, "stopped"))

        merged: Timings = {**FAST, **timings}
        elector = LeaderElector(
            ClientLeaseLock(self.kube.client, namespace=self.namespace, name=LEASE),
            ElectionConfig(identity=name, release_on_cancel=release, **merged),
            on_started_leading=started,
            on_stopped_leading=stopped,
            metrics=PrometheusLeaderMetrics(registry).for_lease(LEASE),
        )
        candidate = Candidate(name, elector, registry, self.journal)
        candidate.task = asyncio.create_task(elector.run())
        self.candidates.append(candidate)
        return candidate

    async def lease(self) -> LeaderRecord:
        lease = await self.kube.client.get(LEASES, LEASE, namespace=self.namespace)
        return LeaderRecord.from_lease(lease)

    async def next_record(self, resource_version: str, *, after: str) -> LeaderRecord:
        """The first record written after ``resource_version`` whose holder is not ``after``."""
        events = self.kube.client.watch(
            LEASES,
            namespace=self.namespace,
            resource_version=resource_version,
            field_selector=f"metadata.name={LEASE}",
            allow_bookmarks=False,
        )
        async with contextlib.aclosing(events):
            async with asyncio.timeout(10):
                async for event in events:
                    record = LeaderRecord.from_lease(event.object)
                    if event.type == "MODIFIED" and record.holder != after:
                        return record
        raise AssertionError("the watch ended before the lease changed hands")

    def leaders(self) -> list[str]:
        return [c.name for c in self.candidates if c.leading and not c.task.done()]  # type: ignore[union-attr]


@contextlib.asynccontextmanager
async def election(kube: Kube, namespace: str) -> AsyncIterator[Election]:
    state = Election(kube, namespace)
    try:
        yield state
    finally:
        for candidate in state.candidates:
            await candidate.stop()


async def until(condition: Callable[[], bool], limit: float = 10.0) -> float:
    """Poll ``condition`` (a plain read); return how long it took."""
    started = time.monotonic()
    for _ in range(int(limit / 0.01)):
        if condition():
            return time.monotonic() - started
        await asyncio.sleep(0.01)
    raise AssertionError("the condition did not come true in time")


@pytest.mark.asyncio
async def test_one_leader_at_a_time_and_the_lease_records_it(kube: Kube, namespace: str) -> None:
    async with election(kube, namespace) as e:
        a = e.start("a")
        await until(lambda: a.leading)
        b = e.start("b")
        for _ in range(150):  # 3 s: several lease durations of renewals
            assert len(e.leaders()) <= 1
            await asyncio.sleep(0.02)
        assert e.leaders() == ["a"] and a.elector.epoch == 0
        assert a.status() == 1 and b.status() == 0
        record = await e.lease()
        assert record.holder == "a" and record.lease_duration_seconds == 2
        assert record.transitions == 0
        assert MICRO_TIME.match(record.acquire_time) and MICRO_TIME.match(record.renew_time)
        assert record.renew_time > record.acquire_time


@pytest.mark.asyncio
async def test_a_crashed_leader_is_replaced_within_the_lease(kube: Kube, namespace: str) -> None:
    async with election(kube, namespace) as e:
        a = e.start("a", release=False)
        await until(lambda: a.leading)
        b = e.start("b")
        await asyncio.sleep(1.0)
        await a.stop()  # stops renewing, does not release: as good as a crash
        assert (await e.lease()).holder == "a"
        took = await until(lambda: b.leading)
        # b waits a whole lease from the last renewal it observed, plus its jittered retry.
        assert 1.5 <= took <= 2.0 + 0.3 * 2.2 + 1.5
        assert b.elector.epoch == 1 and (await e.lease()).holder == "b"


@pytest.mark.asyncio
async def test_release_on_cancel_hands_over_in_about_a_retry_period(
    kube: Kube, namespace: str
) -> None:
    timings: Timings = {"lease_duration": 5.0, "renew_deadline": 3.0, "retry_period": 0.3}
    async with election(kube, namespace) as e:
        a = e.start("a", **timings)
        await until(lambda: a.leading)
        b = e.start("b", **timings)
        await asyncio.sleep(0.5)
        before = await kube.client.get(LEASES, LEASE, namespace=namespace)
        await a.stop()
        # b may take the lease before a read here: the released record is read from the
        # Lease's history, the first change after a's last renewal.
        released = await e.next_record(before["metadata"]["resourceVersion"], after="a")
        assert released.holder == "" and released.lease_duration_seconds == 1
        assert released.transitions == 0
        took = await until(lambda: b.leading)
        assert took <= 0.3 * 2.2 + 1.0  # not the 5 s lease
        assert a.status() == 0 and b.status() == 1


@pytest.mark.asyncio
async def test_a_renewal_with_a_stale_resource_version_takes_the_slow_path(
    kube: Kube, namespace: str
) -> None:
    async with election(kube, namespace) as e:
        a = e.start("a")
        await until(lambda: a.leading)
        # Someone else writes the lease: the leader's cached resourceVersion goes stale.
        await kube.client.patch(
            LEASES, LEASE, {"metadata": {"annotations": {"touched": "yes"}}}, namespace=namespace
        )
        await until(lambda: a.slowpath() >= 1, limit=5)
        await asyncio.sleep(0.7)
        assert a.leading and a.elector.epoch == 0
        record = await e.lease()
        assert record.holder == "a" and record.transitions == 0
        lease = await kube.client.get(LEASES, LEASE, namespace=namespace)
        assert lease["metadata"]["annotations"]["touched"] == "yes"  # kept by the renewals


@pytest.mark.asyncio
async def test_epochs_grow_with_every_term_and_callbacks_do_not_overlap(
    kube: Kube, namespace: str
) -> None:
    async with election(kube, namespace) as e:
        a = e.start("a")
        await until(lambda: a.leading)
        b = e.start("b")
        await a.stop()
        await until(lambda: b.leading)
        a2 = e.start("a2")
        await b.stop()
        await until(lambda: a2.leading)
        assert [a.elector.epoch, b.elector.epoch, a2.elector.epoch] == [None, None, 2]
        assert (await e.lease()).transitions == 2
        journal = [(who, what) for _, who, what in e.journal]
        assert journal == [
            ("a", "started 0"),
            ("a", "stopped"),
            ("b", "started 1"),
            ("b", "stopped"),
            ("a2", "started 2"),
        ]
        times = [t for t, _, _ in e.journal]
        assert times == sorted(times)  # each term's stop came before the next term's start


@pytest.mark.asyncio
@pytest.mark.slow
@pytest.mark.parametrize("status", [429, 500])
async def test_a_leader_keeps_its_lease_through_a_short_storm_of_errors(
    kube: Kube, namespace: str, status: int
) -> None:
    """A 3 s storm of 429s (with Retry-After) or 500s on the Lease: with the default timings
    (lease 15 s, renew deadline 10 s, retry 2 s) the leader renews after it, and leads on."""
    faults = kube.faults()
    defaults: Timings = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0}
    async with election(kube, namespace) as state:
        leader = state.start("a", **defaults)
        await until(lambda: leader.leading)
        for _ in range(2):
            faults.fail(100_000, status=status, path="/leases", retry_after=1)
            await asyncio.sleep(3.0)
            faults.clear()
            await asyncio.sleep(2.5)
        assert leader.leading, state.journal
        assert [entry for entry in state.journal if entry[2] == "stopped"] == []
