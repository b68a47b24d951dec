"""A worker's standing with the coordinator: epoch, slots, contact. State only.

``Standing`` is what the membership (``workers.link.membership``) learns from the coordinator
and what the other parts ask of it; it sends and receives nothing itself.

- ``join(welcome)`` adopts a WELCOME: its epoch, slot count, slots and heartbeat timings;
  contact starts now. ``drop()`` forgets the epoch's slots and leaves the worker unjoined
  (the epoch is kept: a WELCOME of an older one is never accepted). ``joined`` is set from
  ``join`` until ``drop``.
- ``owns(key)`` (the runner's ``Gate``): joined, not leaving, and the key's slot is ours. A
  reconcile starts only while it says yes.
- ``in_contact()`` (the fencing's ``Contact``): joined, heard from the coordinator within
  ``fence_timeout``, and the membership's heartbeat loop not later than ``stall_limit``: a
  process that stalled for that long may have lost its slots without hearing it. A graceful
  leave still finishes what runs, so leaving does not end contact.
- ``fence_timeout`` is derived from the coordinator's own timeout
  (``heartbeat_timeout - 2 * heartbeat_interval``, at least one interval), so a worker has
  stopped before the coordinator gives its slots to someone else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.wire import ParentKey, Welcome, slot_of


class Standing:
    """This worker's epoch, slots and contact with the coordinator (module docstring)."""

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self.epoch: int | None = None
        self.welcomed = False
        self.leaving = False
        self.slots: set[int] = set()
        self.slot_count = 0
        self.heartbeat_interval = 1.0
        self.fence_timeout = 3.0
        self.last_contact = 0.0
        self.last_tick = 0.0  # when the heartbeat loop last ran, while joined
        self.joined = asyncio.Event()

    def owns(self, key: ParentKey) -> bool:
        """Whether a reconcile of ``key`` may start here now."""
        return (
            self.welcomed
            and not self.leaving
            and slot_of(key, slot_count=self.slot_count) in self.slots
        )

    @property
    def stall_limit(self) -> float:
        """How late the heartbeat loop may be before this process counts as stalled."""
        return self.fence_timeout + self.heartbeat_interval

    def in_contact(self) -> bool:
        """Whether this worker may still act on what it was given (module docstring)."""
        now = self._clock.now()
        return (
            self.welcomed
            and now - self.last_contact <= self.fence_timeout
            and now - self.last_tick <= self.stall_limit
        )

    def join(self, msg: Welcome) -> None:
        """Adopt the epoch, slots and timings of an accepted WELCOME."""
        self.epoch = msg.epoch
        self.slot_count = msg.slot_count
        self.slots = set(msg.slots)
        self.heartbeat_interval = msg.heartbeat_interval
        self.fence_timeout = max(
            msg.heartbeat_timeout - 2 * msg.heartbeat_interval, msg.heartbeat_interval
        )
        self.last_contact = self.last_tick = self._clock.now()
        self.welcomed = True
        self.joined.set()

    def drop(self) -> None:
        """Not joined any more: the slots of the epoch are gone."""
        self.welcomed = False
        self.joined.clear()
        self.slots.clear()

    def heard(self) -> None:
        """A message of the current epoch arrived."""
        self.last_contact = self._clock.now()

    def assign(self, slots: Iterable[int]) -> None:
        self.slots.update(slots)

    def revoke(self, slots: Iterable[int]) -> None:
        self.slots.difference_update(slots)
