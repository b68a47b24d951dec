"""A worker's end of the wire: one ZeroMQ DEALER socket connected to the coordinator.

Contract:
- ``DealerLink(worker_id, endpoint, ...)`` creates the socket and connects it (connecting
  does not wait: the connection is made, and remade after a loss, in the background). The
  socket sets no routing id: the coordinator's ROUTER gives each connection its own, and the
  worker id travels in HELLO, so no two connections can ever collide on an id.
- ``reconnect(endpoint=None, flush=0, reconnect_ivl_max=None)`` closes the socket (its queued
  messages get ``flush`` seconds to leave, in the background) and connects a new one (to
  ``endpoint``, or the same one as before; retrying at most every ``reconnect_ivl_max``
  seconds from now on, when given). Use it on every leader change or rejoin: a DEALER keeps the
  messages it could not deliver and would hand them, stale, to the next coordinator, and a
  DEALER connected to two endpoints would spread messages over both.
- Authentication: given a ``ClientCurve`` (``proto.runtime.curve``), the socket is a CURVE client
  of the coordinator's public key, with the workers' key pair; a coordinator that does not
  hold the matching secret key never completes the handshake.
- Socket options: ``LINGER=0`` (close drops what is unsent), ``IMMEDIATE=1`` (messages are
  only queued to a completed connection: while there is none, ``send`` fails or waits instead
  of queueing; a broken connection's queue is discarded, not replayed), ZMTP heartbeats
  (``HEARTBEAT_IVL``, ``HEARTBEAT_TIMEOUT``, and ``HEARTBEAT_TTL`` asking the coordinator to
  drop us after that long without traffic), reconnect intervals (below), high-water marks, and
  ``MAXMSGSIZE`` at twice the frame limit as a transport ceiling. The transport heartbeats only
  close dead TCP connections; liveness of the coordinator itself is the HEARTBEAT message's job.
- Reconnecting: ZeroMQ retries a connection after ``reconnect_ivl`` (0.1 s), doubling up to
  ``reconnect_ivl_max``, which must stay within a heartbeat interval of the coordinator
  (default 1 s, the coordinator's default interval). A new leader hands out the slots among
  the workers that joined within ``worker_timeout - heartbeat_interval`` of its start
  (``manager.term.grace``; at least two intervals, as the coordinator refuses a
  ``worker_timeout`` under three): retrying at most every interval, a worker makes two
  attempts within that window however long the coordinator was gone. With a cap of 5 s,
  retries are 5 s apart from 11 s after a loss on, and often miss it: with the e2e timings
  (0.2 s heartbeats, a 1 s window), a worker joined a leader started 8 s after the crash of
  the previous one 3.8 s after its bind, and 0.3 to 0.5 s with the cap at the interval
  (``tests/e2e/test_worker_contact.py``). A refused attempt costs a SYN and a RST.
- ``send(msg, wait=0)`` (``send_now(msg)``: the same without waiting, from plain code) returns
  ``True`` once the message is queued to a live connection. With ``wait=0`` it never waits:
  ``False`` when there is no connection or the pipe is full. With ``wait > 0`` it waits up to that
  many seconds for room (for example a HELLO right after connecting); a ``reconnect()`` fails the
  sends still waiting (``False``). The socket's I/O goes through ``proto.runtime.loopsocket`` (no
  future per message). ``FrameError`` if the message exceeds the frame limit.
- ``recv()`` returns the next valid message from the coordinator; ``async for`` iterates until
  the link is closed and carries on across ``reconnect()``. Bad frames (not msgpack, wrong
  version or type, oversized, not exactly one frame) are dropped by a ``proto.wire.Intake``:
  counted in the injected ``metashard_wire_frames_dropped_total{reason}`` counter
  (``proto.wire.dropped_frames_counter``; none: not counted) and logged once per endpoint
  and reason.
- ``events()`` returns what the socket's monitor saw since the last call, ``(zmq.Event,
  value)`` pairs oldest first, without waiting: connection attempts (``CONNECTED``,
  ``CONNECT_RETRIED``) and handshakes (``HANDSHAKE_*``), for ``workers.link.contact`` to say
  why the worker is not joined. Each socket has its monitor; ``reconnect()`` starts over.
- ``close()``: a ``recv()`` waiting or called later raises ``LinkClosed``, iteration ends,
  ``send`` raises ``LinkClosed``; the same once the context is terminated. The context itself
  is not terminated by the link.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any, Final

import zmq
import zmq.asyncio
from prometheus_client import Counter
from zmq.utils.monitor import parse_monitor_message

from proto.runtime.curve import ClientCurve
from proto.runtime.logs import get_logger
from proto.runtime.loopsocket import LoopSocket, SocketClosed
from proto.wire import (
    DEFAULT_MAX_FRAME_SIZE,
    Intake,
    LinkClosed,
    Message,
    encode,
)

DEFAULT_HWM: Final = 10_000

MONITORED: Final = (
    zmq.EVENT_CONNECTED
    | zmq.EVENT_CONNECT_RETRIED
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)
_monitors = itertools.count(1)  # inproc monitor endpoints are never reused


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


class DealerLink:
    """A worker's DEALER socket to the coordinator, re-creatable on every rejoin."""

    def __init__(
        self,
        worker_id: str,
        endpoint: str,
        *,
        context: zmq.asyncio.Context | None = None,
        dropped: Counter | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        hwm: int = DEFAULT_HWM,
        heartbeat_ivl: float = 1.0,
        heartbeat_timeout: float = 5.0,
        reconnect_ivl: float = 0.1,
        reconnect_ivl_max: float = 1.0,
        curve: ClientCurve | None = None,
    ) -> None:
        encoded = worker_id.encode("utf-8")
        if not 0 < len(encoded) <= 255 or encoded.startswith(b"\0"):
            raise ValueError(
                f"worker id {worker_id!r}: must be 1 to 255 bytes and not start with NUL"
            )
        self._context = context if context is not None else zmq.asyncio.Context.instance()
        self._max_frame_size = max_frame_size
        self._options = {
            zmq.LINGER: 0,
            zmq.IMMEDIATE: 1,
            zmq.SNDHWM: hwm,
            zmq.RCVHWM: hwm,
            zmq.MAXMSGSIZE: 2 * max_frame_size,
            zmq.HEARTBEAT_IVL: _ms(heartbeat_ivl),
            zmq.HEARTBEAT_TIMEOUT: _ms(heartbeat_timeout),
            zmq.HEARTBEAT_TTL: _ms(heartbeat_timeout),
            zmq.RECONNECT_IVL: _ms(reconnect_ivl),
            zmq.RECONNECT_IVL_MAX: _ms(reconnect_ivl_max),
        }
        self._keys: dict[zmq.SocketOption, bytes] = {}
        if curve is not None:
            self._keys = {
                zmq.CURVE_SERVERKEY: curve.server_public,
                zmq.CURVE_PUBLICKEY: curve.public,
                zmq.CURVE_SECRETKEY: curve.secret,
            }
        self._intake = Intake(
            log=get_logger("metashard.wire", side="worker", worker=worker_id),
            counter=dropped,
            max_frame_size=max_frame_size,
        )
        self._closed = False
        self._endpoint = endpoint
        self._socket, self._monitor = self._connected(endpoint)

    def _connected(self, endpoint: str) -> tuple[LoopSocket, zmq.Socket[bytes]]:
        """A new socket connected to ``endpoint``, and the PAIR socket its monitor speaks to."""
        io = LoopSocket(self._context, zmq.DEALER)
        sock = io.socket
        for option, value in self._options.items():
            sock.setsockopt(option, value)
        for key_option, key in self._keys.items():
            sock.setsockopt(key_option, key)
        address = f"inproc://metashard-dealer-monitor-{next(_monitors)}"
        sock.monitor(address, MONITORED)
        # A plain socket (not an asyncio one), read without waiting; made by the context, so
        # that destroying the context closes it.
        context: zmq.Context[Any] = self._context
        monitor: zmq.Socket[bytes] = context.socket(zmq.PAIR, socket_class=zmq.Socket)
        monitor.setsockopt(zmq.LINGER, 0)
        monitor.connect(address)
        sock.connect(endpoint)
        return io, monitor

    def events(self) -> list[tuple[zmq.Event, int]]:
        """What the current socket's monitor saw since the last call (module docstring)."""
        seen: list[tuple[zmq.Event, int]] = []
        if self._closed:
            return seen
        while True:
            try:
                frames = self._monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.ZMQError:  # nothing more (or the context was terminated)
                return seen
            event = parse_monitor_message(frames)
            seen.append((zmq.Event(event["event"]), int(event["value"])))

    def reconnect(
        self,
        endpoint: str | None = None,
        *,
        flush: float = 0.0,
        reconnect_ivl_max: float | None = None,
    ) -> None:
        """Drop the socket (after up to ``flush`` seconds of delivering what it queued, in the
        background); connect a fresh one (to ``endpoint``; retrying at most every
        ``reconnect_ivl_max`` seconds, from now on)."""
        self._check_open()
        if reconnect_ivl_max is not None:
            self._options[zmq.RECONNECT_IVL_MAX] = _ms(reconnect_ivl_max)
        self._drop(flush)
        if endpoint is not None:
            self._endpoint = endpoint
        self._socket, self._monitor = self._connected(self._endpoint)

    def _drop(self, flush: float) -> None:
        self._socket.close(linger=_ms(flush))
        self._monitor.close(linger=0)

    def send_now(self, msg: Message) -> bool:
        """``send(msg)`` without waiting, callable outside a coroutine."""
        sock = self._current()
        frame = encode(msg, max_size=self._max_frame_size)
        try:
            sock.send((frame,))
            return True
        except zmq.Again:
            return False
        except (SocketClosed, zmq.ZMQError) as e:
            raise self._gone(sock, e) from None

    async def send(self, msg: Message, *, wait: float = 0.0) -> bool:
        """Queue ``msg`` to the coordinator; ``False`` if it could not be queued in time."""
        if wait <= 0:
            return self.send_now(msg)
        sock = self._current()
        frame = encode(msg, max_size=self._max_frame_size)
        try:
            # reconnect() closes the socket a waiting send retries on: it fails.
            return await sock.send_within((frame,), wait)
        except (SocketClosed, zmq.ZMQError) as e:
            if sock is not self._socket and not self._closed:
                return False
            raise self._gone(sock, e) from None

    async def recv(self) -> Message:
        """The next valid message from the coordinator (across reconnects)."""
        while True:
            sock = self._current()
            try:
                parts = await sock.recv()
            except (SocketClosed, zmq.ZMQError) as e:
                # reconnect() closes the socket a receive waits on: go on with the new one.
                if sock is not self._socket and not self._closed:
                    continue
                raise self._gone(sock, e) from None
            msg = self._intake.accept(self._endpoint, parts)
            if msg is not None:
                return msg

    async def __aiter__(self) -> AsyncIterator[Message]:
        while True:
            try:
                msg = await self.recv()
            except LinkClosed:
                return
            yield msg

    def _gone(self, sock: LoopSocket, error: BaseException) -> BaseException:
        """What to raise for ``error`` on the current socket: ``LinkClosed`` if it was closed
        (by ``close()``, or by the context's termination), else the error itself."""
        errno = error.errno if isinstance(error, zmq.ZMQError) else None
        if self._closed or sock.closed or errno in (zmq.ETERM, zmq.ENOTSOCK):
            return LinkClosed(f"the worker link is closed ({type(error).__name__})")
        return error

    def _check_open(self) -> None:
        if self._closed:
            raise LinkClosed("the worker link is closed")

    def _current(self) -> LoopSocket:
        self._check_open()
        return self._socket

    def close(self) -> None:
        """Close the socket at once; unsent messages are dropped. Idempotent."""
        if not self._closed:
            self._closed = True
            self._drop(0.0)
