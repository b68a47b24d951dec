"""A worker's standing with the coordinator: epoch, slots, contact. State only.

``Standing`` is what the membership (``workers.link.membership``) learns from the coordinator
and what the other parts ask of it; it sends and receives nothing itself.

- ``join(welcome)`` adopts a WELCOME: its epoch, slot count, slots (with the WELCOME's
  assignment generation) and heartbeat timings; contact starts now. ``drop()`` forgets the
  epoch's slots and leaves the worker unjoined (the epoch is kept: a WELCOME of an older one is
  never accepted). ``joined`` is set from ``join`` until ``drop``. ``assign(slots,
  generation)`` and ``revoke(slots)`` follow ASSIGN and REVOKE.
- ``claim(key)`` (the runner's ``Gate``): the ``Claim`` a reconcile of ``key`` may start under
  now (the epoch and the generation of its slot's assignment), or None: not joined, leaving,
  or the key's slot is not ours. ``owns(key)`` says whether there is one.
- The fence deadline (``deadline()``): ``fence_timeout`` after the earlier of the last message
  heard from the coordinator (``heard``) and the last heartbeat this worker sent (``sent``).
  The coordinator frees a worker's slots only once it has heard nothing from it for its
  ``worker_timeout`` (``manager.term.membership``), which it counts from no earlier than the
  last heartbeat sent: so the worker has stopped acting ``worker_timeout - fence_timeout``
  before anyone else may be given its slots. Counting from the heartbeats it sent, not only
  from the messages it read, a process that was paused (stopped, starved) cannot be kept
  acting by the messages that waited in its socket during the pause.
- ``may_start()`` (the fencing's ``Contact``): joined and at least ``safety_margin`` (half a
  heartbeat interval) before the deadline: a hook call or write starts only then
  (``workers.link.fencing``). ``in_contact()``: joined and not past the deadline; a worker
  that finds itself past it after a hook answered discards the answer. A graceful leave still
  finishes what runs, so leaving does not end contact.
- ``fence_timeout`` is derived from the coordinator's timings, ``worker_timeout - 2 *
  heartbeat_interval`` and at least two intervals (so that a heartbeat loop on time is never
  near the deadline), leaving a margin of ``worker_timeout - fence_timeout`` (two heartbeat
  intervals with the default timings). ``Standing(fence_timeout=...)`` overrides it: a
  deliberately broken fence, for the tests that show the chaos test catches one; never safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.wire import ParentKey, Welcome, slot_of
from workers.reconcile import Claim


class Standing:
    """This worker's epoch, slots and contact with the coordinator (module docstring)."""

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK, fence_timeout: float | None = None) -> None:
        self._clock = clock
        self._fence_override = fence_timeout
        self.epoch: int | None = None
        self.welcomed = False
        self.leaving = False
        self.slots: dict[int, int] = {}  # slot -> the generation of its assignment to us
        self.slot_count = 0
        self.defers = False  # the coordinator takes keys back (KEYS from this worker)
        # The coordinator's last LOW KEYS of this epoch said more LOW keys wait there for us.
        self.low_waiting = False
        self.heartbeat_interval = 1.0
        self.fence_timeout = 3.0
        self.last_contact = 0.0  # when a message of the epoch was last heard
        self.last_sent = 0.0  # when the heartbeat loop last sent a heartbeat, while joined
        self.joined = asyncio.Event()

    def claim(self, key: ParentKey) -> Claim | None:
        """What a reconcile of ``key`` may start under now; None: it may not start here."""
        if not self.welcomed or self.leaving:
            return None
        generation = self.slots.get(slot_of(key, slot_count=self.slot_count))
        if generation is None:
            return None
        return Claim(self.epoch or 0, generation)

    def owns(self, key: ParentKey) -> bool:
        """Whether a reconcile of ``key`` may start here now."""
        return self.claim(key) is not None

    @property
    def safety_margin(self) -> float:
        """How long before the deadline no hook call or write starts any more."""
        return self.heartbeat_interval / 2

    def deadline(self) -> float:
        """When this worker must have stopped acting on what it was given (module docstring)."""
        return min(self.last_contact, self.last_sent) + self.fence_timeout

    def may_start(self) -> bool:
        """Whether a hook call or a write may start now."""
        return self.welcomed and self._clock.now() + self.safety_margin <= self.deadline()

    def in_contact(self) -> bool:
        """Whether this worker may still act on what it was given (module docstring)."""
        return self.welcomed and self._clock.now() <= self.deadline()

    def join(self, msg: Welcome) -> None:
        """Adopt the epoch, slots and timings of an accepted WELCOME."""
        self.epoch = msg.epoch
        self.slot_count = msg.slot_count
        self.slots = dict.fromkeys(msg.slots, msg.generation)
        self.defers = msg.defers
        self.low_waiting = False
        self.heartbeat_interval = msg.heartbeat_interval
        self.fence_timeout = (
            self._fence_override
            if self._fence_override is not None
            else max(msg.heartbeat_timeout - 2 * msg.heartbeat_interval, 2 * msg.heartbeat_interval)
        )
        self.last_contact = self.last_sent = self._clock.now()
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

    def sent(self, at: float) -> None:
        """A heartbeat left at ``at`` (read before it was sent)."""
        self.last_sent = at

    def assign(self, slots: Iterable[int], generation: int) -> None:
        self.slots.update(dict.fromkeys(slots, generation))

    def revoke(self, slots: Iterable[int]) -> None:
        for slot in slots:
            self.slots.pop(slot, None)
