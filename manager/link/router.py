"""The coordinator's end of the wire: one ZeroMQ ROUTER socket that every worker connects to.

Contract:
- ``RouterLink(...)`` creates and configures the socket; ``bind(endpoint)`` binds it
  (``tcp://`` or ``ipc://``) and returns the endpoint actually bound, so ``tcp://127.0.0.1:0``
  or ``tcp://*:*`` tell which port the system chose. An ``ipc://`` socket file is created
  with mode 0600 whatever the umask (the umask is narrowed for the duration of the bind
  call, which creates the file): only processes of this uid, and root, can connect to it.
- Socket options: ``ROUTER_MANDATORY=1`` (a send to an unknown or departed peer fails with
  EHOSTUNREACH instead of vanishing), no ``ROUTER_HANDOVER`` (workers set no routing id, so
  the ROUTER gives every connection its own; a peer that sets one anyway and collides with a
  live connection is ignored by libzmq, while with handover libzmq aborts the process on
  ``!_io_error`` when the ousted connection talks again), ``LINGER=0`` (close drops what is
  unsent: it would be stale), per-peer high-water marks, ZMTP heartbeats (dead TCP peers are
  dropped, and then count as unknown), and ``MAXMSGSIZE`` at twice the frame limit as a
  transport ceiling (a peer sending more is disconnected by libzmq; frames between the limit
  and the ceiling are received and dropped as ``oversized``).
- Authentication: given a ``ServerCurve`` (``proto.runtime.curve``), the socket is a CURVE server
  that admits only the configured worker public keys (``manager.link.auth``); refused
  handshakes are counted in ``metashard_wire_peers_refused_total{reason}``. Without one,
  anybody who reaches the endpoint can join: on ipc, that is processes of this uid
  (``manager.settings`` refuses a tcp:// bind without keys unless ``--insecure-worker-link``).
- ``send(routing_id, msg)`` never waits and never raises for a peer problem; it returns a
  ``SendResult``. Every send is non-blocking and completes (or fails) at once: a worker that
  stops reading fills its own pipe and gets ``FULL`` results without stalling the sends to
  the others. The socket's I/O goes through ``proto.runtime.loopsocket`` (no future per message).
  The high-water mark is a safety valve, not flow control: the coordinator must bound what
  it sends (credits, batching).
- ``recv()`` returns the next valid ``(routing_id, message)``; ``async for`` iterates until the
  link is closed. Bad frames (not msgpack, wrong version or type, oversized, a multipart
  message that is not exactly routing id + one frame) are dropped by a ``proto.wire.Intake``:
  counted in the injected ``metashard_wire_frames_dropped_total{reason}`` counter
  (``proto.wire.dropped_frames_counter``; none: not counted) and logged once per peer and
  reason. Receiving goes on.
- The routing id of a message names the connection it came on; which worker that is, is
  what its HELLO claimed (``manager.term.membership``).
- ``close()`` closes the socket: a ``recv()`` waiting or called later raises ``LinkClosed``,
  iteration ends, ``send`` raises ``LinkClosed``; the same once the context is terminated.
  The link never terminates the context (it is shared unless one was passed in, and then it
  is the caller's).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from enum import Enum
from typing import Final

import zmq
import zmq.asyncio
from prometheus_client import Counter

from manager.link.auth import Gatekeeper
from proto.runtime.curve import ServerCurve
from proto.runtime.logs import get_logger
from proto.runtime.loopsocket import LoopSocket, SocketClosed
from proto.wire import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameError,
    Intake,
    LinkClosed,
    Message,
    encode,
)

DEFAULT_HWM: Final = 100_000


class SendResult(Enum):
    SENT = "sent"  # queued to the worker's connection
    UNREACHABLE = "unreachable"  # no such peer (never connected, or gone): treat it as gone
    FULL = "full"  # the worker's pipe is at its high-water mark: it is not reading
    TOO_LARGE = "too_large"  # the frame would exceed the frame size limit; nothing was sent


@contextlib.contextmanager
def _owner_only(endpoint: str) -> Iterator[None]:
    """Files created meanwhile get mode 0600 (for an ipc:// endpoint; else nothing changes).
    libzmq creates an ipc socket file in the thread that calls bind."""
    if not endpoint.startswith("ipc://"):
        yield
        return
    saved = os.umask(0o177)
    try:
        yield
    finally:
        os.umask(saved)


def _peer(routing_id: bytes) -> str:
    return routing_id.decode("utf-8", "backslashreplace")


class RouterLink:
    """The coordinator's ROUTER socket: address workers by routing id, receive from all."""

    def __init__(
        self,
        *,
        context: zmq.asyncio.Context | None = None,
        dropped: Counter | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        hwm: int = DEFAULT_HWM,
        heartbeat_ivl: float = 1.0,
        heartbeat_timeout: float = 5.0,
        curve: ServerCurve | None = None,
        refused: Counter | None = None,
    ) -> None:
        self._max_frame_size = max_frame_size
        ctx = context if context is not None else zmq.asyncio.Context.instance()
        self._io = LoopSocket(ctx, zmq.ROUTER)
        sock = self._io.socket
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, hwm)
        sock.setsockopt(zmq.RCVHWM, hwm)
        sock.setsockopt(zmq.MAXMSGSIZE, 2 * max_frame_size)
        sock.setsockopt(zmq.HEARTBEAT_IVL, round(heartbeat_ivl * 1000))
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, round(heartbeat_timeout * 1000))
        self._gatekeeper: Gatekeeper | None = None
        if curve is not None:
            self._gatekeeper = Gatekeeper(ctx, curve, refused=refused)
            self._gatekeeper.secure(sock)
        self._socket = sock
        self._intake = Intake(
            log=get_logger("metashard.wire", side="coordinator"),
            counter=dropped,
            max_frame_size=max_frame_size,
        )

    def bind(self, endpoint: str) -> str:
        """Bind ``endpoint``; return the endpoint bound (with the port chosen, if any)."""
        with _owner_only(endpoint):
            self._socket.bind(endpoint)
        if self._gatekeeper is not None:
            self._gatekeeper.watch(self._socket)
        bound: str = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        return bound

    async def send(self, worker_id: bytes, msg: Message) -> SendResult:
        """Send ``msg`` to the worker with routing id ``worker_id``, without waiting."""
        self._check_open()
        try:
            frame = encode(msg, max_size=self._max_frame_size)
        except FrameError:
            return SendResult.TOO_LARGE
        try:
            self._io.send((worker_id, frame))
        except zmq.Again:
            return SendResult.FULL
        except SocketClosed as e:
            raise LinkClosed(f"the coordinator link is closed ({e})") from None
        except zmq.ZMQError as e:
            if e.errno == zmq.EHOSTUNREACH:
                return SendResult.UNREACHABLE
            raise
        return SendResult.SENT

    async def recv(self) -> tuple[bytes, Message]:
        """The next valid message and the routing id of its sender."""
        while True:
            try:
                parts = await self._io.recv()
            except SocketClosed as e:
                raise LinkClosed(f"the coordinator link is closed ({e})") from None
            routing_id, *payload = parts
            msg = self._intake.accept(_peer(routing_id), payload)
            if msg is not None:
                return routing_id, msg

    async def __aiter__(self) -> AsyncIterator[tuple[bytes, Message]]:
        while True:
            try:
                item = await self.recv()
            except LinkClosed:
                return
            yield item

    @property
    def closed(self) -> bool:
        return self._io.closed

    def _check_open(self) -> None:
        if self._io.closed:
            raise LinkClosed("the coordinator link is closed")

    def close(self) -> None:
        """Close the socket at once; unsent messages are dropped. Idempotent."""
        if self._gatekeeper is not None:
            self._gatekeeper.stop()
            self._gatekeeper = None
        self._io.close(linger=0)
