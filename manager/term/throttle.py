"""Per-controller limits across all workers: a permit per reconcile, given with its snapshot.

A reconcile starts with a FETCH and runs on the SNAPSHOT that answers it, so the coordinator,
which answers every FETCH, is where a limit across all workers can live. For a controller with
limits (``manager.controllers.limits``: ``max_concurrent``, ``per_second``):

- ``admit(worker, key)``, asked right before a SNAPSHOT goes out, says ``FREE`` (not limited:
  the controller has no limits, or the worker does not take part, below), ``PERMIT`` (the
  reconcile holds one of the controller's permits: the SNAPSHOT says so, and the worker answers
  DONE when the reconcile ends) or ``THROTTLED`` (the worker gets NACK THROTTLED and drops the
  key; the key waits here, each key once, in the order first throttled).
- At most ``max_concurrent`` permits are held at once (a permit held by a reconcile, or kept
  for a waiting key on its way to its worker, below), and permits are given at most at
  ``per_second``: a token bucket, full at the start, holding ``Limits.burst`` tokens.
- A key that waits goes ahead of any key not waiting: while keys wait, a FETCH of any other
  key of the controller is throttled too.
- When a permit is free (``release``: DONE, or a SNAPSHOT that was not delivered; a token
  came), the first waiting key gets it: the permit is kept for that key for ``reserve_for``
  seconds and the key is pushed LIVE to the owner of its slot, whose FETCH then takes that
  permit. A kept permit the key's FETCH has not taken by then is freed (the worker dropped the
  key, e.g. it lost the slot: the slot's next owner was sent every key of it); a FETCH of the
  key after that is admitted like any other.
- The permits of a worker that is no longer a member (or joined again: another connection)
  are freed at the next tick: its reconciles were cancelled, or are fenced and end on their
  own.
- ``tick()`` (every ``TICK`` seconds, ``run()``) refills the buckets, frees what expired and
  hands out what is free, and reports per limited controller the permits held and the keys
  waiting (``metashard_coordinator_controller_permits`` and ``_waiting``).
- A controller removed, or no longer limited, forgets its permits and pushes its waiting keys
  LIVE (they run as any key does).
- A worker takes part only if its HELLO said so (``limits``; ``joined``): an older worker
  cannot be told THROTTLED nor asked for DONE, so its reconciles are admitted ``FREE`` and not
  counted. The limit is then not enforced for the keys of its slots; the coordinator logs it
  the first time it admits such a reconcile after the worker joined.

Fairness between controllers follows: each controller waits in its own queue here, so one
controller throttled with 20,000 keys waiting does not delay another controller's keys at
all; a throttled key costs one FETCH and NACK, and one push when its turn comes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

import orjson

from manager.controllers.limits import Limits, limits_of
from manager.controllers.view import ControllerId, ControllerView
from manager.routing.router import KeySink
from manager.term.metrics import TermMetrics
from proto.runtime.clock import Clock
from proto.runtime.logs import get_logger
from proto.wire import ParentKey, Priority

log = get_logger("metashard.coordinator")

TICK = 0.05
"""Seconds between refills of the token buckets and expiries of kept permits."""
RESERVE_FOR = 10.0
"""Seconds a permit is kept for a waiting key pushed to its worker."""


class Admission(Enum):
    FREE = "free"
    PERMIT = "permit"
    THROTTLED = "throttled"


class Members(Protocol):
    def route(self, worker_id: str) -> bytes | None:
        """The connection of a member, None for a worker that is not one
        (``manager.term.membership.Membership``)."""
        ...


@dataclass(slots=True)
class _Gate:
    """One limited controller's permits, bucket and waiting keys."""

    limits: Limits
    tokens: float
    refilled: float
    held: dict[ParentKey, tuple[str, bytes | None]] = field(default_factory=dict)
    kept: dict[ParentKey, float] = field(default_factory=dict)  # key -> until when
    waiting: dict[ParentKey, None] = field(default_factory=dict)

    def refill(self, now: float) -> None:
        rate = self.limits.per_second
        if rate is not None:
            self.tokens = min(self.limits.burst, self.tokens + (now - self.refilled) * rate)
        self.refilled = now

    def room(self) -> bool:
        """Whether a permit may be given now (refilled)."""
        most = self.limits.max_concurrent
        if most is not None and len(self.held) + len(self.kept) >= most:
            return False
        return self.limits.per_second is None or self.tokens >= 1

    def take(self) -> None:
        if self.limits.per_second is not None:
            self.tokens -= 1


