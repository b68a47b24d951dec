"""A ZeroMQ socket driven by the running event loop, without a future per message.

``zmq.asyncio`` resolves one future per receive and wakes the receiving task once per
message. Both link ends (``manager.link.router``, ``workers.link.dealer``) exchange many small
messages, so ``LoopSocket`` instead watches the socket's file descriptor and drains every message
that has arrived into an inbox each time it becomes readable; ``recv()`` returns from the inbox
without suspending while it holds messages.

Contract:
- ``LoopSocket(context, socket_type)`` creates the socket (``socket``: set options, bind,
  connect and monitor it there; never send or receive on it directly) and uses non-blocking
  calls only; it registers with the running loop on first use.
- ``send(parts)`` sends a multipart message at once or raises ``zmq.Again`` (no room, or no
  connection with ``IMMEDIATE``) or the ``zmq.ZMQError`` of the failure; it never waits.
  ``send_within(parts, seconds)`` retries a send that found no room until it is sent
  (``True``) or ``seconds`` have passed (``False``).
- ``recv()`` returns the next multipart message. One receiver at a time: the latest waiting
  ``recv()`` is the one woken, also when an earlier one is cancelled later. At most
  ``INBOX_LIMIT`` messages are taken from the socket ahead of the reader, so the socket's
  high-water marks still push back on a sender; a reader served from the inbox yields to the
  loop every ``YIELD_EVERY`` messages so a busy link cannot starve other tasks.
- ``close()`` unregisters from the loop and closes the socket (``LINGER`` applies); a
  ``recv()`` waiting or called later raises ``SocketClosed``. Idempotent. The same happens
  when the socket is closed otherwise (``Context.destroy``).
- ZeroMQ signals readiness edge-triggered and any call on the socket may consume the signal,
  so every send re-checks ``EVENTS`` and schedules a drain when messages are waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final, cast

import zmq

INBOX_LIMIT: Final = 1024
YIELD_EVERY: Final = 64
_RETRY_FIRST: Final = 0.001
_RETRY_MAX: Final = 0.02
# Plain ints: pyzmq's flag enums cost a Python-level enum operation on every use.
_NOBLOCK: Final = int(zmq.NOBLOCK)
_MORE_NOBLOCK: Final = int(zmq.SNDMORE) | _NOBLOCK
_EVENTS: Final = int(zmq.EVENTS)
_RCVMORE: Final = int(zmq.RCVMORE)
_POLLIN: Final = int(zmq.POLLIN)


class SocketClosed(Exception):
    """The socket was closed (by ``close()``, or its context was terminated)."""


class _Watched(zmq.Socket[bytes]):
    """A socket that tells its ``LoopSocket`` before it closes, however it is closed."""

    _on_close: Callable[[], None] | None = None

    def close(self, linger: int | None = None) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()
        super().close(linger)


class LoopSocket:
    def __init__(self, context: zmq.Context[Any], socket_type: int) -> None:
        sock = context.socket(socket_type, socket_class=_Watched)
        sock._on_close = self._closing
        self._sock: zmq.Socket[bytes] = sock
        self._fd = int(sock.getsockopt(zmq.FD))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox: deque[list[bytes]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._served = 0
        self._closed = False
        self._drain_scheduled = False

    @property
    def closed(self) -> bool:
        return self._closed or self._sock.closed

    @property
    def socket(self) -> zmq.Socket[bytes]:
        """The socket, for options, bind, connect and monitoring only."""
        return self._sock

    def _attach(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._loop.add_reader(self._fd, self._readable)

    def send(self, parts: Sequence[bytes]) -> None:
        """Send ``parts`` now, or raise ``zmq.Again`` / ``zmq.ZMQError``."""
        self._check_open()
        self._attach()
        sock = self._sock
        try:
            # One part at a time, as ``send_multipart`` does: a message whose first part is
            # queued is queued whole (the high-water mark counts whole messages).
            for part in parts[:-1]:
                sock.send(part, _MORE_NOBLOCK)
            sock.send(parts[-1], _NOBLOCK)
        except zmq.ZMQError as e:
            if self._terminated(e):
                raise SocketClosed(f"the socket is closed ({e})") from None
            raise
        self._after_io()

    async def send_within(self, parts: Sequence[bytes], seconds: float) -> bool:
        """Send ``parts``, retrying while there is no room, for up to ``seconds``."""
        deadline = time.monotonic() + seconds
        pause = _RETRY_FIRST
        while True:
            try:
                self.send(parts)
                return True
            except zmq.Again:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 2, _RETRY_MAX)

    async def recv(self) -> list[bytes]:
        """The next message; ``SocketClosed`` once closed."""
        self._attach()
        while True:
            self._check_open()
            if not self._inbox:
                self._drain()
            if self._inbox:
                self._served += 1
                if self._served >= YIELD_EVERY:
                    self._served = 0
                    await asyncio.sleep(0)
                    self._check_open()
                    if not self._inbox:
                        continue
                return self._inbox.popleft()
            self._served = 0
            assert self._loop is not None
            waiter = self._waiter = self._loop.create_future()
            try:
                await waiter
            finally:
                # A receive cancelled after another one began waiting leaves that one's waiter.
                if self._waiter is waiter:
                    self._waiter = None

    def close(self, linger: int | None = None) -> None:
        """Unregister and close the socket; wake a waiting ``recv()``. Idempotent."""
        self._sock.close(linger=linger)

    def _closing(self) -> None:
        """The socket is about to close: stop watching its descriptor, wake the reader."""
        self._closed = True
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(OSError, ValueError):  # gone with a terminated context
                self._loop.remove_reader(self._fd)
        self._wake()

    def _check_open(self) -> None:
        if self.closed:
            raise SocketClosed("the socket is closed")

    def _readable(self) -> None:
        self._drain()

    def _after_io(self) -> None:
        """A send may have consumed the readiness signal: drain soon if messages wait."""
        if self._drain_scheduled or self._waiter is None:
            return
        try:
            events = cast(int, self._sock.get(_EVENTS))
        except zmq.ZMQError:
            return
        if events & _POLLIN and self._loop is not None:
            self._drain_scheduled = True
            self._loop.call_soon(self._scheduled_drain)

    def _scheduled_drain(self) -> None:
        self._drain_scheduled = False
        self._drain()

    def _drain(self) -> None:
        """Move what has arrived (up to the inbox limit) into the inbox; wake the reader."""
        if self.closed:
            self._wake()
            return
        sock, inbox = self._sock, self._inbox
        try:
            # Asking ``EVENTS`` before each receive (not receiving until ``Again``) spares an
            # exception per drain; reading it also re-arms the edge-triggered descriptor.
            while len(inbox) < INBOX_LIMIT and cast(int, sock.get(_EVENTS)) & _POLLIN:
                parts = [sock.recv(_NOBLOCK)]
                while sock.get(_RCVMORE):
                    parts.append(sock.recv(_NOBLOCK))
                inbox.append(parts)
            if len(inbox) >= INBOX_LIMIT:
                # The limit stopped us; the signal is consumed: ``recv`` drains again when empty.
                sock.get(_EVENTS)
        except zmq.ZMQError as e:
            self._terminated(e)
        if inbox or self.closed:
            self._wake()

    def _terminated(self, error: zmq.ZMQError) -> bool:
        """Whether ``error`` means the context was terminated or the socket closed elsewhere
        (then this socket is closed too)."""
        if error.errno in (zmq.ETERM, zmq.ENOTSOCK) or self._sock.closed:
            self.close()
            return True
        return False

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
