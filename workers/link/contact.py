"""What a worker says about its contact with the coordinator: joined, lost, or why not joined.

A worker that cannot join its coordinator (a wrong address, traffic dropped by a
NetworkPolicy, CURVE keys that do not match) would otherwise log ``worker started`` and then
nothing. ``ContactReport`` is fed what the DEALER socket's monitor saw (``observe``) and what
the membership learned (``joined``, ``lost``, ``refused``), and says it:

- While not joined, a warning ``cannot join the coordinator`` with the address, the likely
  ``cause`` and a sentence of ``detail``, first ``FIRST_WARNING_INTERVALS`` heartbeat intervals
  after the worker started or lost contact, then again after twice as long each time, capped
  at ``MAX_WARNING_INTERVAL``. Each warning is counted in
  ``metashard_worker_join_warnings_total{cause}``. No key material is ever logged.
- The cause is what the socket monitor last showed, and nothing more:
  - ``no_answer``: no connection yet and none refused: the attempts got no answer (an
    unreachable address, or traffic dropped on the way);
  - ``connection_refused``: the attempts fail at once without ever connecting (nothing listens
    at the address, or it is refused);
  - ``handshake_failed``: connected, but the peer closed the connection during the ZeroMQ
    handshake without saying why (a CURVE server with other keys than the coordinator public
    key this worker holds; or the peer is not a coordinator);
  - ``security_mismatch``: the handshake failed on a protocol error; ``ZMTP mechanism
    mismatch``: one side uses CURVE and the other not;
  - ``key_refused``: the coordinator refused this worker's CURVE key (not among the worker
    keys it admits);
  - ``no_welcome``: connected and the handshake done, but no WELCOME came (this coordinator is
    not the leader, or it refused the HELLO: its reason is given when it sent one).
- ``joined`` says ``joined coordinator`` once, when the worker goes from not joined to joined
  (``again`` and for how long contact was missing, after a loss); ``lost`` starts the warning
  schedule over (what was lost is logged where it is noticed: ``workers.link.membership``).
- ``check()`` is called on every tick of the membership; it reads the clock, never sleeps.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Final

import zmq
from prometheus_client import CollectorRegistry, Counter

from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger

log = get_logger("metashard.contact")

FIRST_WARNING_INTERVALS: Final = 3.0  # heartbeat intervals before the first warning
MAX_WARNING_INTERVAL: Final = 240.0  # seconds: the longest wait between two warnings
DEFAULT_HEARTBEAT_INTERVAL: Final = 1.0  # until a WELCOME gives the coordinator's


class Cause(Enum):
    """Why the worker is not joined, as far as it can know (module docstring)."""

    NO_ANSWER = "no_answer"
    CONNECTION_REFUSED = "connection_refused"
    HANDSHAKE_FAILED = "handshake_failed"
    SECURITY_MISMATCH = "security_mismatch"
    KEY_REFUSED = "key_refused"
    NO_WELCOME = "no_welcome"


_DETAIL: Final = {
    Cause.NO_ANSWER: "no connection: the connection attempts got no answer "
    "(an unreachable address, or traffic dropped on the way)",
    Cause.CONNECTION_REFUSED: "no connection: the attempts fail at once "
    "(nothing listens at this address)",
    Cause.HANDSHAKE_FAILED: "connected, but the peer closed the connection during the handshake "
    "(it may hold other CURVE keys than the coordinator key this worker has, "
    "or not be a coordinator)",
    Cause.SECURITY_MISMATCH: "connected, but the handshake failed on a protocol error",
    Cause.KEY_REFUSED: "connected, but the coordinator refused this worker's CURVE key "
    "(not among the worker keys it admits)",
    Cause.NO_WELCOME: "connected, but no WELCOME came "
    "(this coordinator is not the leader, or it refused the HELLO)",
}

_MECHANISM_MISMATCH: Final = 0x11000002  # ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH


def join_warnings_counter(registry: CollectorRegistry) -> Counter:
    """The ``metashard_worker_join_warnings_total{cause}`` counter of a worker's registry."""
    return Counter(
        "metashard_worker_join_warnings_total",
        "Warnings that this worker could not join its coordinator, by likely cause",
        ["cause"],
        registry=registry,
    )


