"""The ``metashard`` command: one entry point, one subcommand per process role.

- ``metashard coordinator [flags]``: the coordinator (``manager.settings`` lists the flags).
- ``metashard worker --coordinator ENDPOINT [flags]``: one worker (``workers.settings``).
- ``metashard run --workers N [coordinator flags] [--concurrency C]``: the coordinator in
  this process and N workers as child processes, over a local ipc socket unless ``--bind``
  says otherwise (``manager.supervisor``).
- ``metashard cluster [flags]``: the embedded cluster, a Kubernetes API-server emulator.
- ``metashard rollout status|history|undo RESOURCE/NAME``: a parent's rollouts
  (``manager.rollout``).

Roles in other packages (the worker, the embedded cluster) run as their own processes
(``python -m <package>``), so the coordinator never imports the worker code or the load-test
tree.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from typing import NoReturn

import uvloop

from manager import rollout
from manager.app import Coordinator
from manager.settings import CoordinatorSettings, add_arguments, from_args, from_namespace
from manager.supervisor import Supervisor, worker_spec
from proto import logs
from proto.ops import parse_address

Handler = Callable[[list[str]], int]


def _exec_module(module: str, argv: list[str]) -> NoReturn:
    """Replace this process with ``python -m module argv...``."""
    os.execv(sys.executable, [sys.executable, "-m", module, *argv])


async def _until_signalled(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await main(stop)


def _coordinator(argv: list[str]) -> int:
    settings = from_args(argv)
    logs.configure(fmt=settings.log_format, level=settings.log_level)  # type: ignore[arg-type]
    uvloop.run(_until_signalled(Coordinator(settings).run))
    return 0


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="metashard run", description="The coordinator plus N local worker processes."
    )
    add_arguments(parser)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--concurrency", type=int, default=16, help="reconciles per worker")
    parser.add_argument(
        "--reconciler", help="MODULE:CALLABLE for the workers (see metashard worker)"
    )
    parser.set_defaults(bind=None)
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.bind is None:
        args.bind = f"ipc://{tempfile.gettempdir()}/metashard-{os.getpid()}.sock"
    settings = from_namespace(args)
    logs.configure(fmt=settings.log_format, level=settings.log_level)  # type: ignore[arg-type]
    uvloop.run(_until_signalled(lambda stop: _run_all(settings, args, stop)))
    return 0


def _worker_flags(settings: CoordinatorSettings, args: argparse.Namespace) -> list[str]:
    flags = ["--concurrency", str(args.concurrency), "--log-format", settings.log_format]
    flags += ["--log-level", settings.log_level, "--client-go-qps", str(settings.qps)]
    flags += ["--client-go-burst", str(settings.burst)]
    if settings.kubeconfig:
        flags += ["--kubeconfig", settings.kubeconfig]
    if args.reconciler:
        flags += ["--reconciler", args.reconciler]
    return flags


async def _run_all(
    settings: CoordinatorSettings, args: argparse.Namespace, stop: asyncio.Event
) -> None:
    coordinator = Coordinator(settings)
    bind = parse_address(settings.metrics_address)
    endpoint = settings.bind.replace("0.0.0.0", "127.0.0.1")
    specs = [
        worker_spec(
            index=i,
            endpoint=endpoint,
            metrics_port=None if bind is None or bind[1] == 0 else bind[1] + 1 + i,
            extra=_worker_flags(settings, args),
        )
        for i in range(args.workers)
    ]
    supervisor = asyncio.create_task(Supervisor(specs).run(), name="supervisor")
    try:
        await coordinator.run(stop)
    finally:
        supervisor.cancel()
        await asyncio.gather(supervisor, return_exceptions=True)


SUBCOMMANDS: dict[str, tuple[str, Handler]] = {
    "coordinator": ("run the coordinator", _coordinator),
    "worker": ("run one worker process", lambda argv: _exec_module("workers", argv)),
    "run": ("run the coordinator and N worker processes on this machine", _run),
    "cluster": (
        "run the embedded cluster (a Kubernetes API-server emulator)",
        lambda argv: _exec_module("loadtest.apiserver", argv),
    ),
    "rollout": ("show and undo the rollouts of a parent (status|history|undo)", rollout.main),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="metashard",
        description="A sharded controller-manager for Metacontroller-style lambda controllers.",
    )
    try:
        version = metadata.version("metashard")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        version = "unknown"
    parser.add_argument("--version", action="version", version=f"metashard {version}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, _) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    _, handler = SUBCOMMANDS[args.command]
    return handler(rest)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
