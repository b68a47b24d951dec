"""CURVE authentication of the coordinator's worker socket, and accounting of refused peers.

- ``Gatekeeper(context, curve, refused=counter)`` runs ZeroMQ's ZAP handler on ``context``
  for the domain ``metashard``: a CURVE client whose public key is one of ``curve.admitted``
  is let in, any other is refused.
- ``secure(socket)`` makes a ROUTER socket a CURVE server with the coordinator's key pair.
- ``watch(socket)`` follows the bound socket's monitor (``manager.link.refusals``): every
  handshake that failed is counted in ``metashard_wire_peers_refused_total{reason}``: a peer
  without CURVE or with the wrong coordinator key or a secret key that does not match its
  public key (``protocol``), a key not admitted (``auth``), a peer that hung up
  mid-handshake (``other``); and logged with the peer's address and the likely cause, at
  most once per peer and cause a minute. No key is logged. A plain ZeroMQ client sees the
  mechanism mismatch too; when it notices first and hangs up, the coordinator counts it as
  ``other``: which side notices first is a race.
- ``stop()`` ends both. One gatekeeper per context at a time (ZAP is per context).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any, cast

import zmq
import zmq.asyncio
from prometheus_client import CollectorRegistry, Counter
from zmq.auth.asyncio import AsyncioAuthenticator
from zmq.utils.monitor import parse_monitor_message

from manager.link.refusals import EVENTS, Refusals, peer_address
from proto.runtime.curve import ServerCurve
from proto.runtime.logs import get_logger

DOMAIN = "metashard"
REFUSED_METRIC = "metashard_wire_peers_refused_total"

log = get_logger("metashard.wire", side="coordinator")


def refused_peers_counter(registry: CollectorRegistry) -> Counter:
    return Counter(
        REFUSED_METRIC,
        "Connections to the worker socket refused during the handshake, by reason",
        ["reason"],
        registry=registry,
    )


class _Admitted:
    """ZAP credentials provider: admits the configured worker public keys."""

    def __init__(self, admitted: frozenset[bytes]) -> None:
        self._admitted = admitted

    def callback(self, domain: str, key: bytes) -> bool:
        return key in self._admitted


class Gatekeeper:
    def __init__(
        self,
        context: zmq.asyncio.Context,
        curve: ServerCurve,
        *,
        refused: Counter | None = None,
    ) -> None:
        self._curve = curve
        self._refused = refused
        self._auth = AsyncioAuthenticator(context)
        self._auth.start()
        self._auth.configure_curve_callback(DOMAIN, credentials_provider=_Admitted(curve.admitted))
        self._monitor: asyncio.Task[None] | None = None

    def secure(self, sock: zmq.Socket[Any]) -> None:
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self._curve.secret)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self._curve.public)
        sock.setsockopt_string(zmq.ZAP_DOMAIN, DOMAIN)

    def watch(self, sock: zmq.Socket[Any]) -> None:
        """Follow the refused handshakes of ``sock``, once it is bound."""
        bound: str = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        refusals = Refusals(
            peer=functools.partial(peer_address, local=bound), log=log, counter=self._refused
        )
        # The monitor socket comes from the socket's context, an asyncio one.
        monitor = cast(zmq.asyncio.Socket, sock.get_monitor_socket(EVENTS))
        self._monitor = asyncio.ensure_future(self._follow(monitor, refusals))

    async def _follow(self, monitor: zmq.asyncio.Socket, refusals: Refusals) -> None:
        try:
            while True:
                event = parse_monitor_message(await monitor.recv_multipart())
                refusals.observe(int(event["event"]), int(event["value"]))
        finally:
            monitor.close(linger=0)

    def stop(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            self._monitor = None
        with contextlib.suppress(zmq.ZMQError):
            self._auth.stop()