class ContactReport:
    """Logs and counts this worker's contact with the coordinator (module docstring)."""

    def __init__(
        self,
        endpoint: str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        warnings: Counter | None = None,
    ) -> None:
        self._endpoint = endpoint
        self._clock = clock
        self._warnings = warnings
        self._interval = DEFAULT_HEARTBEAT_INTERVAL
        self._joined = False
        self._ever_joined = False
        self._since = clock.now()  # when the worker started, or lost contact
        self._wait = FIRST_WARNING_INTERVALS * self._interval
        self._next = self._since + self._wait
        self._cause = Cause.NO_ANSWER
        self._connected = False  # since the last failed connection attempt
        self._protocol_error = 0
        self._refusal: str | None = None

    @property
    def cause(self) -> Cause:
        """The likely cause of not being joined, from what was observed so far."""
        return self._cause

    def observe(self, events: Iterable[tuple[zmq.Event, int]]) -> None:
        """Take what the socket monitor saw: ``(event, value)`` pairs, oldest first."""
        for event, value in events:
            if event == zmq.Event.CONNECTED:
                self._connected = True
            elif event == zmq.Event.CONNECT_RETRIED:
                if not self._connected:
                    self._cause = Cause.CONNECTION_REFUSED
                self._connected = False
            elif event == zmq.Event.HANDSHAKE_FAILED_NO_DETAIL:
                self._cause = Cause.HANDSHAKE_FAILED
            elif event == zmq.Event.HANDSHAKE_FAILED_PROTOCOL:
                self._cause, self._protocol_error = Cause.SECURITY_MISMATCH, value
            elif event == zmq.Event.HANDSHAKE_FAILED_AUTH:
                self._cause = Cause.KEY_REFUSED
            elif event == zmq.Event.HANDSHAKE_SUCCEEDED:
                self._cause = Cause.NO_WELCOME

    def refused(self, reason: str) -> None:
        """The coordinator answered a HELLO with a refusal: said in the next warning."""
        self._refusal = reason

    def joined(self, *, epoch: int, coordinator: str, heartbeat_interval: float) -> None:
        """A WELCOME was accepted."""
        self._interval = heartbeat_interval
        if self._joined:
            return
        self._joined = True
        self._refusal = None
        if self._ever_joined:
            out = round(self._clock.now() - self._since, 1)
            log.info(
                "joined coordinator again",
                coordinator=self._endpoint,
                coordinator_id=coordinator,
                epoch=epoch,
                out_of_contact_seconds=out,
            )
        else:
            log.info(
                "joined coordinator",
                coordinator=self._endpoint,
                coordinator_id=coordinator,
                epoch=epoch,
            )
        self._ever_joined = True

    def lost(self) -> None:
        """Not joined any more: warnings start over if joining again takes long."""
        if not self._joined:
            return
        self._joined = False
        self._since = self._clock.now()
        self._wait = FIRST_WARNING_INTERVALS * self._interval
        self._next = self._since + self._wait
        self._cause = Cause.NO_ANSWER
        self._connected = False

    def check(self) -> None:
        """Warn (and count) if the worker has been out of contact long enough (module
        docstring)."""
        if self._joined:
            return
        now = self._clock.now()
        if now < self._next:
            return
        self._wait = min(2 * self._wait, MAX_WARNING_INTERVAL)
        self._next = now + self._wait
        cause = self._cause
        detail = _DETAIL[cause]
        if cause is Cause.SECURITY_MISMATCH:
            detail += (
                " (ZMTP mechanism mismatch: one side uses CURVE and the other not)"
                if self._protocol_error == _MECHANISM_MISMATCH
                else f" (ZMTP error {self._protocol_error:#x})"
            )
        if cause is Cause.NO_WELCOME and self._refusal is not None:
            detail += f"; the coordinator refused it: {self._refusal}"
        log.warning(
            "cannot join the coordinator",
            coordinator=self._endpoint,
            cause=cause.value,
            detail=detail,
            waited_seconds=round(now - self._since, 1),
            next_warning_seconds=round(self._wait, 1),
        )
        if self._warnings is not None:
            self._warnings.labels(cause.value).inc()
