"""What the coordinator sends to workers, and when: fresh work first, LOW keys against a window.

Contract:
- ``push(key, priority)`` (the term's ``manager.routing.router.KeySink``) notes a parent key for
  the owner of its slot (``SlotOwners.dispatch_target``; the slot from ``SlotOf``, the key
  index, which remembers the slot of every parent it holds). A key whose slot is in transit
  is dropped (every key of the slot is queued when the ASSIGN that ends the move is). A key whose
  snapshot is being held back still goes out: only the worker knows whether it still waits
  for that snapshot (it drops KEYS of a key it is fetching, since the snapshot follows them
  on the same pipe).
- LIVE keys pushed in one event-loop turn go out as KEYS messages (at most ``KEYS_BATCH``
  keys each, each key once) at the end of the turn. LOW keys (resyncs, initial lists,
  relists) wait per worker and per controller, each key once (a key pushed again while it
  waits keeps its place; a key pushed LIVE meanwhile goes with the LIVE ones and no longer
  waits), and go out as KEYS of at most ``KEYS_BATCH`` keys of one controller, when
  ``next()`` gets to them: **controllers take turns**, one KEYS each, and within a
  controller keys go in the order first pushed. So one controller's 100,000 LOW keys (its
  initial list) hold back another's by one KEYS message, not by 100,000 keys.
  A waiting key whose slot no longer goes to that worker is dropped when its turn comes (it
  is queued again for the slot's next owner with its ASSIGN).
- ``deferred(keys)``: keys a worker sent back (KEYS from a worker: the echoes of its own
  writes, ``workers.runner.runner``) wait as LOW, after the LOW keys already waiting, for
  the owner of their slot then: so an echo goes after the parents still waiting for their
  first reconcile, first come, first served, however many of those wait here. A key the key
  index does not hold (its parent is gone, or the worker made it up) is dropped. Each LOW
  KEYS says whether ``more`` LOW keys still wait here for that worker (of any controller),
  and a worker sends keys back only while they do: with none waiting, the round trip would
  only cost both sides CPU (``workers.link.deferrals``).
- ``send(target, msg)`` queues one message: ``target`` is a worker id (resolved to its current
  connection when sent, and dropped if it is no longer a member, unless it is a NACK or BYE)
  or a routing id (``bytes``: an answer to a connection that is not a member).
- ``emit(outbox)`` queues what ``manager.term.membership`` returned, counting revoked slots.
  Keys are counted (``metashard_coordinator_keys_pushed_total``) as they go into KEYS
  messages, each once per message.
  An ASSIGN carries no keys: **every key of its slots waits as LOW** for the worker
  (``IndexedKeys.keys_of``), so a worker given 100,000 parents at a start has only a window
  of them at a time (its memory does not grow with the parents), and those whose parent is
  behind (``IndexedKeys.behind_of``: the last sync did not see the parent's generation) wait
  **at the front**, ahead of every LOW key already waiting for that worker: after a
  failover, or any new term, the parents edited since their last sync go first.
- ``next()`` waits for the next message to send. **Fresh work first**: everything but LOW
  keys (LIVE KEYS, SNAPSHOT, NACK, WELCOME, ASSIGN, REVOKE, CONTROLLERS, HEARTBEAT) goes out
  in the order it was queued, and LOW keys only when nothing of that waits. Before each LOW
  KEYS message ``next()`` lets the event loop turn once, so that events and FETCHes that
  arrived meanwhile go out before it: a LIVE key pushed after a resync's 100,000 LOW keys
  overtakes those not yet sent (``make bench BENCH=coordinator``).
- **LOW keys are sent against a window**: to each worker, only while its estimated backlog is
  under ``LOW_WINDOW`` keys, the workers taking turns. The estimate is the queue depth of its
  last HEARTBEAT (``reported``), plus the LOW keys sent to it since, minus the FETCHes it sent
  since (``fetched``: each is a key taken from its queue). So what sits in a worker's pipe
  ahead of a LIVE key stays small (the link's high-water mark is a safety valve, not flow
  control), while the worker still has more queued than it runs between two heartbeats; and
  keys a slow worker has not taken yet wait here once each, as in its own queue. Every
  heartbeat corrects the estimate (a key the worker already had queued, or fetches twice,
  makes it drift). The LOW keys waiting for a worker that is no longer a member are dropped:
  its slots go to others with ASSIGNs, and every key of them waits for those.
- A LOW key therefore only ever goes out later than in the order pushed, never earlier than
  anything queued before it but the LOW keys of other controllers; what that means to the
  worker (``workers.link.membership``):
  - a SNAPSHOT queued before a KEYS is sent before it, as the worker's rule "drop KEYS of a
    key whose FETCH is outstanding" needs (the snapshot reflects the change);
  - a LOW key sent after a SNAPSHOT of it runs once more (a no-op reconcile) instead of being
    dropped;
  - a LOW key sent after a REVOKE of its slot is dropped here or by the worker: it waits for
    the slot's next owner from its ASSIGN on;
  - a LOW key sent after a CONTROLLERS that removed its controller is dropped by the worker;
    keys of a controller are pushed only once the CONTROLLERS that adds it is queued.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict, deque
from collections.abc import Iterable
from typing import Protocol

from manager.term.membership import Outbox, SlotOwners
from manager.term.metrics import TermMetrics
from proto.wire import Assign, Keys, Message, ParentKey, Priority, Revoke

KEYS_BATCH = 512
LOW_WINDOW = 8 * KEYS_BATCH
"""LOW keys a worker may have queued or on their way: 4,096, more than a worker runs no-op
reconciles in a second (its FETCHes refill the window as it goes, its heartbeats correct
the estimate every second), and few enough that the keys a worker holds, and so its memory,
do not grow with the parents."""

Target = str | bytes
"""A worker id, or the routing id of a connection that is not a member."""
Controller = tuple[str, str]
"""(kind, name) of the controller of a key."""


class SlotOf(Protocol):
    def slot(self, key: ParentKey) -> int:
        """The slot of ``key`` (``manager.routing.router.KeyIndex``)."""
        ...


class IndexedKeys(SlotOf, Protocol):
    """What the dispatch asks the key index (``manager.routing.router.KeyIndex``)."""

    def keys_of(self, slots: Iterable[int]) -> tuple[ParentKey, ...]:
        """Every key of ``slots``."""
        ...

    def behind_of(self, slots: Iterable[int]) -> tuple[ParentKey, ...]:
        """The keys of ``slots`` whose parent's last sync did not see its generation."""
        ...

    def held(self, key: ParentKey) -> ParentKey | None:
        """The index's own copy of ``key``, None when it holds no such key."""
        ...


