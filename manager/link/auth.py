"""CURVE authentication of the coordinator's worker socket, and counting of refused peers.

- ``Gatekeeper(context, curve, refused=counter)`` runs ZeroMQ's ZAP handler on ``context``
  for the domain ``metashard``: a CURVE client whose public key is one of ``curve.admitted``
  is let in, any other is refused (logged once per key: the public key, never a secret).
- ``secure(socket)`` makes a ROUTER socket a CURVE server with the coordinator's key pair.
- ``watch(socket)`` counts, from the socket's monitor, every handshake that failed: a peer
  without CURVE or speaking garbage (``protocol``), a refused key (``auth``), a peer that
  hung up mid-handshake (``other``), in ``metashard_wire_peers_refused_total{reason}``.
  A plain ZeroMQ client sees the mechanism mismatch too; when it notices first and hangs up,
  the coordinator counts it as ``other``: which side notices first is a race.
- ``stop()`` ends both. One gatekeeper per context at a time (ZAP is per context).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

import zmq
import zmq.asyncio
from prometheus_client import CollectorRegistry, Counter
from zmq.auth.asyncio import AsyncioAuthenticator
from zmq.utils.monitor import parse_monitor_message

from proto.runtime.curve import ServerCurve
from proto.runtime.logs import get_logger

DOMAIN = "metashard"
REFUSED_METRIC = "metashard_wire_peers_refused_total"

_EVENTS: dict[int, str] = {
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "protocol",
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "auth",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "other",
}

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
        self._logged: set[bytes] = set()

    def callback(self, domain: str, key: bytes) -> bool:
        if key in self._admitted:
            return True
        if key not in self._logged and len(self._logged) < 1000:
            self._logged.add(key)
            log.warning("refused a peer with an unknown CURVE key", public_key=key.decode())
        return False


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
        events = 0
        for event in _EVENTS:
            events |= event
        # The monitor socket comes from the socket's context, an asyncio one.
        monitor = cast(zmq.asyncio.Socket, sock.get_monitor_socket(events))
        self._monitor = asyncio.ensure_future(self._count(monitor))

    async def _count(self, monitor: zmq.asyncio.Socket) -> None:
        try:
            while True:
                frames = await monitor.recv_multipart()
                event = int(parse_monitor_message(frames)["event"])
                reason = _EVENTS.get(event)
                if reason is not None and self._refused is not None:
                    self._refused.labels(reason=reason).inc()
        finally:
            monitor.close(linger=0)

    def stop(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            self._monitor = None
        with contextlib.suppress(zmq.ZMQError):
            self._auth.stop()
