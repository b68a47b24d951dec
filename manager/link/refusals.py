"""Handshakes the worker socket refused: counted, and said in the log without flooding it.

ZeroMQ's socket monitor reports a failed handshake without the peer's address, so
``Refusals.observe(event, value)`` follows the events of one bound socket's monitor:

- ``EVENT_ACCEPTED`` (value: the new connection's file descriptor): the peer of the
  connection is read at once (``peer_address``).
- ``EVENT_HANDSHAKE_FAILED_PROTOCOL``, ``_AUTH``, ``_NO_DETAIL``: counted at once in
  ``metashard_wire_peers_refused_total{reason}`` (``protocol``, ``auth``, ``other``); the
  likely cause is named from the ZMTP error code (``refusal``).
- ``EVENT_DISCONNECTED`` (value: the descriptor): libzmq reports it right after the failure
  of the same connection (one I/O thread, one call), so the failure is logged with the peer
  read for that descriptor. A failure not followed by its disconnection is logged with the
  peer ``unknown`` when the next one comes.

The log line is a warning ``refused a peer of the worker link`` with ``peer``, ``reason`` and
``cause``: at most one per peer and cause per ``period`` (60 s; a plain peer and one with
the wrong coordinator key are both ``protocol``, with different causes); refusals in
between are counted, and the next line for that peer and cause says how many went unlogged
(``unlogged``). At most ``remember`` peer-cause pairs are kept (the oldest are forgotten
first), so a flood of new addresses cannot grow memory without bound. No key is ever logged:
the monitor sees none, and the gatekeeper logs none of those it refuses.

``peer_address(fd, local=...)`` is the IP address of a TCP peer, or ``uid N`` of the process
on the other end of a Unix socket (Linux; ``local`` elsewhere); ``unknown`` when the
descriptor is no longer a connection to the socket bound at ``local``. The address is read
when the monitor's event is read, on the event loop: a connection already closed by then is
``unknown`` (a plain client on loopback often fails its handshake that fast), or, when a new
connection to the same socket took its descriptor meanwhile, that one's peer.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

import zmq

from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.wire.intake import Series, WarningLogger

UNKNOWN: Final = "unknown"
PERIOD: Final = 60.0

_REASONS: Final[dict[int, str]] = {
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "protocol",
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "auth",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "other",
}
# The monitor events ``observe`` needs.
EVENTS: Final = int(zmq.EVENT_ACCEPTED) | int(zmq.EVENT_DISCONNECTED) | sum(_REASONS)

_CAUSES: Final[dict[int, str]] = {
    zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH: "the peer does not use CURVE "
    "(a worker without --curve-keys, or not a metashard worker)",
    zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC: "the peer's CURVE handshake does not decrypt: it "
    "expects another coordinator's public key, or its secret key does not match the public "
    "key it presents",
}
_AUTH_CAUSE: Final = "the peer's CURVE key is not one the coordinator admits (--curve-keys)"
_NO_DETAIL_CAUSE: Final = (
    "the peer hung up during the handshake (a worker without --curve-keys often does on "
    "seeing CURVE; so does a port check)"
)


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str  # the counter's label
    cause: str  # what it most likely means, for the log


def refusal(event: int, value: int) -> Refusal | None:
    """The refusal a monitor event reports; None for any other event."""
    reason = _REASONS.get(event)
    if reason is None:
        return None
    if reason == "auth":
        return Refusal(reason, _AUTH_CAUSE)
    if reason == "other":
        return Refusal(reason, _NO_DETAIL_CAUSE)
    cause = _CAUSES.get(value, f"the peer broke the ZMTP handshake (protocol error {value:#x})")
    return Refusal(reason, cause)


def peer_address(fd: int, *, local: str) -> str:
    """Who is on the other end of connection ``fd`` of the socket bound at ``local``."""
    try:
        with socket.socket(fileno=os.dup(fd)) as conn:
            if conn.family == socket.AF_UNIX:
                if conn.getsockname() != local.removeprefix("ipc://"):
                    return UNKNOWN
                if not hasattr(socket, "SO_PEERCRED"):
                    return "local"
                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
                return f"uid {struct.unpack('3i', creds)[1]}"
            if str(conn.getsockname()[1]) != local.rpartition(":")[2]:
                return UNKNOWN
            return str(conn.getpeername()[0])
    except OSError:
        return UNKNOWN


class RefusedCounter(Protocol):
    """The part of the labelled ``metashard_wire_peers_refused_total`` counter used here."""

    def labels(self, *, reason: str) -> Series: ...


@dataclass(slots=True)
class _Logged:
    at: float
    unlogged: int = 0


class Refusals:
    def __init__(
        self,
        *,
        peer: Callable[[int], str],
        log: WarningLogger,
        counter: RefusedCounter | None = None,
        clock: Clock = SYSTEM_CLOCK,
        period: float = PERIOD,
        remember: int = 1024,
    ) -> None:
        self._peer = peer
        self._log = log
        self._counter = counter
        self._clock = clock
        self._period = period
        self._remember = remember
        self._peers: dict[int, str] = {}  # open connections: descriptor -> peer
        self._pending: Refusal | None = None  # failed, its disconnection not seen yet
        self._logged: dict[tuple[str, str], _Logged] = {}

    def observe(self, event: int, value: int) -> None:
        """One event of the socket's monitor (``event``, ``value``)."""
        if event == zmq.EVENT_ACCEPTED:
            self._peers[value] = self._peer(value)
        elif event == zmq.EVENT_DISCONNECTED:
            peer = self._peers.pop(value, UNKNOWN)
            if self._pending is not None:
                self._say(peer, self._pending)
                self._pending = None
        else:
            found = refusal(event, value)
            if found is None:
                return
            if self._counter is not None:
                self._counter.labels(reason=found.reason).inc()
            if self._pending is not None:
                self._say(UNKNOWN, self._pending)
            self._pending = found

    def _say(self, peer: str, found: Refusal) -> None:
        now = self._clock.now()
        key = (peer, found.cause)
        logged = self._logged.get(key)
        if logged is not None and now - logged.at < self._period:
            logged.unlogged += 1
            return
        unlogged = logged.unlogged if logged is not None else 0
        self._logged.pop(key, None)
        if len(self._logged) >= self._remember:
            del self._logged[next(iter(self._logged))]
        self._logged[key] = _Logged(now)
        self._log.warning(
            "refused a peer of the worker link",
            peer=peer,
            reason=found.reason,
            cause=found.cause,
            unlogged=unlogged,
            note=f"logged at most once per peer and cause every {self._period:g} s",
        )
