"""A worker's membership: joining, heartbeats, fencing, and the keys it feeds the runner.

``Membership(link, standing, snapshots, work, contact=...)`` reads the coordinator's messages
from the link, keeps the worker's ``Standing`` (epoch, slots, contact) up to date, hands the
answers to FETCHes to ``Snapshots``, feeds parent keys into the ``WorkSink`` (the runner), and
tells the ``ContactReport`` (``workers.link.contact``) what the link's monitor saw, on every
tick, and when the worker joined, lost contact or was refused: it says so in the log.

Contract (see ``proto.wire.messages`` for the messages):
- Until welcomed, the worker sends HELLO (with a new incarnation per process) every
  ``hello_interval``. A WELCOME answering this incarnation, with an epoch not older than the
  one known, is accepted: anything left from an older epoch is cancelled first, then the
  controller definitions and slots of the WELCOME are adopted.
- Messages carrying another epoch than the current one are ignored (a NACK of a FETCH of an
  older epoch still fails that fetch). Every message of the current epoch counts as contact.
- While welcomed, a HEARTBEAT (with load) goes out every ``heartbeat_interval`` given by the
  coordinator; one that could be queued on the link counts as sent (``Standing.sent``).
  Once the fence deadline has passed (``workers.link.standing``: the fence timeout after the
  last message heard or the last heartbeat sent, whichever is earlier) the worker fences
  itself: it cancels its running reconciles, forgets its queues and slots, recreates its
  socket and starts joining again.
- So a process whose heartbeat loop stalled (stopped, swapped out, blocked) for longer than
  the fence timeout fences too, whatever it reads after the stall: the coordinator, hearing
  nothing, may have given its slots away, and the messages that waited in the socket were
  sent before it did. The worker is not in contact from the moment its deadline passed until
  it has fenced (``Standing.in_contact``). The fence is logged with what the worker can tell
  of why: no word from the coordinator, no heartbeat that could be queued (no connection),
  or a heartbeat loop that did not run (the process stalled).
- A BYE from the coordinator fences at once and is answered with BYE once fenced (the
  coordinator's next leader then knows this worker stopped). A NACK(STALE_EPOCH) with
  request id 0 (the coordinator does not know this worker) makes it join again. While not
  welcomed, such a NACK answers the HELLO itself (for example: another process with this
  worker id is a member); its reason is logged once.
- A fence recreates the socket, so the coordinator sees the HELLO that follows on a new
  connection and knows the worker dropped its queues: it answers with WELCOME and an ASSIGN
  of every key of the slots the worker still owns. The new socket retries its connection at
  most every heartbeat interval of the last WELCOME: a next leader takes in the workers that
  join within its first two intervals or more (``workers.link.dealer``).
- ZeroMQ never tries a connection again once its handshake was refused (``HANDSHAKE_FAILED_AUTH``:
  a CURVE key the coordinator does not admit; ``HANDSHAKE_FAILED_PROTOCOL``: one side without
  CURVE). The worker recreates its socket a heartbeat interval after such a refusal, as ZeroMQ
  retries any other failed connection, so a coordinator restarted with its key admitted gets it
  back without the worker being restarted.
- ASSIGN: the slots are owned, their keys queued at LOW priority. KEYS: each key the worker
  owns is queued at the message's priority, unless a FETCH of it is outstanding
  (``workers.link.snapshots``).
- REVOKE: the slots stop being owned at once (no new reconcile starts), queued keys of them
  are dropped, running ones finish, then RELEASED is sent (after a fence, once joined again
  in the same epoch: the coordinator still waits for it).
- ``leave()`` (graceful shutdown) stops starting reconciles, lets running ones finish, and
  says BYE: the coordinator may then hand every slot to others at once.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Protocol

import zmq

from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger
from proto.wire import (
    Assign,
    Bye,
    ControllerDef,
    Controllers,
    Heartbeat,
    Hello,
    Keys,
    LinkClosed,
    Message,
    Nack,
    NackReason,
    ParentKey,
    Priority,
    Released,
    Revoke,
    Snapshot,
    Welcome,
    slot_of,
)
from workers.link.contact import ContactReport
from workers.link.snapshots import Snapshots
from workers.link.standing import Standing

log = get_logger("metashard.membership")

ACK_FLUSH = 0.5  # seconds a BYE acknowledgement gets to leave before the socket is dropped
REFUSED = frozenset({zmq.Event.HANDSHAKE_FAILED_AUTH, zmq.Event.HANDSHAKE_FAILED_PROTOCOL})
"""The handshake failures after which ZeroMQ gives a connection up (module docstring)."""


class Link(Protocol):
    """The worker's end of the wire (``workers.link.dealer.DealerLink``)."""

    async def send(self, msg: Message, *, wait: float = 0.0) -> bool: ...
    def send_now(self, msg: Message) -> bool: ...
    def reconnect(self, *, flush: float = 0.0, reconnect_ivl_max: float | None = None) -> None: ...
    def events(self) -> list[tuple[zmq.Event, int]]: ...
    def __aiter__(self) -> AsyncIterator[Message]: ...


