"""What the coordinator sends to workers, in order: the outbox, and KEYS batched per loop turn.

Contract:
- ``push(key, priority)`` (the term's ``manager.routing.router.KeySink``) notes a parent key for
  the owner of its slot (``SlotOwners.dispatch_target``; the slot from ``SlotOf``, the key
  index, which remembers the slot of every parent it holds); all keys pushed in one event-loop
  turn go out as KEYS messages (at most ``KEYS_BATCH`` keys each, each key once per
  priority), in priority order. A key whose slot is in transit is dropped (the
  ASSIGN that ends the move carries every key of the slot). A key whose snapshot is being
  held back still goes out: only the worker knows whether it still waits for that snapshot
  (it drops KEYS of a key it is fetching, since the snapshot follows them on the same pipe).
- ``send(target, msg)`` queues one message: ``target`` is a worker id (resolved to its current
  connection when sent, and dropped if it is no longer a member, unless it is a NACK or BYE)
  or a routing id (``bytes``: an answer to a connection that is not a member).
- ``emit(outbox)`` queues what ``manager.term.membership`` returned, counting revoked slots.
- ``next()`` waits for the next message to send, in the order queued.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Protocol

from manager.term.membership import Outbox, SlotOwners
from manager.term.metrics import TermMetrics
from proto.wire import Keys, Message, ParentKey, Priority, Revoke

KEYS_BATCH = 512

Target = str | bytes
"""A worker id, or the routing id of a connection that is not a member."""


class SlotOf(Protocol):
    def slot(self, key: ParentKey) -> int:
        """The slot of ``key`` (``manager.routing.router.KeyIndex``)."""
        ...


class Dispatch:
    def __init__(
        self,
        *,
        epoch: int,
        owners: SlotOwners,
        slots: SlotOf,
        metrics: TermMetrics,
    ) -> None:
        self._epoch = epoch
        self._owners = owners
        self._slots = slots
        self._metrics = metrics
        self._outbox: asyncio.Queue[tuple[Target, Message]] = asyncio.Queue()
        self._pending: dict[str, dict[Priority, list[ParentKey]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self._flush_scheduled = False

    def push(self, key: ParentKey, priority: Priority) -> None:
        worker = self._owners.dispatch_target(self._slots.slot(key))
        if worker is None:
            return
        self._pending[worker][priority].append(key)
        self._metrics.keys_pushed(priority)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        pending, self._pending = self._pending, defaultdict(lambda: defaultdict(list))
        for worker, by_priority in pending.items():
            for priority, keys in sorted(by_priority.items()):
                unique = list(dict.fromkeys(keys))
                for i in range(0, len(unique), KEYS_BATCH):
                    batch = tuple(unique[i : i + KEYS_BATCH])
                    self._outbox.put_nowait((worker, Keys(self._epoch, priority, batch)))

    def send(self, target: Target, msg: Message) -> None:
        self._outbox.put_nowait((target, msg))

    def emit(self, out: Outbox) -> None:
        for worker, msg in out:
            if isinstance(msg, Revoke):
                self._metrics.revoked(len(msg.slots))
            self._outbox.put_nowait((worker, msg))

    async def next(self) -> tuple[Target, Message]:
        return await self._outbox.get()
