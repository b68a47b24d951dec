"""The coordinator's settings: parsed once from flags (Metacontroller's names where they
exist, ``proto.flags``) and environment, then passed down.

``from_args`` parses ``metashard coordinator``'s flags; ``add_arguments``/``from_namespace``
let ``metashard run`` add its own. ``notices`` are the warnings about flags given that have no
effect here; the entry point logs them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from proto.flags import Parser, Role, add_common, common, duration, typed
from proto.ops import Peer


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    bind: str = "tcp://0.0.0.0:7070"
    kubeconfig: str | None = None
    qps: float = 0.0
    burst: int = 0
    metrics_address: str = ":9999"
    health_address: str = ":8081"
    leader_election: bool = False
    leader_election_namespace: str | None = None
    leader_election_id: str = "metashard"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    discovery_interval: float = 30.0
    cache_flush_interval: float = 1800.0
    heartbeat_interval: float = 1.0
    worker_timeout: float = 5.0
    log_format: str = "auto"
    log_level: str = "info"
    # The local processes whose metrics the coordinator also serves (``metashard run``).
    metrics_peers: tuple[Peer, ...] = ()
    notices: tuple[str, ...] = ()


def _endpoint(text: str) -> str:
    """The form of a ZeroMQ endpoint to bind; whether it can be bound is checked at start
    (``manager.preflight.check_bind``)."""
    if not text.startswith(("tcp://", "ipc://")) or len(text) < 7:
        raise ValueError(f"{text!r}: expected tcp://HOST:PORT or ipc://PATH")
    return text


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The coordinator's flags (shared by ``metashard coordinator`` and ``metashard run``)."""
    p.add_argument(
        "--bind",
        type=typed(_endpoint),
        default="tcp://0.0.0.0:7070",
        help="ZeroMQ endpoint workers connect to (tcp://HOST:PORT or ipc://PATH)",
    )
    add_common(p)
    p.add_argument("--heartbeat-interval", type=typed(duration), default=1.0)
    p.add_argument(
        "--worker-timeout",
        type=typed(duration),
        default=5.0,
        help="a worker silent this long loses its slots",
    )


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def from_namespace(
    args: argparse.Namespace, *, role: Role = "coordinator", peers: Sequence[Peer] = ()
) -> CoordinatorSettings:
    shared = common(args, role=role)
    return CoordinatorSettings(
        bind=args.bind,
        kubeconfig=shared.kubeconfig,
        qps=shared.qps,
        burst=shared.burst,
        metrics_address=shared.metrics_address,
        health_address=shared.health_address,
        leader_election=args.leader_election,
        leader_election_namespace=args.leader_election_namespace,
        leader_election_id=args.leader_election_id or "metashard",
        lease_duration=_or(args.lease_duration, 15.0),
        renew_deadline=_or(args.renew_deadline, 10.0),
        retry_period=_or(args.retry_period, 2.0),
        discovery_interval=_or(args.discovery_interval, 30.0),
        cache_flush_interval=_or(args.cache_flush_interval, 1800.0),
        heartbeat_interval=args.heartbeat_interval,
        worker_timeout=args.worker_timeout,
        log_format=shared.log_format,
        log_level=shared.log_level,
        metrics_peers=tuple(peers),
        notices=shared.notices,
    )


def validate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Cross-flag checks (exit 2 through ``parser.error``)."""
    if args.worker_timeout < 3 * args.heartbeat_interval:
        parser.error("--worker-timeout must be at least 3 x --heartbeat-interval")


def from_args(argv: Sequence[str]) -> CoordinatorSettings:
    parser = Parser(prog="metashard coordinator")
    add_arguments(parser)
    args = parser.parse_args(list(argv))
    validate(parser, args)
    return from_namespace(args)
