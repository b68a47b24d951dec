"""The coordinator's settings: parsed once from flags (Metacontroller's names where they
exist, ``proto.runtime.flags``) and environment, then passed down.

``from_args`` parses ``metashard coordinator``'s flags; ``add_arguments``/``from_namespace``
let ``metashard run`` add its own. ``from_namespace`` raises ``ValueError`` for flags that
cannot work together (timings, a tcp:// worker socket without keys, unusable CURVE keys);
the commands turn it into a one-line usage error (exit 2) before anything starts.
``notices`` are the warnings about flags given that have no effect here; the entry point
logs them.

``--target-label-selector`` (Metacontroller's flag and syntax) restricts the controllers this
installation runs to those whose labels match. Two installations with disjoint selectors must
not share a Lease either: unless ``--leader-election-id`` is given, the Lease is named
``metashard`` without a selector and ``metashard-<10 hex digits of the selector's SHA-256>``
with one (the selector in its canonical form, so equivalent spellings agree).

``--narrow-watches`` (on by default) lets parent watches carry the controllers' label
selectors (``manager.controllers.hosted``); ``--narrow-watches=false`` watches every object
of every resource, as Metacontroller does.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from manager.election.config import ElectionConfig
from proto.api.selectors import Operator, Requirement, Selector, parse
from proto.runtime.addresses import Peer
from proto.runtime.curve import CurveKeyError, ServerCurve, server_keys
from proto.runtime.flags import (
    Common,
    Parser,
    Role,
    add_common,
    add_go_bool,
    common,
    duration,
    typed,
)


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    bind: str = "tcp://0.0.0.0:7070"
    common: Common = field(default_factory=Common)  # the shared flags (kubeconfig, logs, ...)
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
    curve_keys: str | None = None  # directory of the worker link's CURVE keys
    curve: ServerCurve | None = None  # the keys read from it at start
    target_label_selector: str = ""
    narrow_watches: bool = True  # parent watches carry the controllers' label selectors
    # The local processes whose metrics the coordinator also serves (``metashard run``).
    metrics_peers: tuple[Peer, ...] = ()
    # How many workers this process starts on a private endpoint (``metashard run``).
    own_workers: int = 0

    @property
    def selector(self) -> Selector:
        """The controllers to run (``--target-label-selector``); validated at parse time."""
        return parse(self.target_label_selector)

    def election(self, identity: str) -> ElectionConfig:
        """The leader election of candidate ``identity``, with these timings."""
        return ElectionConfig(
            identity=identity,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )


DEFAULT_LEASE = "metashard"
_SAME = {Operator.DOUBLE_EQUALS: Operator.EQUALS}


def default_lease_name(target_label_selector: str) -> str:
    """The Lease of an installation that does not name one (see the module docstring)."""
    canonical = ",".join(
        str(Requirement(r.key, _SAME.get(r.operator, r.operator), r.values))
        for r in parse(target_label_selector).requirements
    )
    if not canonical:
        return DEFAULT_LEASE
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:10]
    return f"{DEFAULT_LEASE}-{digest}"


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
    p.add_argument(
        "--curve-keys",
        metavar="DIR",
        help="authenticate workers with CURVE, keys from DIR (see the README); required to "
        "bind a tcp:// address, loopback included, unless --insecure-worker-link",
    )
    p.add_argument(
        "--insecure-worker-link",
        action="store_true",
        help="allow a tcp:// worker socket without --curve-keys: whoever reaches it can join",
    )
    add_go_bool(
        p,
        "--narrow-watches",
        default=True,
        metavar="BOOL",
        help="list and watch a parent resource with its controllers' label selectors, when "
        "all of them have one and none has a finalize hook, so the coordinator never caches "
        "objects no controller selects (default true)",
    )
    p.add_argument(
        "--heartbeat-interval",
        type=typed(duration),
        default=1.0,
        help="how often the coordinator and workers exchange heartbeats (Go duration)",
    )
    p.add_argument(
        "--worker-timeout",
        type=typed(duration),
        default=5.0,
        help="a worker silent this long loses its slots",
    )


def _loopback(endpoint: str) -> bool:
    """A loopback tcp:// endpoint: reachable from this host only, by every account on it."""
    host = endpoint.partition("://")[2].rpartition(":")[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def link_security(args: argparse.Namespace) -> ServerCurve | None:
    """The CURVE keys of ``--curve-keys``; ``ValueError`` when they are unusable, or when a
    tcp:// socket would be open without ``--insecure-worker-link``.

    Without keys only an ``ipc://`` socket is accepted: it is created 0600
    (``manager.link.router``), so only processes of this uid (and root) can connect. A
    loopback port is no boundary: every account on the host, and every pod in the host's
    network namespace, reaches it."""
    if args.curve_keys:
        try:
            return server_keys(args.curve_keys)
        except CurveKeyError as e:
            raise ValueError(f"--curve-keys: {e}") from None
    if args.bind.startswith("ipc://") or args.insecure_worker_link:
        return None
    if _loopback(args.bind):
        raise ValueError(
            f"--bind {args.bind} without --curve-keys would let every account on this host "
            "join the worker link: give --curve-keys DIR (metashard curve-keys DIR writes a "
            "set), bind ipc://PATH, or pass --insecure-worker-link"
        )
    raise ValueError(
        f"--bind {args.bind} is reachable from other hosts: give --curve-keys DIR so "
        "that only workers holding the key can join (or --insecure-worker-link)"
    )


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _election_timings(args: argparse.Namespace) -> tuple[float, float, float]:
    """Lease duration, renew deadline and retry period (Metacontroller's defaults)."""
    return (
        _or(args.lease_duration, 15.0),
        _or(args.renew_deadline, 10.0),
        _or(args.retry_period, 2.0),
    )


def check_timings(args: argparse.Namespace) -> None:
    """``ValueError`` for timings that cannot work together (checked before anything starts,
    by every command that runs a coordinator)."""
    if args.worker_timeout < 3 * args.heartbeat_interval:
        raise ValueError("--worker-timeout must be at least 3 x --heartbeat-interval")
    if args.leader_election:
        lease, renew, retry = _election_timings(args)
        ElectionConfig(
            identity="check", lease_duration=lease, renew_deadline=renew, retry_period=retry
        )


def from_namespace(
    args: argparse.Namespace,
    *,
    role: Role = "coordinator",
    peers: Sequence[Peer] = (),
    own_workers: int = 0,
) -> CoordinatorSettings:
    """The settings of parsed flags; ``ValueError`` when they cannot work (say why)."""
    check_timings(args)
    lease, renew, retry = _election_timings(args)
    return CoordinatorSettings(
        bind=args.bind,
        common=common(args, role=role),
        leader_election=args.leader_election,
        leader_election_namespace=args.leader_election_namespace,
        leader_election_id=args.leader_election_id
        or default_lease_name(args.target_label_selector),
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
        discovery_interval=_or(args.discovery_interval, 30.0),
        cache_flush_interval=_or(args.cache_flush_interval, 1800.0),
        heartbeat_interval=args.heartbeat_interval,
        worker_timeout=args.worker_timeout,
        curve_keys=args.curve_keys,
        curve=link_security(args),
        target_label_selector=args.target_label_selector,
        narrow_watches=args.narrow_watches,
        metrics_peers=tuple(peers),
        own_workers=own_workers,
    )


def build_parser() -> Parser:
    """The parser of ``metashard coordinator``."""
    parser = Parser(prog="metashard coordinator")
    add_arguments(parser)
    return parser


def from_args(argv: Sequence[str]) -> CoordinatorSettings:
    """``metashard coordinator``'s settings; exits 2 with one line on bad input."""
    parser = build_parser()
    args = parser.parse_args(list(argv))
    try:
        return from_namespace(args)
    except ValueError as e:
        parser.error(str(e))