class WorkSink(Protocol):
    """What the membership feeds and stops: the runner of this worker's reconciles
    (``workers.runner.runner.Runner``)."""

    def set_controllers(self, definitions: tuple[ControllerDef, ...]) -> None: ...
    def enqueue(self, key: ParentKey, priority: Priority) -> bool: ...
    def cancel(self, predicate: Callable[[ParentKey], bool]) -> int: ...
    async def drain(self, predicate: Callable[[ParentKey], bool]) -> None: ...

    @property
    def in_flight(self) -> int: ...

    @property
    def queued(self) -> int: ...


class Membership:
    """This worker's side of the protocol with the coordinator (module docstring)."""

    def __init__(
        self,
        link: Link,
        standing: Standing,
        snapshots: Snapshots,
        work: WorkSink,
        *,
        contact: ContactReport,
        worker_id: str,
        concurrency: int,
        clock: Clock = SYSTEM_CLOCK,
        hello_interval: float = 0.25,
    ) -> None:
        self._link = link
        self._standing = standing
        self._snapshots = snapshots
        self._work = work
        self._contact = contact
        self._worker_id = worker_id
        self._concurrency = concurrency
        self._clock = clock
        self._hello_interval = hello_interval
        self.incarnation = uuid.uuid4().hex
        self._refusal: str | None = None
        self._refused_at: float | None = None  # when the handshake was last refused
        self._tasks: set[asyncio.Task[None]] = set()

    # --- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Receive and tick until cancelled or the link is closed."""
        ticker = asyncio.create_task(self._tick(), name="membership-tick")
        try:
            async for msg in self._link:
                self._handle(msg)
        except LinkClosed:
            pass
        finally:
            ticker.cancel()
            for task in list(self._tasks):
                task.cancel()

    async def leave(self, reason: str = "shutting down") -> None:
        """Graceful exit: finish running reconciles, then BYE."""
        standing = self._standing
        standing.leaving = True
        await self._work.drain(lambda _: True)
        if standing.welcomed:
            await self._link.send(Bye(reason), wait=1.0)
        standing.welcomed = False

    async def _tick(self) -> None:
        standing = self._standing
        tried = self._clock.now()  # when this loop last tried to send a heartbeat
        while True:
            events = self._link.events()
            self._contact.observe(events)
            self._contact.check()
            self._retry_refused(events)
            if standing.welcomed:
                now = self._clock.now()
                if now > standing.deadline():
                    self._fence(self._why_fenced(now, tried))
                    continue
                work = self._work
                beat = Heartbeat(standing.epoch or 0, work.in_flight, work.queued)
                tried = now
                if await self._link.send(beat):
                    standing.sent(now)
                await self._clock.sleep(standing.heartbeat_interval)
            else:
                if not standing.leaving:
                    await self._link.send(
                        Hello(
                            self._worker_id,
                            self.incarnation,
                            self._concurrency,
                            os.getpid(),
                            limits=True,
                        )
                    )
                await self._clock.sleep(self._hello_interval)

    def _retry_refused(self, events: list[tuple[zmq.Event, int]]) -> None:
        """A heartbeat interval after ZeroMQ gave up a refused handshake, a new socket."""
        now = self._clock.now()
        if any(event in REFUSED for event, _ in events):
            self._refused_at = now
        elif self._refused_at is not None:
            interval = self._standing.heartbeat_interval
            if now - self._refused_at >= interval:
                self._refused_at = None
                self._link.reconnect(reconnect_ivl_max=interval)

    def _why_fenced(self, now: float, tried: float) -> str:
        """Why the fence deadline passed, as far as this worker can tell: its heartbeat loop did
        not run (the process stalled), or its heartbeats could not be queued (no connection),
        or the coordinator said nothing."""
        standing = self._standing
        stalled, silent = now - standing.last_sent, now - standing.last_contact
        if silent > stalled:
            return f"no word from the coordinator for {silent:.1f}s"
        if now - tried > 2 * standing.heartbeat_interval:
            return f"this process stalled for {now - tried:.1f}s"
        return f"no heartbeat could be queued for {stalled:.1f}s (no connection to the coordinator)"

    def _fence(self, reason: str, *, ack: Bye | None = None) -> None:
        log.warning("fenced: stopped all reconciles", reason=reason, epoch=self._standing.epoch)
        self._reset()
        self._contact.lost()
        self._refused_at = None  # the new socket tries again anyway
        if ack is not None:
            self._link.send_now(ack)
        self._link.reconnect(
            flush=ACK_FLUSH if ack is not None else 0.0,
            reconnect_ivl_max=self._standing.heartbeat_interval,
        )

    def _reset(self) -> None:
        """Forget everything of the current epoch: work, slots, pending fetches."""
        self._standing.drop()
        self._work.cancel(lambda _: True)
        self._snapshots.abandon()

    # --- messages -----------------------------------------------------------------------------

    def _handle(self, msg: Message) -> None:
        standing = self._standing
        if isinstance(msg, Welcome):
            self._welcome(msg)
            return
        if isinstance(msg, Nack) and msg.request_id == 0:
            if msg.reason is NackReason.STALE_EPOCH and standing.welcomed:
                log.info("the coordinator does not know this worker: joining again")
                self._reset()
                self._contact.lost()
            elif not standing.welcomed and msg.detail != self._refusal:
                self._refusal = msg.detail
                log.warning("the coordinator refused to welcome this worker", reason=msg.detail)
                self._contact.refused(msg.detail)
            return
        if isinstance(msg, Bye):
            if standing.welcomed:
                # Acknowledge once stopped: the next leader need not wait for this worker.
                self._fence(f"the coordinator left: {msg.reason}", ack=Bye("stopped"))
            return
        if not standing.welcomed or getattr(msg, "epoch", None) != standing.epoch:
            if isinstance(msg, Nack):
                self._snapshots.refuse(msg)
            return
        standing.heard()
        work = self._work
        if isinstance(msg, Keys):
            if msg.priority is Priority.LOW:
                standing.low_waiting = msg.more
            for key in msg.keys:
                # A key whose snapshot is on its way needs no new run: the coordinator pushed
                # it after the change reached its cache, so the snapshot (sent after this
                # message, on the same ordered pipe) already reflects the change.
                if not self._snapshots.pending(key) and standing.owns(key):
                    work.enqueue(key, msg.priority)
        elif isinstance(msg, Snapshot):
            self._snapshots.answer(msg)
        elif isinstance(msg, Nack):
            self._snapshots.refuse(msg)
        elif isinstance(msg, Assign):
            standing.assign(msg.slots, msg.generation)
            for key in msg.keys:
                work.enqueue(key, Priority.LOW)
            log.info(
                "slots assigned",
                slots=len(msg.slots),
                keys=len(msg.keys),
                owned=len(standing.slots),
            )
        elif isinstance(msg, Revoke):
            self._revoke(msg)
        elif isinstance(msg, Controllers):
            work.set_controllers(msg.controllers)

    def _welcome(self, msg: Welcome) -> None:
        standing = self._standing
        if msg.incarnation != self.incarnation or standing.leaving:
            return
        if standing.epoch is not None and msg.epoch < standing.epoch:
            return
        if standing.welcomed and msg.epoch == standing.epoch:
            return  # a duplicate answer to a repeated HELLO
        self._reset()
        standing.join(msg)
        self._work.set_controllers(msg.controllers)
        self._contact.joined(
            epoch=msg.epoch,
            coordinator=msg.coordinator_id,
            heartbeat_interval=msg.heartbeat_interval,
        )

    def _revoke(self, msg: Revoke) -> None:
        standing = self._standing
        revoked = frozenset(msg.slots)
        standing.revoke(revoked)
        epoch = msg.epoch
        slot_count = standing.slot_count

        def in_revoked(key: ParentKey) -> bool:
            return slot_of(key, slot_count=slot_count) in revoked

        async def release() -> None:
            await self._work.drain(in_revoked)
            while not standing.welcomed:  # fenced meanwhile: the coordinator may still wait
                await standing.joined.wait()
            if standing.epoch == epoch:
                await self._link.send(Released(epoch, tuple(sorted(revoked))), wait=1.0)

        task = asyncio.create_task(release(), name="release-slots")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
