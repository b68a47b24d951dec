"""The ``metashard`` command: one entry point, one subcommand per process role.

- ``metashard coordinator [flags]``: the coordinator (``manager.settings`` lists the flags).
- ``metashard worker --coordinator ENDPOINT [flags]``: one worker (``workers.settings``).
- ``metashard run --processes N [coordinator flags] [--workers/--concurrency C]``: the
  coordinator in this process and N workers as child processes (``manager.cli.supervisor``), over
  an ipc socket unless ``--bind`` says otherwise; one metrics endpoint for all. The link's
  socket, the workers' metrics sockets and, for a ``tcp://`` bind without ``--curve-keys``,
  ephemeral CURVE keys live in one private (0700) directory, removed at exit; at start, the
  directories of runs that were killed (SIGKILL) are removed (``manager.cli.rundir``).
  Workers stop when the run dies, however it dies (``manager.cli.supervisor``).
- ``metashard curve-keys DIR``: write a new set of CURVE keys for the worker link.
- ``metashard cluster [flags]``: the embedded cluster, a Kubernetes API-server emulator, with
  the Metacontroller CRDs installed (``--no-metacontroller-crds`` to leave them out).
- ``metashard rbac [PATH...] [flags]``: the least-privilege RBAC rules for a set of controllers
  (``manager.cli.rbac``).
- ``metashard rollout status|history|undo RESOURCE/NAME``: a parent's rollouts
  (``manager.cli.rollout``).
- ``metashard sync RESOURCE/NAME`` or ``metashard sync --controller NAME``: reconcile a parent,
  or every parent of a controller, now (``manager.cli.sync``).
- Every process role takes all of Metacontroller's flags (``proto.runtime.flags``). Configuration is
  checked before anything starts (``manager.settings``, ``manager.preflight``); a failure is
  one line and exit code 2 (``proto.runtime.startup``), with its traceback only at ``--log-level
  debug``. A coordinator whose term fails (``manager.coordinator``) exits 1.
- Every command reports a failure the same way (``proto.runtime.startup``): one line
  ``metashard <command>: error: <message>``, exit code 2 for the command line, the files and
  the kubeconfig it names, 1 for a failure once it ran.
- ``metashard dev [PATH...]``: the embedded cluster (or ``--kubeconfig``), the manifests
  applied, ``metashard run``, and one line per reconcile that wrote something
  (``loadtest.dev``).

Roles in other packages (the worker, the embedded cluster) run as their own processes
(``python -m <package>``), so the coordinator never imports the worker code or the load-test
tree. This module imports only what parsing and checking the configuration need; the
coordinator, the API client and the other subcommands are imported by the handler that runs
them. So ``metashard run`` starts its workers early: their start-up (interpreter, imports,
kubeconfig) runs beside the coordinator's instead of after it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import NoReturn, TypeVar

import uvloop

from manager import preflight
from manager.cli import rundir
from manager.cli.supervisor import Supervisor, WorkerSpec, worker_id, worker_spec
from manager.settings import CoordinatorSettings, add_arguments, from_args, from_namespace
from proto.runtime import curve, gctune, logs
from proto.runtime.addresses import Peer, UnixAddress, check_bindable, parse_address
from proto.runtime.flags import DEFAULT_CONCURRENCY, Parser, log_notices, positive_int, typed
from proto.runtime.startup import exit_cleanly_on_sigterm, guard

Handler = Callable[[list[str]], int]
_T = TypeVar("_T")


def _exec_module(module: str, argv: list[str]) -> NoReturn:
    """Replace this process with ``python -m module argv...``."""
    os.execv(sys.executable, [sys.executable, "-m", module, *argv])


async def _until_signalled(main: Callable[[asyncio.Event], Awaitable[_T]]) -> _T:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return await main(stop)


def _coordinator(argv: list[str]) -> int:
    exit_cleanly_on_sigterm()
    settings = from_args(argv)
    logs.configure(fmt=settings.common.log_format, level=settings.common.log_level)  # type: ignore[arg-type]
    log_notices(settings.common.notices)

    def start() -> int:
        preflight.check_coordinator(settings)
        from manager.coordinator import Coordinator

        coordinator = Coordinator(settings)
        gctune.settle()
        uvloop.run(_until_signalled(coordinator.run))
        exit_cleanly_on_sigterm()  # the loop's handler is gone: a late SIGTERM finds nothing to do
        return 1 if coordinator.failed else 0

    return guard("metashard coordinator", start, debug=settings.common.log_level == "debug")


def run_parser() -> Parser:
    """The parser of ``metashard run``: the coordinator's flags and the local workers'."""
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
    parser.add_argument(
        "--hook-max-response-bytes",
        type=typed(positive_int),
        help="largest hook answer the workers accept (see metashard worker)",
    )
    parser.set_defaults(bind=None)
    return parser


def _run(argv: list[str]) -> int:
    parser = run_parser()
    args = parser.parse_args(argv)
    # One private directory (mode 0700: only this user reaches it), removed on every exit:
    # the worker link's ipc socket, the workers' metrics sockets, ephemeral CURVE keys.
    private = rundir.RunDirectory.create()
    try:
        # Only this process's workers can reach a private ipc socket or hold ephemeral keys.
        private_link = args.bind is None or not args.curve_keys
        if args.bind is None:
            args.bind = f"ipc://{private.path / rundir.LINK}"
        elif not args.curve_keys and args.bind.startswith("tcp://"):
            args.curve_keys = str(curve.generate(private.path / rundir.CURVE))
        elif not args.curve_keys:
            private_link = False  # an ipc endpoint the user chose: maybe shared
        peers = [Peer(worker_id(i), private.metrics_socket(i)) for i in range(args.processes)]
        metrics = parse_address(args.metrics_address) is not None
        try:
            settings = from_namespace(
                args,
                role="run",
                peers=peers if metrics else (),
                own_workers=args.processes if private_link else 0,
            )
        except ValueError as e:
            parser.error(str(e))
        logs.configure(fmt=settings.common.log_format, level=settings.common.log_level)  # type: ignore[arg-type]
        log_notices(settings.common.notices)
        rundir.remove_stale()
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
            return uvloop.run(_until_signalled(lambda stop: _run_all(settings, specs, stop)))

        return guard("metashard run", start, debug=settings.common.log_level == "debug")
    finally:
        private.remove()


def _local(bind: str) -> str:
    """Where a local worker connects to reach the endpoint the coordinator binds."""
    return bind.replace("://0.0.0.0:", "://127.0.0.1:").replace("://*:", "://127.0.0.1:")


def _worker_flags(settings: CoordinatorSettings, args: argparse.Namespace) -> list[str]:
    shared = settings.common
    flags = ["--concurrency", str(args.concurrency or DEFAULT_CONCURRENCY)]
    flags += ["--log-format", shared.log_format, "--log-level", shared.log_level]
    flags += ["--client-go-qps", str(shared.qps), "--client-go-burst", str(shared.burst)]
    flags += ["--cluster-revision-namespace", shared.cluster_revision_namespace]
    if shared.kubeconfig:
        flags += ["--kubeconfig", shared.kubeconfig]
    if args.reconciler:
        flags += ["--reconciler", args.reconciler]
    if settings.curve_keys:
        flags += ["--curve-keys", settings.curve_keys]
    if args.hook_max_response_bytes is not None:
        flags += ["--hook-max-response-bytes", str(args.hook_max_response_bytes)]
    if args.revision_history_limit is not None:
        flags += ["--revision-history-limit", str(args.revision_history_limit)]
    flags += ["--apply-strategy", args.apply_strategy]
    if args.apply_strategy_ssa_field_manager is not None:
        flags += ["--apply-strategy-ssa-field-manager", args.apply_strategy_ssa_field_manager]
    return flags


async def _run_all(
    settings: CoordinatorSettings, specs: list[WorkerSpec], stop: asyncio.Event
) -> int:
    """The supervised workers, then the coordinator, until ``stop``, or until either fails or
    the coordinator's term fails: then the other is stopped too and the failure raised. The
    exit code: 1 if the coordinator gave up, else 0.

    The workers are started first, and the coordinator is imported and built only then."""
    workers = Supervisor(specs)
    supervisor = asyncio.create_task(workers.run(), name="supervisor")
    started = asyncio.create_task(workers.started.wait())
    await asyncio.wait({supervisor, started}, return_when=asyncio.FIRST_COMPLETED)
    started.cancel()
    if supervisor.done():
        supervisor.result()
        return 0
    try:
        from manager.coordinator import Coordinator

        coordinator = Coordinator(settings)
    except BaseException:
        supervisor.cancel()
        await asyncio.gather(supervisor, return_exceptions=True)
        raise
    gctune.settle()
    main = asyncio.create_task(coordinator.run(stop), name="coordinator")
    await asyncio.wait({main, supervisor}, return_when=asyncio.FIRST_COMPLETED)
    if supervisor.done():
        stop.set()
        await asyncio.gather(main, return_exceptions=True)
        supervisor.result()
    supervisor.cancel()
    await asyncio.gather(supervisor, return_exceptions=True)
    main.result()
    return 1 if coordinator.failed else 0


def curve_keys_parser() -> Parser:
    """The parser of ``metashard curve-keys``."""
    parser = Parser(
        prog="metashard curve-keys",
        description="Write new CURVE keys for the worker link: server.secret, server.public, "
        "worker.secret and worker.public (mode 0600). Give the coordinator server.secret and "
        "worker.public, the workers worker.secret and server.public.",
    )
    parser.add_argument("directory", help="where to write them (created if missing)")
    return parser


def _curve_keys(argv: list[str]) -> int:
    parser = curve_keys_parser()
    args = parser.parse_args(argv)
    target = Path(args.directory)
    if any((target / name).exists() for name in ("server.secret", "worker.secret")):
        parser.error(f"{target} already holds keys: not overwriting them")
    print(curve.generate(target))
    return 0


def _rbac(argv: list[str]) -> int:
    from manager.cli import rbac as rbac_command

    return rbac_command.main(argv)


def _rollout(argv: list[str]) -> int:
    from manager.cli import rollout

    return rollout.main(argv)


def _sync(argv: list[str]) -> int:
    from manager.cli import sync

    return sync.main(argv)


PROCESS_ROLES: dict[str, str] = {
    "worker": "workers",
    "cluster": "loadtest.apiserver",
    "dev": "loadtest.dev",
}
"""Subcommands that run another package as its own process (``python -m MODULE``), so the
coordinator never imports it. Import-linter contracts (pyproject.toml) keep each of these
packages and the coordinator apart; a test checks that every module named here is covered."""


SUBCOMMANDS: dict[str, tuple[str, Handler]] = {
    "coordinator": ("run the coordinator", _coordinator),
    "worker": (
        "run one worker process",
        lambda argv: _exec_module(PROCESS_ROLES["worker"], argv),
    ),
    "run": ("run the coordinator and N worker processes on this machine", _run),
    "curve-keys": ("write new CURVE keys for the worker link", _curve_keys),
    "cluster": (
        "run the embedded cluster (a Kubernetes API-server emulator) with the Metacontroller CRDs",
        lambda argv: _exec_module(PROCESS_ROLES["cluster"], ["--metacontroller-crds", *argv]),
    ),
    "rbac": ("print the least-privilege RBAC rules the controllers need", _rbac),
    "dev": (
        "try controllers: a cluster, your manifests, metashard, one line per reconcile",
        lambda argv: _exec_module(PROCESS_ROLES["dev"], argv),
    ),
    "rollout": ("show and undo the rollouts of a parent (status|history|undo)", _rollout),
    "sync": ("reconcile a parent, or every parent of a controller, now", _sync),
}


def build_parser() -> Parser:
    parser = Parser(
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
