"""Another active manager of the same controllers: ``Presence``, seen through a Lease.

Leader election is off by default, as in Metacontroller, so two coordinators of one
installation (two ``metashard run``, a forgotten ``metashard coordinator``) would both act on
every parent, and nothing would say so. Every leading term therefore renews a presence Lease,
``<--leader-election-id>-presence`` in the election's namespace (the election Lease's name
carries the ``--target-label-selector``, so installations with disjoint selectors never see
each other), with or without leader election, and reads it first:

- Every ``interval`` seconds it reads the Lease, then writes itself as its holder (the
  resourceVersion read as the precondition). A Lease that changed since this term's own last
  write, now held by another identity, was written by another active manager meanwhile. Only
  writes are compared, never timestamps, so clocks that disagree cannot fake one; the first
  read of a term judges nothing (its holder may be the previous term's or a dead process's).
- A manager seen is reported once while it stays active: a log line at error level naming it
  and the Lease, a Warning event (``OtherManager``) on every running controller object (on a
  controller that starts later too), and the gauge ``metashard_coordinator_other_managers``
  (how many were seen within the last ``2 x interval x 3`` seconds). One not seen writing for
  that long is dropped, with a log line; seen again, it is reported again.
- Nothing changes who acts: this warns, it does not elect. An API error (a 403 for a missing
  Lease rule included) is logged when it first happens and retried at the next beat; it never
  ends the term.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from manager.controllers.running import ControllerSet
from manager.controllers.view import ControllerId
from manager.election.lease import LeaderRecord, Lease, LeaseLock, micro_time
from manager.term.metrics import TermMetrics
from proto.kube.errors import AlreadyExists, Conflict, KubeError
from proto.kube.events import WARNING
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger

log = get_logger("metashard.coordinator")

REASON_OTHER_MANAGER = "OtherManager"
FORGET_AFTER = 6
"""Intervals without a write after which another manager counts as gone."""


class EventSink(Protocol):
    """``proto.kube.events.EventRecorder`` conforms."""

    def emit(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None: ...


def presence_lease_name(leader_election_id: str) -> str:
    return f"{leader_election_id}-presence"


@dataclass(slots=True)
class _Seen:
    last: float
    told: set[ControllerId]


class Presence:
    def __init__(
        self,
        *,
        lock: LeaseLock,
        identity: str,
        controllers: ControllerSet,
        recorder: EventSink,
        metrics: TermMetrics,
        interval: float,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._lock = lock
        self._identity = identity
        self._controllers = controllers
        self._recorder = recorder
        self._metrics = metrics
        self._interval = interval
        self._clock = clock
        self._written: str | None = None  # the resourceVersion of this term's last write
        self._seen: dict[str, _Seen] = {}  # other identity -> when last seen writing
        self._failing: str | None = None

    async def run(self) -> None:
        while True:
            await self.beat()
            await self._clock.sleep(self._interval)

    async def beat(self) -> None:
        """Read the Lease, judge it, write it."""
        try:
            lease = await self._lock.get()
            if lease is not None:
                self._judge(lease)
            self._written = await self._write(lease)
        except (Conflict, AlreadyExists):
            pass  # another writer between the read and the write: the next read shows it
        except KubeError as e:
            if str(e) != self._failing:
                log.warning(
                    "cannot renew the presence Lease: another manager would go unseen",
                    lease=self._lock.description,
                    error=str(e),
                )
            self._failing = str(e)
        else:
            self._failing = None
        self._forget()
        self._tell()

    def _judge(self, lease: Lease) -> None:
        version = (lease.get("metadata") or {}).get("resourceVersion")
        holder = LeaderRecord.from_lease(lease).holder
        if self._written is None or version == self._written or holder in ("", self._identity):
            return
        seen = self._seen.get(holder)
        if seen is None:
            log.error(
                "another manager of the same controllers is active: both act on their parents",
                other=holder,
                lease=self._lock.description,
                hint="stop one, or give each its own --target-label-selector",
            )
            seen = self._seen[holder] = _Seen(self._clock.now(), set())
        seen.last = self._clock.now()

    async def _write(self, lease: Lease | None) -> str:
        now = micro_time(datetime.datetime.now(datetime.UTC))
        record = LeaderRecord(
            holder=self._identity,
            lease_duration_seconds=max(1, round(self._interval * FORGET_AFTER)),
            acquire_time=now,
            renew_time=now,
            transitions=0,
        )
        written = (
            await self._lock.create(record)
            if lease is None
            else await self._lock.update(lease, record)
        )
        return str((written.get("metadata") or {}).get("resourceVersion") or "")

    def _forget(self) -> None:
        horizon = self._clock.now() - FORGET_AFTER * self._interval
        for identity, seen in list(self._seen.items()):
            if seen.last < horizon:
                del self._seen[identity]
                log.info("the other manager is no longer seen", other=identity)
        self._metrics.other_managers(len(self._seen))

    def _tell(self) -> None:
        """A Warning event on every running controller not told yet of each manager seen."""
        for identity, seen in self._seen.items():
            for ident, view in self._controllers.views.items():
                if ident in seen.told:
                    continue
                seen.told.add(ident)
                message = (
                    f"another manager of this controller is active ({identity}, renewing Lease "
                    f"{self._lock.description} as this one, {self._identity}, does): both act "
                    "on its parents; stop one, or give each its own --target-label-selector"
                )
                self._recorder.emit(orjson.loads(view.raw), WARNING, REASON_OTHER_MANAGER, message)
