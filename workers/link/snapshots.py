"""The snapshots a worker asks the coordinator for: FETCH and its answer.

Contract (see ``proto.wire.messages`` for the messages):
- ``fetch(key, barrier)`` (the runner's ``SnapshotSource``) sends a FETCH of the current epoch
  and waits for the SNAPSHOT or NACK with the same request id, which the membership hands
  over (``answer``, ``refuse``). It raises ``KeyDropped`` when the key cannot be reconciled
  here (not owner, unknown key or controller, no coordinator, epoch changed, or its controller
  is at its limit: the coordinator keeps the key and pushes it again) and
  ``FetchFailed`` otherwise (timeout, snapshot too large): the runner drops the former and
  retries the latter with backoff.
- ``pending(key)``: a FETCH of ``key`` is not yet answered. The membership drops a KEYS
  notification for such a key: the coordinator pushes a key only once the change is in its
  cache, and the SNAPSHOT it sends later on the same ordered pipe reflects it.
- ``done(key)``: the reconcile a SNAPSHOT with ``permit`` started has ended; sends DONE
  (nothing if the link is gone: the coordinator frees the permits of a worker it lost).
- ``abandon()`` fails every FETCH still waiting with ``KeyDropped`` (the worker fenced, or
  joined a new epoch). An answer that comes after its FETCH gave up is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Mapping
from typing import Protocol

from proto.wire import Done, Fetch, LinkClosed, Message, Nack, NackReason, ParentKey, Snapshot
from workers.link.standing import Standing
from workers.runner.runner import KeyDropped

_DROP = frozenset(
    {
        NackReason.NOT_OWNER,
        NackReason.UNKNOWN_KEY,
        NackReason.UNKNOWN_CONTROLLER,
        NackReason.STALE_EPOCH,
        NackReason.THROTTLED,
    }
)


class Sender(Protocol):
    """Sends to the coordinator (``workers.link.dealer.DealerLink``)."""

    async def send(self, msg: Message, *, wait: float = 0.0) -> bool: ...


class FetchFailed(Exception):
    """The snapshot could not be had this time (timeout, too large); retry with backoff."""


class Snapshots:
    """FETCH requests and their answers (module docstring)."""

    def __init__(self, link: Sender, standing: Standing, *, timeout: float = 30.0) -> None:
        self._link = link
        self._standing = standing
        self._timeout = timeout
        self._pending: dict[int, asyncio.Future[Snapshot]] = {}
        self._fetching: dict[ParentKey, int] = {}  # keys with a FETCH not yet answered
        self._keys: dict[int, ParentKey] = {}  # request id -> key, until answered
        self._request_ids = itertools.count(1)

    async def fetch(self, key: ParentKey, barrier: Mapping[str, str]) -> Snapshot:
        """The snapshot of ``key`` once the coordinator's cache has seen ``barrier``."""
        epoch = self._standing.epoch
        if not self._standing.welcomed or epoch is None:
            raise KeyDropped("not joined to a coordinator")
        request_id = next(self._request_ids)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Snapshot] = loop.create_future()
        self._pending[request_id] = future
        self._keys[request_id] = key
        self._fetching[key] = self._fetching.get(key, 0) + 1
        try:
            if not await self._link.send(Fetch(epoch, request_id, key, dict(barrier))):
                raise KeyDropped("coordinator unreachable")
            # A timer on the future itself: ``asyncio.wait_for`` costs twice as much per fetch.
            expiry = loop.call_later(self._timeout, _expire, future)
            try:
                return await future
            except TimeoutError:
                raise FetchFailed(f"no snapshot within {self._timeout:g}s") from None
            finally:
                expiry.cancel()
        finally:
            self._pending.pop(request_id, None)
            self._answered(request_id)

    async def done(self, key: ParentKey) -> None:
        """DONE for ``key``: its reconcile, which held a permit, has ended."""
        epoch = self._standing.epoch
        if epoch is None:
            return
        with contextlib.suppress(LinkClosed):
            await self._link.send(Done(epoch, key))

    def pending(self, key: ParentKey) -> bool:
        """Whether a FETCH of ``key`` waits for its answer."""
        return key in self._fetching

    def answer(self, msg: Snapshot) -> None:
        """The SNAPSHOT answering a FETCH (dropped when that one gave up)."""
        self._answered(msg.request_id)
        future = self._pending.get(msg.request_id)
        if future is not None and not future.done():
            future.set_result(msg)

    def refuse(self, msg: Nack) -> None:
        """The NACK answering a FETCH: ``KeyDropped`` or ``FetchFailed`` by its reason."""
        self._answered(msg.request_id)
        future = self._pending.get(msg.request_id)
        if future is None or future.done():
            return
        if msg.reason in _DROP:
            future.set_exception(KeyDropped(f"{msg.reason.value}: {msg.detail}"))
        else:
            future.set_exception(FetchFailed(f"{msg.reason.value}: {msg.detail}"))

    def abandon(self) -> None:
        """Fail every FETCH still waiting: the coordinator changed or is gone."""
        for future in self._pending.values():
            if not future.done():
                future.set_exception(KeyDropped("coordinator changed or gone"))

    def _answered(self, request_id: int) -> None:
        """The FETCH ``request_id`` is answered (or abandoned): KEYS count again for its key."""
        key = self._keys.pop(request_id, None)
        if key is not None:
            left = self._fetching.pop(key) - 1
            if left:
                self._fetching[key] = left


def _expire(future: asyncio.Future[Snapshot]) -> None:
    """A FETCH went unanswered for the fetch timeout."""
    if not future.done():
        future.set_exception(TimeoutError())
