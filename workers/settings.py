"""The worker process's settings: parsed once from flags and environment, then passed down.

A worker takes every flag of ``proto.runtime.flags`` (so one argument list serves both roles); those
that only the coordinator acts on are reported in ``notices``, which the entry point logs.

``--unsafe-fence-timeout SECONDS`` is hidden from the help: it replaces the fence timeout a
worker derives from the coordinator's timings (``workers.link.standing``), so that a test can
run a worker with a deliberately broken fence (longer than the coordinator's worker timeout)
and show that the chaos test catches it. Never use it otherwise: it gives up exclusivity.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from proto.hooks.client import DEFAULT_MAX_RESPONSE_BYTES
from proto.runtime.curve import ClientCurve, CurveKeyError, client_keys
from proto.runtime.flags import (
    Common,
    Parser,
    add_common,
    common,
    duration,
    positive_int,
    typed,
)

# What ZeroMQ can connect to: tcp://HOST:PORT or ipc://PATH.
_ENDPOINT = re.compile(r"^(tcp://(\[[^\]]+\]|[^:/\s]+):\d{1,5}|ipc://\S+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """The shared flags' ``Common`` and the worker's own."""

    common: Common
    worker_id: str
    coordinator: str  # the coordinator's ZeroMQ endpoint, tcp://host:port or ipc://path
    reconciler: str | None = None  # MODULE:CALLABLE replacing the built-in reconcilers
    hook_max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES  # a longer hook answer fails
    curve: ClientCurve | None = None  # the worker link's CURVE keys (--curve-keys)
    unsafe_fence_timeout: float | None = None  # tests only (module docstring)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="metashard worker", description="Run one metashard worker process.")
    p.add_argument(
        "--coordinator",
        help="coordinator endpoint, e.g. tcp://metashard-coordinator:7070 "
        "(env METASHARD_COORDINATOR)",
    )
    p.add_argument(
        "--id", dest="worker_id", help="stable worker id (default: $POD_NAME, else the host name)"
    )
    add_common(p)
    p.add_argument(
        "--curve-keys",
        metavar="DIR",
        help="authenticate to the coordinator with CURVE, keys from DIR (see the README)",
    )
    p.add_argument(
        "--hook-max-response-bytes",
        type=typed(positive_int),
        default=DEFAULT_MAX_RESPONSE_BYTES,
        help="largest hook answer accepted, in bytes; a longer one fails the sync "
        f"(default {DEFAULT_MAX_RESPONSE_BYTES}, 3 MiB: Kubernetes' request size limit)",
    )
    p.add_argument(
        "--reconciler",
        help="MODULE:CALLABLE returning a reconciler factory (replaces the built-in reconcilers)",
    )
    p.add_argument("--unsafe-fence-timeout", type=typed(duration), help=argparse.SUPPRESS)
    return p


def from_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> WorkerSettings:
    """Parse flags (and the environment fallbacks); exits 2 with one line on bad input."""
    env = os.environ if environ is None else environ
    parser = build_parser()
    args = parser.parse_args(list(argv))
    coordinator = args.coordinator or env.get("METASHARD_COORDINATOR")
    if not coordinator:
        parser.error("--coordinator (or METASHARD_COORDINATOR) is required")
    if not _ENDPOINT.match(coordinator):
        parser.error(f"--coordinator {coordinator!r}: expected tcp://HOST:PORT or ipc://PATH")
    curve = None
    if args.curve_keys:
        try:
            curve = client_keys(args.curve_keys)
        except CurveKeyError as e:
            parser.error(f"--curve-keys: {e}")
    return WorkerSettings(
        common=common(args, role="worker", environ=env),
        worker_id=args.worker_id or env.get("POD_NAME") or socket.gethostname(),
        coordinator=coordinator,
        reconciler=args.reconciler,
        hook_max_response_bytes=args.hook_max_response_bytes,
        curve=curve,
        unsafe_fence_timeout=args.unsafe_fence_timeout,
    )
