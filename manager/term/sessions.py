"""The coordinator's conversations with worker processes over the ROUTER socket.

Contract:
- ``receive()`` reads every message. A HELLO goes to ``manager.term.membership`` with the routing
  id of the connection it came on (ZeroMQ chooses routing ids: a worker id is only what a
  HELLO claims, so a second connection claiming a live worker's id is just another peer). A
  refused HELLO (another live process has its id) gets NACK(STALE_EPOCH, 0), at most once a
  second per connection, and one log line per process until it is welcomed. Any other message from
  a connection that is not a member's gets NACK(STALE_EPOCH) so the worker joins again.
  Members' messages count as contact; FETCH goes to the snapshot server, RELEASED and BYE to
  membership, DONE of the current epoch (and whether a HELLO takes part in limits) to
  ``manager.term.throttle``; HEARTBEAT (its queue depth) and FETCH also tell the dispatch how
  much LOW work the worker may be sent, and KEYS of the current epoch (the keys a worker
  defers) go back to the dispatch as LOW keys (``manager.term.dispatch``).
- ``send()`` sends what ``Dispatch`` queued, to the member's current connection. A message
  that cannot be delivered to a member ends its membership (it fences itself for lack of
  contact and joins again): no key notification is silently lost to a live member. A
  snapshot over the frame limit is answered with NACK(TOO_LARGE) instead (and the permit it
  held is released).
- ``tick()`` expires silent workers, moves slots, and sends heartbeats. Nothing is assigned
  before the caches are ready (the controller objects read once, ``ControllerSet.loaded``,
  and every informer synced) and ``grace.seconds`` have passed since the term
  began (workers of a previous term have fenced by then; ``manager.term.grace``; the wait and its
  reason are logged), nor, when ``grace.expected_workers`` is set, before that many workers
  joined or ``grace.join_within`` passed; ``assigning`` is set from then on. This is checked
  every tick and whenever a worker joins, so the first assignment does not wait for a tick.
- ``controllers_changed(views, added)`` sends every member the new controller definitions
  (CONTROLLERS); a worker that joins later gets them in its WELCOME.
- ``goodbye(within)`` sends BYE to every member, so they stop at once when the term ends, and
  says whether every one confirmed it stopped (its BYE) within ``within`` seconds.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Protocol

from manager.controllers.running import ControllerSet
from manager.controllers.view import ControllerView
from manager.link.router import RouterLink, SendResult
from manager.term.dispatch import Dispatch
from manager.term.grace import Grace
from manager.term.membership import Membership
from manager.term.metrics import TermMetrics
from manager.term.snapshots import SnapshotServer
from manager.term.throttle import Throttle
from proto.runtime.clock import Clock
from proto.runtime.logs import get_logger
from proto.wire import (
    Bye,
    Controllers,
    Done,
    Fetch,
    Heartbeat,
    Hello,
    Keys,
    LinkClosed,
    Message,
    Nack,
    NackReason,
    Released,
    Snapshot,
)

log = get_logger("metashard.coordinator")

TICK = 0.1  # seconds between membership ticks


class Synced(Protocol):
    @property
    def synced(self) -> bool:
        """Every informer has listed (``manager.informers.shared.Informers``)."""
        ...


class WorkerSessions:
    def __init__(
        self,
        *,
        epoch: int,
        link: RouterLink,
        membership: Membership,
        dispatch: Dispatch,
        snapshots: SnapshotServer,
        throttle: Throttle,
        controllers: ControllerSet,
        informers: Synced,
        grace: Grace,
        metrics: TermMetrics,
        clock: Clock,
    ) -> None:
        self._epoch = epoch
        self._link = link
        self._membership = membership
        self._dispatch = dispatch
        self._snapshots = snapshots
        self._throttle = throttle
        self._controllers = controllers
        self._informers = informers
        self._grace = grace
        self._metrics = metrics
        self._clock = clock
        self._nacked: dict[bytes, float] = {}
        self._refused: set[tuple[str, str]] = set()
        self._started = math.inf  # when tick() began
        self.assigning = asyncio.Event()

    # --- receiving ----------------------------------------------------------------------------

    async def receive(self) -> None:
        membership = self._membership
        async for route, msg in self._link:
            now = self._clock.now()
            if isinstance(msg, Hello):
                self._hello(route, msg, now)
                continue
            worker = membership.member_at(route)
            if worker is None:
                self._not_a_member(route, msg, now)
                continue
            if isinstance(msg, Heartbeat):
                membership.seen(worker, now, in_flight=msg.in_flight, queue_depth=msg.queue_depth)
                self._dispatch.reported(worker, msg.queue_depth)
                continue
            membership.seen(worker, now)
            if isinstance(msg, Fetch):
                self._dispatch.fetched(worker)
                self._snapshots.fetch(worker, msg)
            elif isinstance(msg, Keys):
                if msg.epoch == self._epoch:
                    self._dispatch.deferred(msg.keys)
            elif isinstance(msg, Done):
                if msg.epoch == self._epoch:
                    self._throttle.release(worker, msg.key)
            elif isinstance(msg, Released):
                self._dispatch.emit(membership.released(worker, msg.slots, now))
            elif isinstance(msg, Bye):
                log.info("worker left", worker=worker, reason=msg.reason)
                self._dispatch.emit(membership.leave(worker, now))

    def _hello(self, route: bytes, msg: Hello, now: float) -> None:
        before = self._membership.route(msg.worker_id)
        out = self._membership.hello(msg.worker_id, msg.incarnation, msg.concurrency, now, route)
        if out is None:
            if (msg.worker_id, msg.incarnation) not in self._refused:
                self._refused.add((msg.worker_id, msg.incarnation))
                log.warning(
                    "refused a worker process: another live process has its id",
                    worker=msg.worker_id,
                    pid=msg.pid,
                )
            self._nack(route, now, "another live process has this worker id")
            return
        self._refused.discard((msg.worker_id, msg.incarnation))
        if before != route:
            self._throttle.joined(msg.worker_id, limits=msg.limits)
        self._dispatch.emit(out)
        if before is None and self._may_assign(now):
            self._dispatch.emit(self._membership.tick(now))  # no need to wait for the tick
        if before != route:
            event = "worker joined" if before is None else "worker re-joined"
            log.info(event, worker=msg.worker_id, pid=msg.pid, concurrency=msg.concurrency)

    def _not_a_member(self, route: bytes, msg: Message, now: float) -> None:
        if isinstance(msg, Bye):
            return
        if isinstance(msg, Fetch):
            reply = Nack(self._epoch, msg.request_id, NackReason.STALE_EPOCH, "not a member")
            self._dispatch.send(route, reply)
        self._nack(route, now, "unknown worker: join")

    def _nack(self, route: bytes, now: float, detail: str) -> None:
        if now - self._nacked.get(route, -math.inf) >= 1.0:
            self._nacked[route] = now
            self._dispatch.send(route, Nack(self._epoch, 0, NackReason.STALE_EPOCH, detail))

    # --- sending ------------------------------------------------------------------------------

    async def send(self) -> None:
        membership = self._membership
        while True:
            target, msg = await self._dispatch.next()
            if isinstance(target, bytes):
                await self._link.send(target, msg)  # a courtesy to a non-member: best effort
                continue
            route = membership.route(target)
            if route is None:
                continue  # no longer a member: nothing of this is wanted
            result = await self._link.send(route, msg)
            if result is SendResult.SENT:
                continue
            if result is SendResult.TOO_LARGE and isinstance(msg, Snapshot):
                detail = "the snapshot exceeds the frame size limit"
                reply = Nack(self._epoch, msg.request_id, NackReason.TOO_LARGE, detail)
                self._dispatch.send(target, reply)
                if msg.permit:
                    self._throttle.release(target, msg.key)
                continue
            if membership.route(target) == route:
                log.warning(
                    "message not delivered: dropping the worker",
                    worker=target,
                    message=type(msg).__name__,
                    result=result.value,
                )
                self._dispatch.emit(membership.lost(target, self._clock.now()))

    def controllers_changed(
        self, views: Sequence[ControllerView], added: Sequence[ControllerView]
    ) -> None:
        definitions = tuple(view.definition for view in views)
        for worker in self._membership.workers:
            self._dispatch.send(worker, Controllers(self._epoch, definitions))

    async def goodbye(self, within: float) -> bool:
        """BYE to every member; whether each answered BYE (it has stopped) within ``within``
        seconds. Call it once the receive loop has stopped."""
        reason = f"coordinator term {self._epoch} ended"
        waiting: set[bytes] = set()
        answered = True
        for worker in list(self._membership.workers.values()):
            if await self._link.send(worker.route, Bye(reason)) is SendResult.SENT:
                waiting.add(worker.route)
            else:
                answered = False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while waiting:
            left = deadline - loop.time()
            try:
                route, msg = await asyncio.wait_for(self._link.recv(), max(left, 0.0))
            except (TimeoutError, LinkClosed):
                log.info("workers did not confirm they stopped", workers=len(waiting))
                return False
            if isinstance(msg, Bye):
                waiting.discard(route)
        return answered

    # --- time ---------------------------------------------------------------------------------

    async def tick(self) -> None:
        started = self._started = self._clock.now()
        next_heartbeat = started
        membership = self._membership
        interval = membership.timing.heartbeat_interval
        grace = self._grace
        if grace.seconds > 0:
            log.info(
                f"waiting {grace.seconds:g} s for workers of a previous term to fence "
                "before the first assignment",
                epoch=self._epoch,
                reason=grace.reason,
            )
        else:
            log.info("no wait for workers of a previous term", reason=grace.reason)
        while True:
            now = self._clock.now()
            self._may_assign(now)
            self._dispatch.emit(membership.tick(now))
            if now >= next_heartbeat:
                next_heartbeat = now + interval
                for worker in membership.workers:
                    self._dispatch.send(worker, Heartbeat(self._epoch))
                self._metrics.slots(membership.owned_counts())
            self._metrics.workers(len(membership.workers))
            await self._clock.sleep(TICK)

    def _may_assign(self, now: float) -> bool:
        """Start assigning slots if the grace, the expected workers and the caches allow it
        now; whether it started now. Checked every tick and when a worker joins."""
        membership, grace = self._membership, self._grace
        elapsed = now - self._started
        if (
            membership.start_at == math.inf
            and elapsed >= grace.seconds
            and (len(membership.workers) >= grace.expected_workers or elapsed >= grace.join_within)
            and self._controllers.loaded
            and self._informers.synced
        ):
            membership.start_at = now
            self.assigning.set()
            log.info("assigning slots", workers=len(membership.workers))
            return True
        return False
