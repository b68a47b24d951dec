"""The emulator's listening socket: every connection waiting is accepted at once.

libuv, under uvloop, accepts one connection per turn of the event loop (libuv pull 3696). A
busy emulator, whose turns take several milliseconds, then serves a burst of new connections
one turn apart: 48 new connections from one client, while another keeps 64 requests in flight,
waited 0.02 to 0.36 s, against 0.02 to 0.03 s on reused connections or on asyncio's own loop,
which accepts in a loop. kube-apiserver accepts on a goroutine of its own, so a client that
opens connections in a burst (a controller at the start of a wave) is served at once there.

``Listener(factory, host, port)`` binds (``SO_REUSEADDR``, port 0 = any); ``start()`` returns the
port bound. Each time the socket is readable, up to ``BACKLOG`` waiting connections are
accepted and handed to ``factory`` (``loop.connect_accepted_socket``). Out of file descriptors
or buffers, accepting pauses for ``PAUSE_ON_EXHAUSTION`` seconds (as asyncio's loop does) and
is logged once per pause. ``close()`` stops accepting and closes the socket; connections already
accepted belong to the server that ``factory`` makes them for.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable

from proto.logs import get_logger

BACKLOG = 1024
PAUSE_ON_EXHAUSTION = 1.0
_EXHAUSTION = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

log = get_logger(__name__)


class Listener:
    def __init__(self, factory: Callable[[], asyncio.Protocol], host: str, port: int) -> None:
        self._factory = factory
        self._host = host
        self._port = port
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._paused: asyncio.TimerHandle | None = None
        self._handing: set[asyncio.Task[object]] = set()

    def start(self) -> int:
        """Bind, listen and start accepting on the running loop; the port bound."""
        self._loop = asyncio.get_running_loop()
        family = socket.getaddrinfo(
            self._host, self._port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0][0]
        sock = socket.create_server((self._host, self._port), family=family, backlog=BACKLOG)
        sock.setblocking(False)
        self._sock = sock
        self._loop.add_reader(sock.fileno(), self._accept)
        port: int = sock.getsockname()[1]
        return port

    def close(self) -> None:
        """Stop accepting and close the socket. Idempotent."""
        if self._paused is not None:
            self._paused.cancel()
            self._paused = None
        if self._sock is not None and self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
        self._sock = None

    def _accept(self) -> None:
        sock, loop = self._sock, self._loop
        assert sock is not None and loop is not None
        for _ in range(BACKLOG):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if exc.errno not in _EXHAUSTION:
                    raise
                log.warning("cannot accept connections, pausing", error=str(exc))
                loop.remove_reader(sock.fileno())
                self._paused = loop.call_later(PAUSE_ON_EXHAUSTION, self._resume)
                return
            conn.setblocking(False)
            task = loop.create_task(loop.connect_accepted_socket(self._factory, conn))
            self._handing.add(task)
            task.add_done_callback(self._handed)

    def _resume(self) -> None:
        self._paused = None
        if self._sock is not None and self._loop is not None:
            self._loop.add_reader(self._sock.fileno(), self._accept)

    def _handed(self, task: asyncio.Task[object]) -> None:
        self._handing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("an accepted connection could not be set up", error=str(task.exception()))
