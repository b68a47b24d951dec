"""The emulator's listener accepts every waiting connection at once, also under uvloop (whose
own servers accept one per turn of the loop), and stops cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import uvloop

from loadtest.apiserver.listener import Listener

BURST = 20
TURNS = 5


class _Recorder(asyncio.Protocol):
    made: list[asyncio.BaseTransport]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        _Recorder.made.append(transport)


def _connected_after_burst(serve: str) -> int:
    """How many of ``BURST`` connections, all waiting before the loop turns, are made within
    ``TURNS`` turns of the loop, served by our ``Listener`` or by uvloop's ``create_server``."""
    _Recorder.made = []

    async def main() -> int:
        loop = asyncio.get_running_loop()
        server: asyncio.AbstractServer | None = None
        listener: Listener | None = None
        if serve == "listener":
            listener = Listener(_Recorder, "127.0.0.1", 0)
            port = listener.start()
        else:
            server = await loop.create_server(_Recorder, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
        # The kernel completes each handshake: all of them wait before the loop turns again.
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(BURST)]
        try:
            for _ in range(TURNS):
                await asyncio.sleep(0)
            return len(_Recorder.made)
        finally:
            for client in clients:
                client.close()
            for transport in _Recorder.made:
                transport.close()
            if listener is not None:
                listener.close()
            if server is not None:
                server.close()

    return uvloop.run(main())


def test_uvloop_servers_accept_one_connection_per_turn() -> None:
    # Why the listener exists: if this ever accepts the whole burst, it can go.
    assert _connected_after_burst("uvloop") < BURST


def test_the_listener_accepts_a_burst_within_a_few_turns() -> None:
    assert _connected_after_burst("listener") == BURST


def test_close_stops_accepting_and_frees_the_port() -> None:
    async def main() -> None:
        listener = Listener(_Recorder, "127.0.0.1", 0)
        port = listener.start()
        listener.close()
        listener.close()  # idempotent
        with contextlib.closing(socket.socket()) as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0
        again = Listener(_Recorder, "127.0.0.1", port)  # the port can be bound again at once
        assert again.start() == port
        again.close()

    uvloop.run(main())


def test_every_address_of_the_host_is_served_on_one_port() -> None:
    found = socket.getaddrinfo("localhost", 0, type=socket.SOCK_STREAM)
    hosts = {str(info[4][0]) for info in found}  # 127.0.0.1, and ::1 where it resolves

    async def main() -> None:
        listener = Listener(_Recorder, "localhost", 0)
        port = listener.start()
        try:
            for host in hosts:
                with contextlib.closing(socket.create_connection((host, port))):
                    pass
        finally:
            listener.close()

    uvloop.run(main())