class Throttle:
    def __init__(
        self,
        *,
        sink: KeySink,
        members: Members,
        metrics: TermMetrics,
        clock: Clock,
    ) -> None:
        self._sink = sink
        self._members = members
        self._metrics = metrics
        self._clock = clock
        self._gates: dict[ControllerId, _Gate] = {}
        self._taking_part: set[str] = set()
        self._warned: set[str] = set()  # workers not taking part, told of

    def joined(self, worker: str, *, limits: bool) -> None:
        """``worker`` said HELLO; ``limits``: it takes part (module docstring)."""
        if limits:
            self._taking_part.add(worker)
        else:
            self._taking_part.discard(worker)
        self._warned.discard(worker)

    def controllers_changed(
        self, views: Sequence[ControllerView], added: Sequence[ControllerView]
    ) -> None:
        now = self._clock.now()
        wanted: dict[ControllerId, Limits] = {}
        for view in views:
            limits = _limits(view)
            if limits.limited:
                wanted[view.id] = limits
        for ident in list(self._gates):
            if ident not in wanted:
                for key in self._gates.pop(ident).waiting:
                    self._sink.push(key, Priority.LIVE)
        for ident, limits in wanted.items():
            gate = self._gates.get(ident)
            if gate is None:
                self._gates[ident] = _Gate(limits, float(limits.burst), now)
            elif gate.limits != limits:
                gate.refill(now)
                gate.limits = limits
                gate.tokens = min(gate.tokens, float(limits.burst))
                self._hand_out(gate, now)

    def admit(self, worker: str, key: ParentKey) -> Admission:
        """Whether the SNAPSHOT of ``key`` for ``worker`` may go out (module docstring)."""
        gate = self._gates.get((key.kind, key.controller))
        if gate is None:
            return Admission.FREE
        if worker not in self._taking_part:
            if worker not in self._warned:
                self._warned.add(worker)
                log.warning(
                    "worker predates per-controller limits: its reconciles are not limited",
                    worker=worker,
                    controller=key.controller,
                )
            return Admission.FREE
        route = self._members.route(worker)
        now = self._clock.now()
        gate.refill(now)
        self._hand_out(gate, now)  # first to the keys that wait, this one among them
        if key in gate.held or gate.kept.pop(key, None) is not None:
            gate.held[key] = (worker, route)  # kept for it, or a DONE lost with a connection
            return Admission.PERMIT
        if gate.waiting or not gate.room():
            gate.waiting[key] = None
            return Admission.THROTTLED
        gate.take()
        gate.held[key] = (worker, route)
        return Admission.PERMIT

    def release(self, worker: str, key: ParentKey) -> None:
        """The reconcile of ``key`` that ``worker`` held a permit for has ended (DONE), or its
        SNAPSHOT was not delivered."""
        gate = self._gates.get((key.kind, key.controller))
        if gate is None:
            return
        holder = gate.held.get(key)
        if holder is not None and holder[0] == worker:
            del gate.held[key]
            now = self._clock.now()
            gate.refill(now)
            self._hand_out(gate, now)

    def tick(self) -> None:
        """Refill, free what expired or lost its worker, hand out what is free; report the
        permits held and the keys waiting per controller."""
        now = self._clock.now()
        counts: dict[str, tuple[int, int]] = {}
        for (kind, name), gate in self._gates.items():
            self._free_stale(gate, now)
            gate.refill(now)
            self._hand_out(gate, now)
            counts[f"{kind}/{name}"] = (len(gate.held) + len(gate.kept), len(gate.waiting))
        self._metrics.limited(counts)

    async def run(self) -> None:
        while True:
            await self._clock.sleep(TICK)
            self.tick()

    def _free_stale(self, gate: _Gate, now: float) -> None:
        route = self._members.route
        for key, (worker, at) in list(gate.held.items()):
            if route(worker) != at or at is None:
                del gate.held[key]
        for key, until in list(gate.kept.items()):
            if until <= now:
                del gate.kept[key]

    def _hand_out(self, gate: _Gate, now: float) -> None:
        """Give free permits to waiting keys, first waited first: keep each for its key and
        push the key to its worker."""
        while gate.waiting and gate.room():
            key = next(iter(gate.waiting))
            del gate.waiting[key]
            gate.take()
            gate.kept[key] = now + RESERVE_FOR
            self._sink.push(key, Priority.LIVE)


def _limits(view: ControllerView) -> Limits:
    """The limits of ``view``'s controller object (its problems are reported when it loads)."""
    return limits_of(orjson.loads(view.raw))[0] if view.raw else Limits()
