"""The coordinator's settings: parsed once from flags (Metacontroller's names where they
exist) and environment, then passed down.

``--target-label-selector`` (Metacontroller's flag and syntax) restricts the controllers this
installation runs to those whose labels match. Two installations with disjoint selectors must
not share a Lease either: unless ``--leader-election-id`` is given, the Lease is named
``metashard`` without a selector and ``metashard-<10 hex digits of the selector's SHA-256>``
with one (the selector in its canonical form, so equivalent spellings agree).
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from proto.api.duration import parse_seconds
from proto.api.errors import DurationError
from proto.api.selectors import Operator, Requirement, Selector, SelectorError, parse
from proto.flags import add_common, burst


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    bind: str = "tcp://0.0.0.0:7070"
    kubeconfig: str | None = None
    qps: float = 0.0
    burst: int = 0
    metrics_address: str = ":9999"
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
    target_label_selector: str = ""

    @property
    def selector(self) -> Selector:
        """The controllers to run (``--target-label-selector``); validated at parse time."""
        return parse(self.target_label_selector)


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


def _selector(text: str) -> str:
    try:
        parse(text)
    except SelectorError as e:
        raise argparse.ArgumentTypeError(f"invalid label selector {text!r}: {e}") from None
    return text


def _duration(text: str) -> float:
    try:
        return parse_seconds(text)
    except DurationError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The coordinator's flags (shared by ``metashard coordinator`` and ``metashard run``)."""
    p.add_argument(
        "--bind", default="tcp://0.0.0.0:7070", help="ZeroMQ endpoint workers connect to"
    )
    add_common(p)
    p.add_argument(
        "--leader-election",
        type=_bool,
        nargs="?",
        const=True,
        default=False,
        help="hold a Lease; only the holder runs (several replicas may run)",
    )
    p.add_argument(
        "--leader-election-namespace",
        help="namespace of the Lease (default: this pod's, or the kubeconfig context's)",
    )
    p.add_argument(
        "--leader-election-id",
        help="name of the Lease (default: metashard, or metashard-<hash> with a "
        "--target-label-selector)",
    )
    p.add_argument(
        "--target-label-selector",
        type=_selector,
        default="",
        help="run only the CompositeControllers and DecoratorControllers whose labels match "
        "(label selector syntax, as kubectl -l)",
    )
    p.add_argument(
        "--leader-election-lease-duration",
        dest="lease_duration",
        type=_duration,
        default=15.0,
        help="how long a Lease not renewed stays taken (Go duration)",
    )
    p.add_argument(
        "--leader-election-renew-deadline",
        dest="renew_deadline",
        type=_duration,
        default=10.0,
        help="the leader gives up leading when it could not renew for this long (Go duration)",
    )
    p.add_argument(
        "--leader-election-retry-period",
        dest="retry_period",
        type=_duration,
        default=2.0,
        help="how often the Lease is renewed or tried (Go duration)",
    )
    p.add_argument(
        "--discovery-interval",
        type=_duration,
        default=30.0,
        help="how often unresolved controllers are retried (Go duration)",
    )
    p.add_argument(
        "--cache-flush-interval",
        type=_duration,
        default=1800.0,
        help="every parent is reconciled again this often, at low priority (Go duration)",
    )
    p.add_argument(
        "--heartbeat-interval",
        type=_duration,
        default=1.0,
        help="how often the coordinator and workers exchange heartbeats (Go duration)",
    )
    p.add_argument(
        "--worker-timeout",
        type=_duration,
        default=5.0,
        help="a worker silent this long loses its slots",
    )


def from_namespace(args: argparse.Namespace) -> CoordinatorSettings:
    return CoordinatorSettings(
        bind=args.bind,
        kubeconfig=args.kubeconfig,
        qps=args.qps,
        burst=burst(args),
        metrics_address=args.metrics_address,
        leader_election=args.leader_election,
        leader_election_namespace=args.leader_election_namespace,
        leader_election_id=args.leader_election_id
        or default_lease_name(args.target_label_selector),
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        discovery_interval=args.discovery_interval,
        cache_flush_interval=args.cache_flush_interval,
        heartbeat_interval=args.heartbeat_interval,
        worker_timeout=args.worker_timeout,
        log_format=args.log_format,
        log_level=args.log_level,
        target_label_selector=args.target_label_selector,
    )


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``metashard coordinator``."""
    parser = argparse.ArgumentParser(prog="metashard coordinator")
    add_arguments(parser)
    return parser


def from_args(argv: Sequence[str]) -> CoordinatorSettings:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.worker_timeout < 3 * args.heartbeat_interval:
        parser.error("--worker-timeout must be at least 3 x --heartbeat-interval")
    return from_namespace(args)