class Members(Protocol):
    def route(self, worker_id: str) -> bytes | None:
        """The connection of a member, None for a worker that is not one
        (``manager.term.membership.Membership``)."""
        ...


class Dispatch:
    def __init__(
        self,
        *,
        epoch: int,
        owners: SlotOwners,
        members: Members,
        slots: IndexedKeys,
        metrics: TermMetrics,
    ) -> None:
        self._epoch = epoch
        self._owners = owners
        self._members = members
        self._slots = slots
        self._metrics = metrics
        self._first: deque[tuple[Target, Message]] = deque()
        # LOW keys waiting, by worker (in turn), by controller (in turn), each in the order
        # first pushed.
        self._low: dict[str, dict[Controller, dict[ParentKey, None]]] = {}
        self._backlog: dict[str, int] = {}  # estimated keys queued or on their way, by worker
        self._queued = asyncio.Event()
        self._live: dict[str, dict[ParentKey, None]] = defaultdict(dict)  # pushed this turn
        self._flush_scheduled = False

    def push(self, key: ParentKey, priority: Priority) -> None:
        worker = self._owners.dispatch_target(self._slots.slot(key))
        if worker is None:
            return
        if priority is Priority.LOW:
            controllers = self._low.get(worker)
            if controllers is None:
                controllers = self._low[worker] = {}
            controller = (key.kind, key.controller)
            waiting = controllers.get(controller)
            if waiting is None:
                waiting = controllers[controller] = {}
            if key not in waiting:
                waiting[key] = None
                self._may_send_low(worker)
            return
        self._live[worker][key] = None
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        live, self._live = self._live, defaultdict(dict)
        for worker, keys in live.items():
            controllers = self._low.get(worker)
            if controllers:
                for key in keys:
                    waiting = controllers.get((key.kind, key.controller))
                    if waiting:
                        waiting.pop(key, None)
            unique = list(keys)
            self._metrics.keys_pushed(Priority.LIVE, len(unique))
            for i in range(0, len(unique), KEYS_BATCH):
                batch = tuple(unique[i : i + KEYS_BATCH])
                self._first.append((worker, Keys(self._epoch, Priority.LIVE, batch)))
        self._queued.set()

    def deferred(self, keys: Iterable[ParentKey]) -> None:
        held = self._slots.held
        for key in keys:
            mine = held(key)
            if mine is not None:
                self.push(mine, Priority.LOW)

    def send(self, target: Target, msg: Message) -> None:
        self._first.append((target, msg))
        self._queued.set()

    def emit(self, out: Outbox) -> None:
        for worker, msg in out:
            if isinstance(msg, Revoke):
                self._metrics.revoked(len(msg.slots))
            self._first.append((worker, msg))
            if isinstance(msg, Assign):
                self._wait_low(worker, self._slots.keys_of(msg.slots))
                self._wait_low(worker, self._slots.behind_of(msg.slots), first=True)
        self._queued.set()

    def _wait_low(self, worker: str, keys: Iterable[ParentKey], *, first: bool = False) -> None:
        """``keys`` wait as LOW for ``worker``, each once: after those already waiting, or
        ``first``: ahead of them (a key already waiting moves to the front)."""
        controllers = self._low.get(worker)
        if controllers is None:
            controllers = self._low[worker] = {}
        by_controller: dict[Controller, list[ParentKey]] = defaultdict(list)
        for key in keys:
            by_controller[(key.kind, key.controller)].append(key)
        for controller, new in by_controller.items():
            waiting = controllers.get(controller)
            if waiting is None:
                controllers[controller] = dict.fromkeys(new)
            elif first:
                controllers[controller] = dict.fromkeys(new) | waiting
            else:
                waiting.update(dict.fromkeys(new))
        if by_controller:
            self._may_send_low(worker)

    def reported(self, worker: str, queue_depth: int) -> None:
        """A HEARTBEAT of ``worker``: ``queue_depth`` keys wait in its queues."""
        self._backlog[worker] = queue_depth
        self._may_send_low(worker)

    def fetched(self, worker: str) -> None:
        """A FETCH of ``worker``: it took a key from its queues."""
        self._backlog[worker] = max(self._backlog.get(worker, 0) - 1, 0)
        self._may_send_low(worker)

    def _may_send_low(self, worker: str) -> None:
        if self._low.get(worker) and self._backlog.get(worker, 0) < LOW_WINDOW:
            self._queued.set()

    def _low_worker(self) -> str | None:
        """A worker whose LOW keys may go now, in turn; forgets those of non-members."""
        for worker in list(self._low):
            if not any(self._low[worker].values()) or self._members.route(worker) is None:
                del self._low[worker]
            elif self._backlog.get(worker, 0) < LOW_WINDOW:
                return worker
        return None

    def _low_keys(self, worker: str) -> Keys | None:
        """The next LOW KEYS for ``worker``, of the controller whose turn it is (None: none
        of those keys is its own any more)."""
        controllers = self._low.pop(worker)
        waiting: dict[ParentKey, None] = {}
        while controllers and not waiting:
            controller = next(iter(controllers))
            waiting = controllers.pop(controller)
        taken = list(itertools.islice(waiting, KEYS_BATCH))
        for key in taken:
            del waiting[key]
        if waiting:
            controllers[controller] = waiting  # at the back: the other controllers' turn first
        if controllers:
            self._low[worker] = controllers  # at the back: the other workers' turn first
        target = self._owners.dispatch_target
        slot = self._slots.slot
        batch = tuple(key for key in taken if target(slot(key)) == worker)
        if not batch:
            return None
        self._backlog[worker] = self._backlog.get(worker, 0) + len(batch)
        self._metrics.keys_pushed(Priority.LOW, len(batch))
        return Keys(self._epoch, Priority.LOW, batch, more=worker in self._low)

    async def next(self) -> tuple[Target, Message]:
        while True:
            if self._first:
                return self._first.popleft()
            if self._low_worker() is not None:
                await asyncio.sleep(0)  # what arrived meanwhile goes first
                if self._first:
                    return self._first.popleft()
                worker = self._low_worker()
                if worker is not None and (msg := self._low_keys(worker)) is not None:
                    return worker, msg
                continue
            self._queued.clear()
            await self._queued.wait()
