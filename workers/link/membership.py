"""A worker's standing with the coordinator: joining, heartbeats, epochs, slots, fencing.

Contract (see ``proto.wire.messages`` for the messages):
- Until welcomed, the worker sends HELLO (with a new incarnation per process) every
  ``hello_interval``. A WELCOME answering this incarnation, with an epoch not older than the
  one known, is accepted: anything left from an older epoch is cancelled first, then the
  controller definitions and slots of the WELCOME are adopted.
- Messages carrying another epoch than the current one are ignored (a NACK of a FETCH of an
  older epoch still fails that fetch). Every message of the current epoch counts as contact.
- While welcomed, a HEARTBEAT (with load) goes out every ``heartbeat_interval`` given by the
  coordinator. After ``fence_timeout`` without contact the worker fences itself: it cancels
  its running reconciles, forgets its queues and slots, recreates its socket and starts
  joining again. The fence timeout is derived from the coordinator's own timeout
  (``heartbeat_timeout - 2 * heartbeat_interval``), so a worker has stopped before the
  coordinator gives its slots to someone else.
- A process whose heartbeat loop stalled (stopped, swapped out, blocked) for longer than the
  fence timeout plus one heartbeat interval fences too, whatever it reads after the stall:
  the coordinator, hearing nothing, may have given its slots away, and the messages that
  waited in the socket were sent before it did. So the worker is not in contact from the
  moment its heartbeat loop is that late until it has fenced.
- A BYE from the coordinator fences at once and is answered with BYE once fenced (the
  coordinator's next leader then knows this worker stopped). A NACK(STALE_EPOCH) with
  request id 0 (the coordinator does not know this worker) makes it join again. While not
  welcomed, such a NACK answers the HELLO itself (for example: another process with this
  worker id is a member); its reason is logged once.
- A fence recreates the socket, so the coordinator sees the HELLO that follows on a new
  connection and knows the worker dropped its queues: it answers with WELCOME and an ASSIGN
  of every key of the slots the worker still owns.
- REVOKE: the slots stop being owned at once (no new reconcile starts), queued keys of them
  are dropped, running ones finish, then RELEASED is sent (after a fence, once joined again
  in the same epoch: the coordinator still waits for it).
- A KEYS notification for a key whose FETCH is outstanding is dropped: the coordinator pushes
  a key only once the change is in its cache, and the SNAPSHOT it sends later on the same
  ordered pipe reflects it.
- ``fetch`` sends a FETCH and waits for the SNAPSHOT or NACK with the same request id. It
  raises ``KeyDropped`` when the key cannot be reconciled here (not owner, unknown key or
  controller, no coordinator, epoch changed) and ``FetchFailed`` otherwise (timeout, snapshot
  too large): the runner drops the former and retries the latter with backoff.
- ``leave()`` (graceful shutdown) stops starting reconciles, lets running ones finish, and
  says BYE: the coordinator may then hand every slot to others at once.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger
from proto.wire import (
    Assign,
    Bye,
    ControllerDef,
    Controllers,
    Fetch,
    Heartbeat,
    Hello,
    Keys,
    LinkClosed,
    Message,
    Nack,
    NackReason,
    ParentKey,
    Released,
    Revoke,
    Snapshot,
    Welcome,
    slot_of,
)
from proto.wire import Priority as WirePriority
from workers.link.dealer import DealerLink
from workers.runner.runner import KeyDropped
from workers.workqueue import Priority

log = get_logger("metashard.membership")

ACK_FLUSH = 0.5  # seconds a BYE acknowledgement gets to leave before the socket is dropped

_PRIORITY = {WirePriority.LIVE: Priority.LIVE, WirePriority.LOW: Priority.LOW}
_DROP = frozenset(
    {
        NackReason.NOT_OWNER,
        NackReason.UNKNOWN_KEY,
        NackReason.UNKNOWN_CONTROLLER,
        NackReason.STALE_EPOCH,
    }
)


class FetchFailed(Exception):
    """The snapshot could not be had this time (timeout, too large); retry with backoff."""


class Work(Protocol):
    """What membership drives: the runner of this worker's reconciles."""

    def set_controllers(self, definitions: tuple[ControllerDef, ...]) -> None: ...
    def enqueue(self, key: ParentKey, priority: Priority) -> bool: ...
    def cancel(self, predicate: Callable[[ParentKey], bool]) -> int: ...
    async def drain(self, predicate: Callable[[ParentKey], bool]) -> None: ...

    @property
    def in_flight(self) -> int: ...

    @property
    def queued(self) -> int: ...


