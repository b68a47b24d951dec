from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import zmq
import zmq.asyncio
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from manager.link.auth import REFUSED_METRIC, refused_peers_counter
from manager.link.refusals import UNKNOWN, Refusals, peer_address, refusal
from manager.link.router import RouterLink
from proto.runtime.clock import FakeClock
from proto.runtime.curve import client_keys, generate, server_keys
from tests.unit import zmq_sockets

ctx = pytest_asyncio.fixture(zmq_sockets.context, name="ctx")

MISMATCH = (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
CRYPTO = (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
AUTH = (zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)


@pytest.mark.parametrize(
    ("event", "value", "reason", "says"),
    [
        (*MISMATCH, "protocol", "does not use CURVE"),
        (*CRYPTO, "protocol", "expects another coordinator's public key"),
        (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, 0x11000011, "protocol", "error 0x11000011"),
        (*AUTH, "auth", "not one the coordinator admits"),
        (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, 104, "other", "hung up during the handshake"),
    ],
)
def test_each_failed_handshake_has_a_reason_and_a_cause(
    event: int, value: int, reason: str, says: str
) -> None:
    found = refusal(event, value)
    assert found is not None and found.reason == reason and says in found.cause


@pytest.mark.parametrize("event", [zmq.EVENT_ACCEPTED, zmq.EVENT_HANDSHAKE_SUCCEEDED])
def test_other_events_are_no_refusal(event: int) -> None:
    assert refusal(event, 7) is None


class _Counter:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def labels(self, *, reason: str) -> _Counter.Series:
        return _Counter.Series(self, reason)

    class Series:
        def __init__(self, counter: _Counter, reason: str) -> None:
            self._counter, self._reason = counter, reason

        def inc(self, amount: float = 1) -> None:
            counts = self._counter.counts
            counts[self._reason] = counts.get(self._reason, 0) + int(amount)


class _Log:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def warning(self, event: str, /, **kw: Any) -> None:
        self.lines.append({"event": event, **kw})


def _refusals(clock: FakeClock, *, remember: int = 1024) -> tuple[Refusals, _Log, _Counter]:
    log, counter = _Log(), _Counter()
    peers = {fd: f"10.0.0.{fd}" for fd in range(1, 20)}
    refusals = Refusals(
        peer=peers.__getitem__, log=log, counter=counter, clock=clock, remember=remember
    )
    return refusals, log, counter


def _refuse(refusals: Refusals, fd: int, failure: tuple[int, int]) -> None:
    refusals.observe(zmq.EVENT_ACCEPTED, fd)
    refusals.observe(*failure)
    refusals.observe(zmq.EVENT_DISCONNECTED, fd)


def test_a_refusal_is_logged_with_its_peer_once_per_peer_cause_and_period() -> None:
    clock = FakeClock()
    refusals, log, counter = _refusals(clock)
    _refuse(refusals, 3, MISMATCH)
    assert [(line["peer"], line["reason"], line["unlogged"]) for line in log.lines] == [
        ("10.0.0.3", "protocol", 0)
    ]
    assert "does not use CURVE" in log.lines[0]["cause"]
    for _ in range(5):  # the same peer and cause: counted, not logged
        _refuse(refusals, 3, MISMATCH)
    _refuse(refusals, 3, CRYPTO)  # another cause of the same reason
    _refuse(refusals, 4, MISMATCH)  # another peer
    _refuse(refusals, 3, AUTH)
    assert [(line["peer"], line["reason"]) for line in log.lines] == [
        ("10.0.0.3", "protocol"),
        ("10.0.0.3", "protocol"),
        ("10.0.0.4", "protocol"),
        ("10.0.0.3", "auth"),
    ]
    assert counter.counts == {"protocol": 8, "auth": 1}
    clock.advance(59)
    _refuse(refusals, 3, MISMATCH)
    assert len(log.lines) == 4
    clock.advance(1)
    _refuse(refusals, 3, MISMATCH)
    assert len(log.lines) == 5
    assert (log.lines[-1]["peer"], log.lines[-1]["unlogged"]) == ("10.0.0.3", 6)
    _refuse(refusals, 3, MISMATCH)
    assert len(log.lines) == 5  # a new period started with that line


def test_a_connection_that_ends_well_is_no_refusal() -> None:
    refusals, log, counter = _refusals(FakeClock())
    refusals.observe(zmq.EVENT_ACCEPTED, 5)
    refusals.observe(zmq.EVENT_HANDSHAKE_SUCCEEDED, 0)
    refusals.observe(zmq.EVENT_DISCONNECTED, 5)
    assert log.lines == [] and counter.counts == {}


def test_a_failure_without_its_disconnection_is_logged_with_an_unknown_peer() -> None:
    refusals, log, counter = _refusals(FakeClock())
    refusals.observe(*MISMATCH)
    refusals.observe(*AUTH)
    assert [(line["peer"], line["reason"]) for line in log.lines] == [(UNKNOWN, "protocol")]
    refusals.observe(zmq.EVENT_DISCONNECTED, 9)  # accepted before the monitor was read
    assert [(line["peer"], line["reason"]) for line in log.lines][1:] == [(UNKNOWN, "auth")]
    assert counter.counts == {"protocol": 1, "auth": 1}


def test_the_peers_remembered_are_bounded() -> None:
    refusals, log, _ = _refusals(FakeClock(), remember=2)
    for fd in (1, 2, 3, 1):  # 1 was forgotten when 3 came: logged again
        _refuse(refusals, fd, MISMATCH)
    assert [line["peer"] for line in log.lines] == ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.1"]


def test_the_peer_of_a_tcp_connection_is_its_address() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            conn, _ = server.accept()
            fd = conn.fileno()
            with conn:
                assert peer_address(fd, local=f"tcp://127.0.0.1:{port}") == "127.0.0.1"
                # Not a connection of the socket bound there (the descriptor was reused).
                assert peer_address(fd, local="tcp://127.0.0.1:1") == UNKNOWN
                assert peer_address(client.fileno(), local=f"tcp://127.0.0.1:{port}") == UNKNOWN
            assert peer_address(fd, local=f"tcp://127.0.0.1:{port}") == UNKNOWN  # closed


@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="SO_PEERCRED is Linux's")
def test_the_peer_of_a_unix_connection_is_its_uid(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen()
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)
            conn, _ = server.accept()
            with conn:
                assert peer_address(conn.fileno(), local=f"ipc://{path}") == f"uid {os.getuid()}"
                assert peer_address(conn.fileno(), local="ipc:///elsewhere") == UNKNOWN


@pytest.mark.asyncio
async def test_the_coordinator_logs_each_refusal_with_its_cause_and_never_a_key(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    """A plaintext peer, one with the wrong coordinator key, one with a made-up secret key for
    the workers' public key, and one with a key pair of its own: each is counted and its
    cause logged, with the peer's address where it could be read; no key of any of them, nor
    of the coordinator, is in the log."""
    keys = generate(tmp_path / "keys")
    server, worker = server_keys(keys), client_keys(keys)
    registry = CollectorRegistry()
    other_public, other_secret = zmq.curve_keypair()
    _, made_up_secret = zmq.curve_keypair()
    probes: dict[str, tuple[bytes, bytes, bytes] | None] = {
        "plaintext": None,
        "wrong server key": (other_public, worker.public, worker.secret),
        "made-up secret key": (worker.server_public, worker.public, made_up_secret),
        "a key pair of its own": (worker.server_public, other_public, other_secret),
    }

    def refused() -> float:
        return sum(
            registry.get_sample_value(REFUSED_METRIC, {"reason": reason}) or 0.0
            for reason in ("protocol", "auth", "other")
        )

    def more_than(count: float) -> Callable[[], bool]:
        return lambda: refused() > count

    async def until(condition: Callable[[], bool]) -> None:
        for _ in range(250):
            if condition():
                return
            await asyncio.sleep(0.02)
        raise AssertionError("not within 5 s")

    with capture_logs() as logs:
        link = RouterLink(context=ctx, curve=server, refused=refused_peers_counter(registry))
        endpoint = link.bind("tcp://127.0.0.1:0")
        for curve in probes.values():
            before = refused()
            probe = ctx.socket(zmq.DEALER)
            probe.setsockopt(zmq.LINGER, 0)
            if curve is not None:
                probe.curve_serverkey, probe.curve_publickey, probe.curve_secretkey = curve
            probe.connect(endpoint)
            await probe.send(b"HELLO")
            await until(more_than(before))
            probe.close()
        await until(lambda: len({line["cause"] for line in logs if "cause" in line}) == 3)
        link.close()
    lines = [line for line in logs if line["event"] == "refused a peer of the worker link"]
    causes = {(line["reason"], line["cause"].split(" (")[0].split(":")[0]) for line in lines}
    # The plain peer notices the mechanism mismatch first (and hangs up: ``other``) or not.
    plain = {
        ("protocol", "the peer does not use CURVE"),
        ("other", "the peer hung up during the handshake"),
    }
    assert len(causes & plain) == 1, lines
    assert causes - plain == {
        ("protocol", "the peer's CURVE handshake does not decrypt"),
        ("auth", "the peer's CURVE key is not one the coordinator admits"),
    }, lines
    # Retries of a probe, and two probes with the same cause from one peer: one line.
    pairs = [(line["peer"], line["cause"]) for line in lines]
    assert len(pairs) == len(set(pairs)), lines
    # A plain peer on loopback is often gone before its address could be read.
    assert {line["peer"] for line in lines} <= {"127.0.0.1", UNKNOWN}
    assert any(line["peer"] == "127.0.0.1" for line in lines), lines
    text = repr(logs)
    for key in (
        server.secret,
        server.public,
        worker.secret,
        worker.public,
        other_public,
        other_secret,
        made_up_secret,
    ):
        assert key.decode() not in text
