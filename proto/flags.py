"""Command-line flags every metashard process takes (Metacontroller's names where they exist).

``add_common(parser)`` adds ``--kubeconfig``, ``--client-go-qps``, ``--client-go-burst``,
``--metrics-address``, ``--log-format`` and ``--log-level``; ``burst(args)`` is the burst to
use (twice the QPS when a QPS is given without a burst, as client-go users expect).
"""

from __future__ import annotations

import argparse


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)"
    )
    p.add_argument(
        "--client-go-qps",
        dest="qps",
        type=float,
        default=0.0,
        help="API requests per second of this process; 0 = no client-side limit (default)",
    )
    p.add_argument("--client-go-burst", dest="burst", type=int, default=0, help="API burst")
    p.add_argument(
        "--metrics-address",
        default=":9999",
        help="serve /metrics, /healthz and /readyz here (default :9999); 0 disables",
    )
    p.add_argument(
        "--log-format",
        choices=("auto", "json", "console"),
        default="auto",
        help="json: one object per line; console: readable; auto: console on a terminal",
    )
    p.add_argument("--log-level", default="info", help="debug, info, warning or error")


def burst(args: argparse.Namespace) -> int:
    if args.qps < 0 or args.burst < 0:
        raise SystemExit("--client-go-qps and --client-go-burst must not be negative")
    return int(args.burst or (args.qps * 2 if args.qps else 0))
