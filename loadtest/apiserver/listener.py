"""The emulator's listening socket: every connection waiting is accepted at once.

libuv, under uvloop, accepts one connection per turn of the event loop (libuv pull 3696). A
busy emulator, whose turns take several milliseconds, then serves a burst of new connections
one turn apart: 48 new connections from one client, while another keeps 64 requests in flight,
waited 0.02 to 0.36 s, against 0.02 to 0.03 s on reused connections or on asyncio's own loop,
which accepts in a loop. kube-apiserver accepts on a goroutine of its own, so a client that
opens connections in a burst (a controller at the start of a wave) is served at once there.

``Listener(factory, host, port)`` binds every address the host resolves to, all on one port
(``SO_REUSEADDR``; port 0: the first address gets a free one); ``start()`` returns the port.
Each time a socket is readable, up to ``BACKLOG`` waiting connections are accepted and handed
to ``factory`` (``loop.connect_accepted_socket``). Out of file descriptors or buffers,
accepting pauses for ``PAUSE_ON_EXHAUSTION`` seconds (as asyncio's loop does) and is logged
once per pause. ``close()`` stops accepting and closes the sockets; connections already
accepted belong to the server that ``factory`` makes them for.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable

from proto.runtime.logs import get_logger

BACKLOG = 1024
PAUSE_ON_EXHAUSTION = 1.0
_EXHAUSTION = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

log = get_logger(__name__)


class Listener:
    def __init__(self, factory: Callable[[], asyncio.Protocol], host: str, port: int) -> None:
        self._factory = factory
        self._host = host
        self._port = port
        self._socks: list[socket.socket] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._paused: dict[socket.socket, asyncio.TimerHandle] = {}
        self._handing: set[asyncio.Task[object]] = set()

    def start(self) -> int:
        """Bind every address of the host (all on one port), listen and start accepting on the
        running loop; the port bound."""
        self._loop = asyncio.get_running_loop()
        found = socket.getaddrinfo(
            self._host, self._port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        port = self._port
        try:
            for family, address in dict.fromkeys((info[0], info[4][0]) for info in found):
                sock = socket.create_server((address, port), family=family, backlog=BACKLOG)
                self._socks.append(sock)
                port = sock.getsockname()[1]  # the others take the port the first one got
                sock.setblocking(False)
                self._loop.add_reader(sock.fileno(), self._accept, sock)
        except BaseException:
            self.close()
            raise
        return port

    def close(self) -> None:
        """Stop accepting and close the sockets. Idempotent."""
        for handle in self._paused.values():
            handle.cancel()
        self._paused.clear()
        for sock in self._socks:
            if self._loop is not None:
                self._loop.remove_reader(sock.fileno())
            sock.close()
        self._socks.clear()

    def _accept(self, sock: socket.socket) -> None:
        loop = self._loop
        assert loop is not None
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
                self._paused[sock] = loop.call_later(PAUSE_ON_EXHAUSTION, self._resume, sock)
                return
            conn.setblocking(False)
            task = loop.create_task(loop.connect_accepted_socket(self._factory, conn))
            self._handing.add(task)
            task.add_done_callback(self._handed)

    def _resume(self, sock: socket.socket) -> None:
        del self._paused[sock]
        if self._loop is not None:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _handed(self, task: asyncio.Task[object]) -> None:
        self._handing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("an accepted connection could not be set up", error=str(task.exception()))
