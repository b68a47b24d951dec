"""Which workers are alive and which slots each owns: the coordinator's slot table.

A pure state machine: every method takes the current time and returns the messages to send
(``Outbox``); nothing here does I/O, so every transition is unit-tested.

Invariants (the exclusivity guarantee rests on them):
- A slot has at most one owner. A slot moves away from a live owner only through
  REVOKE -> RELEASED: until RELEASED arrives the old owner still owns it (it may still be
  finishing a reconcile), and no one else is given it.
- A worker that said BYE has drained: its slots are free at once. A worker silent for
  ``worker_timeout`` has fenced itself (its fence timeout is shorter, see
  ``workers.link.membership``): its slots are free at once. A worker that joins under the id of a
  member not heard from for ``worker_timeout`` (not yet expired by ``tick``) replaces it; the
  replaced process's slots stay unassignable until ``worker_timeout`` after it was last heard
  from.
- Workers are addressed by the routing id of their current connection (``route``), which
  the ROUTER socket chooses; the worker id is what a HELLO claims. A HELLO of a member's
  incarnation from a new connection is that process re-joining after it fenced (it dropped its
  queues): it gets WELCOME and an ASSIGN of every key of the slots it still owns, so nothing
  it dropped is lost. A HELLO of another incarnation while the member is live (heard from
  within ``worker_timeout``) is refused (``hello`` returns None): a second process claiming a
  live worker's id disturbs neither the coordinator nor that worker. A restarted worker (a
  StatefulSet pod) is thus welcomed once its dead predecessor expires, which is also when
  that one's slots become free; one that stopped with BYE, at once.
- Silence is counted while the coordinator runs: when ``tick`` (called every 0.1 s) or
  ``hello`` finds that more than a heartbeat interval passed since the last ``tick``, this
  process itself was paused (stopped, starved of CPU) and the workers' heartbeats of that time
  are still waiting in its socket, so every member is credited with the pause (its
  ``last_seen`` moves forward by it) before anything is judged: a paused coordinator never
  expires, replaces or frees the slots of a worker that kept heartbeating.
- Every WELCOME and ASSIGN carries a generation one larger than the last one sent in this
  term (``proto.wire.messages``): a slot's owner holds it under a larger generation than every
  earlier owner of the slot in the term.
- Nothing is assigned before ``start_at`` (a new leader waits until workers of the previous
  term have fenced themselves and live ones have re-joined).
- Targets come from rendezvous hashing over the live worker ids (``proto.wire.slots``), so a
  membership change moves about 1/N of the slots. ASSIGN carries no keys: the dispatch
  queues every parent key of the slots it assigns for their new owner
  (``manager.term.dispatch``), and keys pushed for a slot in transit are dropped (those cover
  them). WELCOME carries the running controllers' definitions (``Definitions``).
- It is the term's ``SlotOwners``: who owns a slot (``owner``) and where a live key of it
  goes (``dispatch_target``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from proto.wire import (
    SLOT_COUNT,
    Assign,
    ControllerDef,
    Message,
    Revoke,
    Welcome,
    assign,
)

Outbox = list[tuple[str, Message]]


class Definitions(Protocol):
    def definitions(self) -> tuple[ControllerDef, ...]:
        """The running controllers (``manager.controllers.running.ControllerSet``)."""
        ...


class SlotOwners(Protocol):
    """Who owns a slot: what ``manager.term.dispatch`` and the snapshot server ask
    (``Membership`` conforms)."""

    def owner(self, slot: int) -> str | None: ...
    def dispatch_target(self, slot: int) -> str | None: ...


@dataclass(slots=True)
class WorkerInfo:
    id: str
    incarnation: str
    concurrency: int
    last_seen: float
    route: bytes = b""  # routing id of its current connection
    in_flight: int = 0
    queue_depth: int = 0


@dataclass(frozen=True, slots=True)
class Timing:
    heartbeat_interval: float = 1.0
    worker_timeout: float = 5.0

    def __post_init__(self) -> None:
        # Workers fence after worker_timeout - 2 * heartbeat_interval of silence.
        if self.worker_timeout < 3 * self.heartbeat_interval:
            raise ValueError("worker timeout must be at least 3 heartbeat intervals")


class Membership:
    def __init__(
        self,
        *,
        epoch: int,
        coordinator_id: str,
        controllers: Definitions,
        start_at: float,
        timing: Timing = Timing(),
        slot_count: int = SLOT_COUNT,
    ) -> None:
        self.epoch = epoch
        self.coordinator_id = coordinator_id
        self.timing = timing
        self.slot_count = slot_count
        self.start_at = start_at
        self.workers: dict[str, WorkerInfo] = {}
        self._by_route: dict[bytes, str] = {}
        self._controllers = controllers
        self._owner: dict[int, str] = {}
        self._revoking: dict[int, str] = {}
        self._free_at: dict[int, float] = {}
        self._dirty = True
        self._targets: tuple[frozenset[str], dict[int, str]] | None = None
        self._generation = 0
        self._ticked: float | None = None  # when ``tick`` last ran

    # --- queries ------------------------------------------------------------------------------

    def owner(self, slot: int) -> str | None:
        """The worker that owns ``slot`` (also while it is being revoked)."""
        return self._owner.get(slot)

    def dispatch_target(self, slot: int) -> str | None:
        """Where live key notifications of ``slot`` go: its owner, unless it is in transit."""
        if slot in self._revoking:
            return None
        return self._owner.get(slot)

    def slots_of(self, worker_id: str) -> list[int]:
        return sorted(s for s, w in self._owner.items() if w == worker_id)

    def owned_counts(self) -> dict[str, int]:
        """How many slots each member owns."""
        counts = dict.fromkeys(self.workers, 0)
        for worker in self._owner.values():
            counts[worker] = counts.get(worker, 0) + 1
        return counts

    def member_at(self, route: bytes) -> str | None:
        """The member whose current connection has routing id ``route``."""
        return self._by_route.get(route)

    def route(self, worker_id: str) -> bytes | None:
        """The routing id of a member's current connection."""
        worker = self.workers.get(worker_id)
        return worker.route if worker is not None else None

    def _kept_slots(self, worker_id: str) -> tuple[int, ...]:
        """Slots the worker owns and is not giving up."""
        return tuple(s for s in self.slots_of(worker_id) if s not in self._revoking)

    # --- events -------------------------------------------------------------------------------

    def hello(
        self, worker_id: str, incarnation: str, concurrency: int, now: float, route: bytes = b""
    ) -> Outbox | None:
        """A HELLO from connection ``route``; None if refused (another incarnation of the id
        is a live member)."""
        self._credit_pause(now)
        known = self.workers.get(worker_id)
        rejoined = False
        if known is not None and known.incarnation != incarnation:
            if now - known.last_seen <= self.timing.worker_timeout:
                return None
            # The same id from a new process: the old one may have died mid-reconcile.
            self._drop(worker_id, free_at=known.last_seen + self.timing.worker_timeout)
            known = None
        if known is None:
            known = self.workers[worker_id] = WorkerInfo(
                worker_id, incarnation, concurrency, now, route
            )
            self._dirty = True
        else:
            known.last_seen = now
            rejoined = known.route != route
            if rejoined:
                # The same process on a new connection: it fenced and dropped its queues.
                self._by_route.pop(known.route, None)
                known.route = route
        self._by_route[route] = worker_id
        kept = self._kept_slots(worker_id)
        welcome = Welcome(
            epoch=self.epoch,
            coordinator_id=self.coordinator_id,
            incarnation=incarnation,
            controllers=self._controllers.definitions(),
            slot_count=self.slot_count,
            slots=() if rejoined else kept,
            heartbeat_interval=self.timing.heartbeat_interval,
            heartbeat_timeout=self.timing.worker_timeout,
            generation=self._next_generation(),
            defers=True,
        )
        out: Outbox = [(worker_id, welcome)]
        if rejoined and kept:
            out.append((worker_id, self._assign(kept)))
        return out

    def seen(
        self, worker_id: str, now: float, *, in_flight: int = -1, queue_depth: int = -1
    ) -> None:
        worker = self.workers.get(worker_id)
        if worker is None:
            return
        worker.last_seen = now
        if in_flight >= 0:
            worker.in_flight = in_flight
        if queue_depth >= 0:
            worker.queue_depth = queue_depth

    def released(self, worker_id: str, slots: Iterable[int], now: float) -> Outbox:
        for slot in slots:
            if self._revoking.get(slot) == worker_id:
                del self._revoking[slot]
                del self._owner[slot]
                self._dirty = True
        return self.rebalance(now)

    def leave(self, worker_id: str, now: float) -> Outbox:
        """A worker said BYE: it has finished everything, its slots are free now."""
        if worker_id in self.workers:
            self._drop(worker_id, free_at=None)
        return self.rebalance(now)

    def lost(self, worker_id: str, now: float) -> Outbox:
        """A control message could not be delivered: treat the worker as gone (it will
        fence itself for lack of contact and join again)."""
        worker = self.workers.get(worker_id)
        if worker is not None:
            self._drop(worker_id, free_at=worker.last_seen + self.timing.worker_timeout)
        return self.rebalance(now)

    def tick(self, now: float) -> Outbox:
        """Expire silent workers, then move slots towards their targets."""
        self._credit_pause(now)
        self._ticked = now
        for worker in list(self.workers.values()):
            if now - worker.last_seen > self.timing.worker_timeout:
                self._drop(worker.id, free_at=None)
        if self._free_at and min(self._free_at.values()) <= now:
            self._dirty = True
        return self.rebalance(now)

    # --- internals ----------------------------------------------------------------------------

    def _credit_pause(self, now: float) -> None:
        """Move every member's ``last_seen`` forward by this process's own pause since the
        last tick, if there was one (module docstring)."""
        if self._ticked is None:
            return
        paused = now - self._ticked
        if paused <= self.timing.heartbeat_interval:
            return
        for worker in self.workers.values():
            worker.last_seen = min(now, worker.last_seen + paused)
        self._ticked = now

    def _next_generation(self) -> int:
        self._generation += 1
        return self._generation

    def _assign(self, slots: tuple[int, ...]) -> Assign:
        return Assign(self.epoch, slots, (), self._next_generation())

    def _drop(self, worker_id: str, *, free_at: float | None) -> None:
        worker = self.workers.pop(worker_id)
        if self._by_route.get(worker.route) == worker_id:
            del self._by_route[worker.route]
        for slot in [s for s, w in self._owner.items() if w == worker_id]:
            del self._owner[slot]
            self._revoking.pop(slot, None)
            if free_at is not None:
                self._free_at[slot] = max(free_at, self._free_at.get(slot, 0.0))
        self._dirty = True

    def _target(self) -> dict[int, str]:
        ids = frozenset(self.workers)
        if self._targets is None or self._targets[0] != ids:
            self._targets = (ids, assign(self.slot_count, sorted(ids)))
        return self._targets[1]

    def rebalance(self, now: float) -> Outbox:
        if not self._dirty or now < self.start_at or not self.workers:
            return []
        self._dirty = False
        target = self._target()
        grants: dict[str, list[int]] = defaultdict(list)
        revokes: dict[str, list[int]] = defaultdict(list)
        for slot in range(self.slot_count):
            want = target[slot]
            have = self._owner.get(slot)
            if have == want:
                continue
            if have is None:
                free_at = self._free_at.get(slot, 0.0)
                if free_at > now:
                    self._dirty = True  # look again once it is free
                    continue
                self._free_at.pop(slot, None)
                self._owner[slot] = want
                grants[want].append(slot)
            elif slot not in self._revoking:
                self._revoking[slot] = have
                revokes[have].append(slot)
        out: Outbox = [
            (worker, Revoke(self.epoch, tuple(slots))) for worker, slots in revokes.items()
        ]
        out.extend((worker, self._assign(tuple(slots))) for worker, slots in grants.items())
        return out
