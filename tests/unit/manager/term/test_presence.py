"""manager.term.presence: two coordinators renewing one presence Lease see each other, and
only while both write it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from manager.controllers.running import ControllerSet
from manager.election.lease import LeaderRecord, Lease
from manager.kinds.decorator import DecoratorView
from manager.term.metrics import TermMetrics
from manager.term.presence import Presence
from proto.api.decorator import parse_decorator_controller
from proto.kube.errors import Conflict, Forbidden
from proto.kube.resources import Resource
from proto.runtime.clock import FakeClock

PODS = Resource("", "v1", "pods", "Pod", True)


class Lock:
    """One Lease in memory, with resourceVersions and their preconditions."""

    description = "default/metashard-presence"

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.version = 0
        self.refuse: Exception | None = None

    async def get(self) -> Lease | None:
        if self.refuse is not None:
            raise self.refuse
        return self.lease

    def _store(self, record: LeaderRecord) -> Lease:
        self.version += 1
        self.lease = {"metadata": {"resourceVersion": str(self.version)}, "spec": record.to_spec()}
        return self.lease

    async def create(self, record: LeaderRecord) -> Lease:
        assert self.lease is None
        return self._store(record)

    async def update(self, lease: Lease, record: LeaderRecord) -> Lease:
        assert self.lease is not None
        if lease["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise Conflict(409, {"message": "stale"})
        return self._store(record)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def emit(self, obj: Any, type: str, reason: str, message: str) -> None:
        self.events.append((obj["metadata"]["name"], reason, message))


def controllers(*names: str) -> ControllerSet:
    running = ControllerSet()
    views = {}
    for name in names:
        obj = {
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "DecoratorController",
            "metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": {
                "resources": [{"apiVersion": "v1", "resource": "pods"}],
                "hooks": {"sync": {"webhook": {"url": "http://h/sync"}}},
            },
        }
        raw = orjson.dumps(obj)
        view = DecoratorView(parse_decorator_controller(obj), raw, "1", (PODS,), ())
        views[view.id] = view
    running.replace(views)
    return running


class Manager:
    def __init__(self, identity: str, lock: Lock, clock: FakeClock, running: ControllerSet) -> None:
        self.registry = CollectorRegistry()
        self.recorder = Recorder()
        self.presence = Presence(
            lock=lock,
            identity=identity,
            controllers=running,
            recorder=self.recorder,
            metrics=TermMetrics(self.registry),
            interval=5.0,
            clock=clock,
        )

    @property
    def others(self) -> float | None:
        return self.registry.get_sample_value("metashard_coordinator_other_managers")


@pytest.mark.asyncio
async def test_two_active_managers_see_each_other_and_warn_on_every_controller() -> None:
    lock, clock, running = Lock(), FakeClock(), controllers("dc", "other")
    a = Manager("a", lock, clock, running)
    b = Manager("b", lock, clock, running)
    with capture_logs() as logs:
        for _ in range(3):
            await a.presence.beat()
            await b.presence.beat()
            clock.advance(5.0)
    assert a.others == 1 and b.others == 1
    warned = [e for e in logs if e["event"].startswith("another manager")]
    assert [(e["other"], e["log_level"]) for e in warned] == [("b", "error"), ("a", "error")]
    assert sorted(name for name, _, _ in a.recorder.events) == ["dc", "other"]  # once each
    (_, reason, message) = a.recorder.events[0]
    assert reason == "OtherManager"
    assert message.startswith("another manager of this controller is active (b, renewing Lease")
    assert "--target-label-selector" in message

    # b stops (its last write is what a's next read shows): a forgets it once six intervals
    # have passed without a write, and says so.
    with capture_logs() as logs:
        for _ in range(7):
            clock.advance(5.0)
            await a.presence.beat()
        assert a.others == 1
        clock.advance(5.0)
        await a.presence.beat()
    assert a.others == 0
    assert [e["event"] for e in logs] == ["the other manager is no longer seen"]


@pytest.mark.asyncio
async def test_the_previous_holder_is_not_judged_and_one_manager_alone_sees_nobody() -> None:
    lock, clock, running = Lock(), FakeClock(), controllers("dc")
    gone = Manager("dead-process", lock, clock, running)
    await gone.presence.beat()  # the Lease a process that died left behind
    alone = Manager("a", lock, clock, running)
    for _ in range(5):
        await alone.presence.beat()
        clock.advance(5.0)
    assert alone.others == 0 and alone.recorder.events == []
    assert LeaderRecord.from_lease(lock.lease or {}).holder == "a"


@pytest.mark.asyncio
async def test_an_api_error_is_logged_once_and_never_ends_the_loop() -> None:
    lock, clock, running = Lock(), FakeClock(), controllers("dc")
    lock.refuse = Forbidden(403, {"message": "leases is forbidden"})
    a = Manager("a", lock, clock, running)
    with capture_logs() as logs:
        for _ in range(3):
            await a.presence.beat()
    assert [e["event"] for e in logs] == [
        "cannot renew the presence Lease: another manager would go unseen"
    ]
    lock.refuse = None
    await a.presence.beat()
    assert lock.lease is not None and a.others == 0
