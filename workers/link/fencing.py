"""Writes and hook calls that check, each time, that this worker may still act.

A worker process can stall (a SIGSTOP, a long GC pause, a starved VM) for longer than its
fence timeout while a reconcile is half done; by the time it runs again the coordinator may
have given the key's slot to another worker. The membership fences itself when it notices,
but a reconcile already past its snapshot would go on writing in the meantime.

A ``Fence`` is the gate of the worker's API client (``Client.gated(fence.write)``,
``proto.kube.client``) and of its hook client (``HookClient(..., gate=fence)``,
``proto.hooks.client``); it asks its ``Contact`` (``workers.link.standing``) before every API
write and every hook call:

- The check runs right before the request's bytes are written, with nothing awaited in
  between (the ``ready`` check of ``proto.runtime.http1``, through the API client and the hook
  client): not before a rate limit, a wait for a connection or a 429's ``Retry-After`` sleep,
  which could let a request checked in time leave late. It asks ``may_start``: at least the
  safety margin before the fence deadline. When it says no, ``OutOfContact`` is raised and
  nothing is sent: the runner retries the key later, unless the worker fences first (then
  the slot's owner reconciles it).
- Should the bytes leave after the deadline all the same (the process was paused between the
  check and the send, longer than the safety margin), a warning says so, with the pause and
  the write or the hook call and its attempt id: another worker may be acting for the parent.
- After a hook answered, ``in_contact`` is asked again: a worker past its deadline (it was
  paused while the hook answered, or the coordinator went silent) discards the answer and
  raises ``OutOfContact``; nothing it would have written is written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.http1 import Ready
from proto.runtime.logs import get_logger
from workers.runner.runner import OutOfContact

log = get_logger("metashard.fencing")


class Contact(Protocol):
    """Whether this worker may still act on what it was given
    (``workers.link.standing.Standing``)."""

    def may_start(self) -> bool:
        """Whether a write or hook call may start now (not within the safety margin of the
        deadline)."""
        ...

    def in_contact(self) -> bool:
        """Whether the fence deadline has not passed."""
        ...

    def deadline(self) -> float:
        """The fence deadline, in the clock's seconds."""
        ...


class Fence:
    """The check of one worker's writes and hook calls (module docstring)."""

    def __init__(self, contact: Contact, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._contact = contact
        self._clock = clock

    def write(self, write: str) -> Ready:
        """The ``ready`` check of an API write (``"<METHOD> <path>"``): a ``WriteGate``."""
        return self._ready(write=write)

    def hook_call(self, hook: str, attempt: str) -> Ready:
        """The ``ready`` check of a call of ``hook`` for ``attempt``: a ``HookGate``."""
        return self._ready(hook=hook, attempt=attempt)

    def _ready(self, **what: str) -> Ready:
        """The ``ready`` check of one request; ``what`` names it in the warning."""

        def check() -> Callable[[], None]:
            contact, clock = self._contact, self._clock
            if not contact.may_start():
                raise OutOfContact("too close to the fence deadline: not acting on a stale claim")
            checked, deadline = clock.now(), contact.deadline()

            def sent() -> None:
                at = clock.now()
                if at > deadline:
                    log.warning(
                        "a request went out after the fence deadline: this process was paused "
                        "between its check and the send, another worker may act for the parent",
                        paused=round(at - checked, 3),
                        late=round(at - deadline, 3),
                        **what,
                    )

            return sent

        return check

    def answered(self) -> None:
        """Raise ``OutOfContact`` if an answer came past the deadline (module docstring)."""
        if not self._contact.in_contact():
            raise OutOfContact("past the fence deadline when the hook answered: answer discarded")