class Membership:
    def __init__(
        self,
        link: DealerLink,
        *,
        worker_id: str,
        concurrency: int,
        clock: Clock = SYSTEM_CLOCK,
        hello_interval: float = 0.25,
        fetch_timeout: float = 30.0,
    ) -> None:
        self._link = link
        self._worker_id = worker_id
        self._concurrency = concurrency
        self._clock = clock
        self._hello_interval = hello_interval
        self._fetch_timeout = fetch_timeout
        self.incarnation = uuid.uuid4().hex
        self.work: Work | None = None
        self.epoch: int | None = None
        self.welcomed = False
        self._slots: set[int] = set()
        self._slot_count = 0
        self._heartbeat_interval = 1.0
        self._fence_timeout = 3.0
        self._last_contact = 0.0
        self._last_tick = 0.0  # when the heartbeat loop last ran, while welcomed
        self._pending: dict[int, asyncio.Future[Snapshot]] = {}
        self._fetching: dict[ParentKey, int] = {}  # keys with a FETCH not yet answered
        self._fetch_keys: dict[int, ParentKey] = {}  # request id -> key, until answered
        self._request_ids = itertools.count(1)
        self._leaving = False
        self._refusal: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.joined = asyncio.Event()

    # --- what the runner asks ----------------------------------------------------------------

    def owns(self, key: ParentKey) -> bool:
        """Whether a reconcile of ``key`` may start here now."""
        return (
            self.welcomed
            and not self._leaving
            and slot_of(key, slot_count=self._slot_count) in self._slots
        )

    @property
    def _stall_limit(self) -> float:
        """How late the heartbeat loop may be before this process counts as stalled."""
        return self._fence_timeout + self._heartbeat_interval

    def in_contact(self) -> bool:
        """Whether this worker may still act on what it was given: joined, heard from the
        coordinator within the fence timeout, and its heartbeat loop not stalled
        (``workers.link.fencing``). A graceful leave still finishes what runs."""
        now = self._clock.now()
        return (
            self.welcomed
            and now - self._last_contact <= self._fence_timeout
            and now - self._last_tick <= self._stall_limit
        )

    async def fetch(self, key: ParentKey, barrier: Mapping[str, str]) -> Snapshot:
        if not self.welcomed or self.epoch is None:
            raise KeyDropped("not joined to a coordinator")
        request_id = next(self._request_ids)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Snapshot] = loop.create_future()
        self._pending[request_id] = future
        self._fetch_keys[request_id] = key
        self._fetching[key] = self._fetching.get(key, 0) + 1
        try:
            if not await self._link.send(Fetch(self.epoch, request_id, key, dict(barrier))):
                raise KeyDropped("coordinator unreachable")
            # A timer on the future itself: ``asyncio.wait_for`` costs twice as much per fetch.
            expiry = loop.call_later(self._fetch_timeout, _expire, future)
            try:
                return await future
            except TimeoutError:
                raise FetchFailed(f"no snapshot within {self._fetch_timeout:g}s") from None
            finally:
                expiry.cancel()
        finally:
            self._pending.pop(request_id, None)
            self._answered(request_id)

    def _answered(self, request_id: int) -> None:
        """The FETCH ``request_id`` is answered (or abandoned): KEYS count again for its key."""
        key = self._fetch_keys.pop(request_id, None)
        if key is not None:
            left = self._fetching.pop(key) - 1
            if left:
                self._fetching[key] = left

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
        self._leaving = True
        if self.work is not None:
            await self.work.drain(lambda _: True)
        if self.welcomed:
            await self._link.send(Bye(reason), wait=1.0)
        self.welcomed = False

    async def _tick(self) -> None:
        while True:
            if self.welcomed:
                now = self._clock.now()
                stalled, silent = now - self._last_tick, now - self._last_contact
                if stalled > self._stall_limit:
                    self._fence(f"this process stalled for {stalled:.1f}s")
                    continue
                if silent > self._fence_timeout:
                    self._fence(f"no word from the coordinator for {silent:.1f}s")
                    continue
                self._last_tick = now
                work = self.work
                await self._link.send(
                    Heartbeat(
                        self.epoch or 0,
                        work.in_flight if work else 0,
                        work.queued if work else 0,
                    )
                )
                await self._clock.sleep(self._heartbeat_interval)
            else:
                if not self._leaving:
                    await self._link.send(
                        Hello(self._worker_id, self.incarnation, self._concurrency, os.getpid())
                    )
                await self._clock.sleep(self._hello_interval)

    def _fence(self, reason: str, *, ack: Bye | None = None) -> None:
        log.warning("fenced: stopped all reconciles", reason=reason, epoch=self.epoch)
        self._reset()
        if ack is not None:
            self._link.send_now(ack)
        self._link.reconnect(flush=ACK_FLUSH if ack is not None else 0.0)

    def _reset(self) -> None:
        """Forget everything of the current epoch: work, slots, pending fetches."""
        self.welcomed = False
        self.joined.clear()
        self._slots.clear()
        if self.work is not None:
            self.work.cancel(lambda _: True)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(KeyDropped("coordinator changed or gone"))

    # --- messages -----------------------------------------------------------------------------

    def _handle(self, msg: Message) -> None:
        if isinstance(msg, Welcome):
            self._welcome(msg)
            return
        if isinstance(msg, Nack) and msg.request_id == 0:
            if msg.reason is NackReason.STALE_EPOCH and self.welcomed:
                log.info("the coordinator does not know this worker: joining again")
                self._reset()
            elif not self.welcomed and msg.detail != self._refusal:
                self._refusal = msg.detail
                log.warning("the coordinator refused to welcome this worker", reason=msg.detail)
            return
        if isinstance(msg, Bye):
            if self.welcomed:
                # Acknowledge once stopped: the next leader need not wait for this worker.
                self._fence(f"the coordinator left: {msg.reason}", ack=Bye("stopped"))
            return
        if not self.welcomed or getattr(msg, "epoch", None) != self.epoch:
            if isinstance(msg, Nack):
                self._resolve_nack(msg)
            return
        self._last_contact = self._clock.now()
        work = self.work
        if isinstance(msg, Keys):
            priority = _PRIORITY[msg.priority]
            for key in msg.keys:
                # A key whose snapshot is on its way needs no new run: the coordinator pushed
                # it after the change reached its cache, so the snapshot (sent after this
                # message, on the same ordered pipe) already reflects the change.
                if key not in self._fetching and self.owns(key) and work is not None:
                    work.enqueue(key, priority)
        elif isinstance(msg, Snapshot):
            self._answered(msg.request_id)
            future = self._pending.get(msg.request_id)
            if future is not None and not future.done():
                future.set_result(msg)
        elif isinstance(msg, Nack):
            self._resolve_nack(msg)
        elif isinstance(msg, Assign):
            self._slots.update(msg.slots)
            if work is not None:
                for key in msg.keys:
                    work.enqueue(key, Priority.LOW)
            log.info(
                "slots assigned", slots=len(msg.slots), keys=len(msg.keys), owned=len(self._slots)
            )
        elif isinstance(msg, Revoke):
            self._revoke(msg)
        elif isinstance(msg, Controllers) and work is not None:
            work.set_controllers(msg.controllers)

    def _welcome(self, msg: Welcome) -> None:
        if msg.incarnation != self.incarnation or self._leaving:
            return
        if self.epoch is not None and msg.epoch < self.epoch:
            return
        if self.welcomed and msg.epoch == self.epoch:
            return  # a duplicate answer to a repeated HELLO
        if self.welcomed or self.work is not None:
            self._reset()
        self.epoch = msg.epoch
        self._slot_count = msg.slot_count
        self._slots = set(msg.slots)
        self._heartbeat_interval = msg.heartbeat_interval
        self._fence_timeout = max(
            msg.heartbeat_timeout - 2 * msg.heartbeat_interval, msg.heartbeat_interval
        )
        self._last_contact = self._last_tick = self._clock.now()
        self.welcomed = True
        self.joined.set()
        if self.work is not None:
            self.work.set_controllers(msg.controllers)
        log.info(
            "joined",
            epoch=msg.epoch,
            coordinator=msg.coordinator_id,
            controllers=len(msg.controllers),
        )

    def _resolve_nack(self, msg: Nack) -> None:
        self._answered(msg.request_id)
        future = self._pending.get(msg.request_id)
        if future is None or future.done():
            return
        if msg.reason in _DROP:
            future.set_exception(KeyDropped(f"{msg.reason.value}: {msg.detail}"))
        else:
            future.set_exception(FetchFailed(f"{msg.reason.value}: {msg.detail}"))

    def _revoke(self, msg: Revoke) -> None:
        revoked = frozenset(msg.slots)
        self._slots.difference_update(revoked)
        epoch = msg.epoch
        slot_count = self._slot_count

        def in_revoked(key: ParentKey) -> bool:
            return slot_of(key, slot_count=slot_count) in revoked

        async def release() -> None:
            if self.work is not None:
                await self.work.drain(in_revoked)
            while not self.welcomed:  # fenced meanwhile: the coordinator may still wait for it
                await self.joined.wait()
            if self.epoch == epoch:
                await self._link.send(Released(epoch, tuple(sorted(revoked))), wait=1.0)

        task = asyncio.create_task(release(), name="release-slots")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _expire(future: asyncio.Future[Snapshot]) -> None:
    """A FETCH went unanswered for the fetch timeout."""
    if not future.done():
        future.set_exception(TimeoutError())
