"""Keys a worker hands back to the coordinator: KEYS to a coordinator that takes them.

Contract (see ``proto.wire.messages`` for the messages):
- ``later(key)`` (the runner's ``Later``) hands ``key`` back to the coordinator, which queues
  it LOW behind the LOW keys waiting there, for whoever owns its slot then
  (``manager.term.dispatch``), and returns True; it returns False, sending nothing (the caller
  queues the key itself), unless the worker is joined to a coordinator whose WELCOME said
  ``defers``, whose last LOW KEYS said ``more`` LOW keys wait there for this worker, and owns
  the key's slot. With none waiting there, the key would come straight back behind nothing:
  queued here at LOW it goes in the same order without the round trip.
- Keys handed back in one event-loop turn go out at the end of it, as KEYS of at most
  ``KEYS_BATCH`` keys, each once, of the epoch they were handed back in. A KEYS the link cannot
  queue now (its high-water mark) is tried again every ``RETRY`` seconds while that epoch
  lasts. Keys of an epoch that ended, or once the link closed, are dropped: a worker that
  joins again gets every key of its slots with its WELCOME and ASSIGN, theirs with them.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Final, Protocol

from proto.wire import Keys, LinkClosed, Message, ParentKey, Priority
from workers.link.standing import Standing

KEYS_BATCH: Final = 512
RETRY: Final = 0.05  # seconds between tries of a KEYS the link could not queue


class Sender(Protocol):
    """Sends to the coordinator without waiting (``workers.link.dealer.DealerLink``)."""

    def send_now(self, msg: Message) -> bool: ...


class Deferrals:
    """Keys handed back to the coordinator (module docstring)."""

    def __init__(self, link: Sender, standing: Standing) -> None:
        self._link = link
        self._standing = standing
        self._epoch: int | None = None
        self._keys: dict[ParentKey, None] = {}
        self._scheduled = False

    def later(self, key: ParentKey) -> bool:
        standing = self._standing
        epoch = standing.epoch
        if not (
            standing.welcomed and standing.defers and standing.low_waiting and standing.owns(key)
        ):
            return False
        if epoch != self._epoch:
            self._epoch, self._keys = epoch, {}
        self._keys[key] = None
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        return True

    def _flush(self) -> None:
        self._scheduled = False
        epoch = self._epoch
        if epoch is None or epoch != self._standing.epoch:
            self._keys = {}
            return
        while self._keys:
            batch = tuple(itertools.islice(self._keys, KEYS_BATCH))
            try:
                sent = self._link.send_now(Keys(epoch, Priority.LOW, batch))
            except LinkClosed:
                self._keys = {}
                return
            if not sent:
                self._scheduled = True
                asyncio.get_running_loop().call_later(RETRY, self._flush)
                return
            for key in batch:
                del self._keys[key]
