"""The ``metashard`` command: one entry point, one subcommand per process role.

- ``metashard coordinator [flags]``: the coordinator (``manager.settings`` lists the flags).
- ``metashard worker --coordinator ENDPOINT [flags]``: one worker (``workers.settings``).
- ``metashard run --processes N [coordinator flags] [--workers/--concurrency C]``: the
  coordinator in this process and N workers as child processes, over a local ipc socket
  unless ``--bind`` says otherwise (``manager.supervisor``); one metrics endpoint for all.
- Every command takes all of Metacontroller's flags (``proto.flags``). Configuration is
  checked before anything starts (``manager.preflight``); a failure is one line and exit
  code 2 (``proto.startup``), with its traceback only at ``--log-level debug``.
- ``metashard cluster [flags]``: the embedded cluster, a Kubernetes API-server emulator.

Roles in other packages (the worker, the embedded cluster) run as their own processes
(``python -m <package>``), so the coordinator never imports the worker code or the load-test
tree.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from typing import NoReturn

import uvloop

from manager import preflight
from manager.app import Coordinator
from manager.settings import (
    CoordinatorSettings,
    add_arguments,
    from_args,
    from_namespace,
    validate,
)
from manager.supervisor import Supervisor, WorkerSpec, worker_id, worker_spec
from proto import logs
from proto.flags import DEFAULT_CONCURRENCY, Parser, log_notices, positive_int, typed
from proto.ops import Peer, UnixAddress, check_bindable, parse_address
from proto.startup import guard

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
    log_notices(settings.notices)

    def start() -> int:
        preflight.check_coordinator(settings)
        uvloop.run(_until_signalled(Coordinator(settings).run))
        return 0

    return guard("metashard coordinator", start, debug=settings.log_level == "debug")


def _run(argv: list[str]) -> int:
    parser = Parser(
        prog="metashard run", description="The coordinator plus N local worker processes."
    )
    add_arguments(parser)
    parser.add_argument(
        "--processes", type=typed(positive_int), default=2, help="worker processes (default 2)"
    )
    parser.add_argument(
        "--reconciler", help="MODULE:CALLABLE for the workers (see metashard worker)"
    )
    parser.set_defaults(bind=None)
    args = parser.parse_args(argv)
    validate(parser, args)
    # The worker link's ipc socket and the workers' metrics sockets live in a private
    # directory (mode 0700), removed on every exit.
    sockets = tempfile.mkdtemp(prefix=f"metashard-{os.getpid()}-")
    try:
        if args.bind is None:
            args.bind = f"ipc://{sockets}/link.sock"
        peers = [
            Peer(worker_id(i), os.path.join(sockets, f"w{i}.sock")) for i in range(args.processes)
        ]
        metrics = parse_address(args.metrics_address) is not None
        settings = from_namespace(args, role="run", peers=peers if metrics else ())
        logs.configure(fmt=settings.log_format, level=settings.log_level)  # type: ignore[arg-type]
        log_notices(settings.notices)
        specs = [
            worker_spec(
                index=i,
                endpoint=_local(settings.bind),
                metrics_socket=peer.socket if metrics else None,
                extra=_worker_flags(settings, args),
            )
            for i, peer in enumerate(peers)
        ]

        def start() -> int:
            preflight.check_coordinator(settings)
            for peer in settings.metrics_peers:
                check_bindable(UnixAddress(peer.socket), what="a worker's metrics socket")
            if args.reconciler:
                preflight.check_reconciler(args.reconciler)
            uvloop.run(_until_signalled(lambda stop: _run_all(settings, specs, stop)))
            return 0

        return guard("metashard run", start, debug=settings.log_level == "debug")
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


def _local(bind: str) -> str:
    """Where a local worker connects to reach the endpoint the coordinator binds."""
    return bind.replace("://0.0.0.0:", "://127.0.0.1:").replace("://*:", "://127.0.0.1:")


def _worker_flags(settings: CoordinatorSettings, args: argparse.Namespace) -> list[str]:
    flags = ["--concurrency", str(args.concurrency or DEFAULT_CONCURRENCY)]
    flags += ["--log-format", settings.log_format, "--log-level", settings.log_level]
    flags += ["--client-go-qps", str(settings.qps), "--client-go-burst", str(settings.burst)]
    if settings.kubeconfig:
        flags += ["--kubeconfig", settings.kubeconfig]
    if args.reconciler:
        flags += ["--reconciler", args.reconciler]
    return flags


async def _run_all(
    settings: CoordinatorSettings, specs: list[WorkerSpec], stop: asyncio.Event
) -> None:
    """The coordinator and the supervised workers until ``stop``, or until either fails:
    then the other is stopped too and the failure raised."""
    coordinator = asyncio.create_task(Coordinator(settings).run(stop), name="coordinator")
    supervisor = asyncio.create_task(Supervisor(specs).run(), name="supervisor")
    await asyncio.wait({coordinator, supervisor}, return_when=asyncio.FIRST_COMPLETED)
    if supervisor.done():
        stop.set()
        await asyncio.gather(coordinator, return_exceptions=True)
        supervisor.result()
    supervisor.cancel()
    await asyncio.gather(supervisor, return_exceptions=True)
    coordinator.result()


SUBCOMMANDS: dict[str, tuple[str, Handler]] = {
    "coordinator": ("run the coordinator", _coordinator),
    "worker": ("run one worker process", lambda argv: _exec_module("workers", argv)),
    "run": ("run the coordinator and N worker processes on this machine", _run),
    "cluster": (
        "run the embedded cluster (a Kubernetes API-server emulator)",
        lambda argv: _exec_module("loadtest.apiserver", argv),
    ),
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
