"""``metashard dev PATH...``: try a lambda controller with one command.

What it does, in order (Ctrl-C stops everything it started, and only that):

1. starts the embedded cluster with the ``metacontroller.k8s.io`` CRDs, as ``metashard
   cluster`` does (``--kubeconfig FILE`` uses that cluster instead, and installs the CRDs
   there where they are missing);
2. prints ``export KUBECONFIG=...`` for ``kubectl`` in another shell;
3. applies the YAML or JSON files and directories given (``loadtest.dev.manifests``: every
   kind checked first, CRDs applied and established, missing namespaces created, then
   Namespaces, then the rest; namespaced objects without a namespace go to ``--namespace``,
   default ``default``), printing one line per object;
4. runs ``metashard run --processes N`` (the coordinator here plus N worker processes, over
   a private ipc socket) against that cluster, with JSON logs into a file that is kept (its
   path is printed), metrics and probes on one free local port;
5. prints one readable line per reconcile that wrote something (time, controller, parent,
   result, each write, hook time), and the lines that say something went wrong
   (warnings and errors: a failed reconcile, a controller that cannot run, a field not
   acted on), until Ctrl-C or until ``metashard run`` exits.

On a cluster given with ``--kubeconfig`` (maybe shared, maybe where Metacontroller or a
production metashard runs), it acts only on the controllers it applied: each
CompositeController and DecoratorController of the manifests gets the label
``metashard.io/dev=<id of this run>`` (``labelled``), and ``metashard run`` gets
``--target-label-selector`` for it, so the cluster's other controllers are left alone (no
event, no finalizer, no hook call). It says so in one line. ``metashard run`` runs without
leader election, so it takes no Lease. On the embedded cluster it starts, every controller
is its own and runs.

Hooks are called by metashard, not by the API server, so a hook on 127.0.0.1 works with
either cluster. ``render`` (one log record to one line, or none) and ``labelled`` are pure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import orjson

from loadtest.apiserver.background import ClusterProcess
from loadtest.dev import crds, manifests
from loadtest.dev.processes import REPO, free_port
from proto.api.crds import load_crds
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.session import Session
from proto.runtime.flags import Parser, positive_int, typed
from proto.runtime.startup import EXIT_CONFIG, fail

PROG = "metashard dev"
DEV_LABEL = "metashard.io/dev"
"""The label ``dev`` puts on the controllers it applies to a cluster it did not start."""
_CONTROLLERS = ("CompositeController", "DecoratorController")

# Info-level records worth a line besides "reconciled" (the controller's own life cycle).
_LIFECYCLE = {
    "controller started",
    "controller informers synced",
    "controller stopped",
    "assigning slots",
}


def _controller(record: dict[str, Any]) -> str:
    name = str(record.get("controller", ""))
    for kind in ("CompositeController-", "DecoratorController-"):
        name = name.removeprefix(kind)
    return name


def render(record: dict[str, Any]) -> str | None:
    """One readable line for a log record of metashard's processes, or ``None`` to skip it.

    ``reconciled`` with writes: ``HH:MM:SS controller key result: write; write (hook N ms)``.
    Warnings and errors: ``HH:MM:SS LEVEL event key=value...``. The coordinator's life-cycle
    events (``_LIFECYCLE``, and the start-up wait ``waiting ...``) likewise. Everything else:
    ``None``.
    """
    event = str(record.get("event", ""))
    level = str(record.get("level", "info"))
    stamp = str(record.get("timestamp", ""))[11:19]
    if event == "reconciled":
        wrote = record.get("wrote") or []
        if not wrote:
            return None
        hook_ms = float(record.get("hook_seconds") or 0) * 1000
        return (
            f"{stamp} {_controller(record)} {record.get('key', '?')} {record.get('result', '?')}: "
            f"{'; '.join(str(w) for w in wrote)} (hook {hook_ms:.0f} ms)"
        )
    lifecycle = (event in _LIFECYCLE or event.startswith("waiting ")) and "worker" not in record
    if level in ("warning", "error", "critical") or lifecycle:
        skip = {"event", "level", "timestamp", "logger", "logger_name", "pid"}
        fields = " ".join(f"{k}={v}" for k, v in record.items() if k not in skip)
        tag = "" if level == "info" else f"{level.upper()} "
        return f"{stamp} {tag}{event} {fields}".rstrip()
    return None


def labelled(
    objects: Sequence[dict[str, Any]], value: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """``objects`` with ``DEV_LABEL=value`` added to the labels of every CompositeController
    and DecoratorController (``metacontroller.k8s.io``), and those controllers' names.
    ``objects`` are not changed."""
    result: list[dict[str, Any]] = []
    names: list[str] = []
    for obj in objects:
        group = str(obj["apiVersion"]).partition("/")[0]
        if obj["kind"] in _CONTROLLERS and group == "metacontroller.k8s.io":
            metadata = dict(obj["metadata"])
            metadata["labels"] = {**(metadata.get("labels") or {}), DEV_LABEL: value}
            obj = {**obj, "metadata": metadata}
            names.append(f"{obj['kind']} {metadata['name']}")
        result.append(obj)
    return result, names


def build_parser() -> Parser:
    """The parser of ``metashard dev``."""
    parser = Parser(
        prog=PROG,
        description="Start a cluster (or use one), apply manifests, run metashard, and print "
        "one line per reconcile that wrote something. Ctrl-C stops everything it started.",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="YAML/JSON files or directories")
    parser.add_argument(
        "--kubeconfig", help="use this cluster instead of starting the embedded one"
    )
    parser.add_argument("--namespace", default="default", help="for objects without one")
    parser.add_argument(
        "--processes", type=typed(positive_int), default=2, help="worker processes (default 2)"
    )
    parser.add_argument(
        "--log", help="metashard's JSON log file (default: a new file in the temporary directory)"
    )
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The flags of ``argv``; exits 2 with one line on bad input."""
    return build_parser().parse_args(argv)


async def prepare(kubeconfig: str, objects: Sequence[dict[str, Any]], namespace: str) -> list[str]:
    """Install the Metacontroller CRDs where missing, then apply ``objects``."""
    async with Session(load_config(kubeconfig), qps=0) as session:
        client = Client(session)
        await crds.install(client, load_crds())
        return await manifests.apply(client, objects, namespace=namespace)


async def stream(
    source: asyncio.StreamReader, log: IO[bytes], out: IO[str], quiet: asyncio.Event
) -> None:
    """Copy every line of ``source`` to ``log``; print the rendered ones to ``out`` until
    ``quiet`` is set (stopping: what the processes say while they stop is only logged)."""
    while line := await source.readline():
        log.write(line)
        log.flush()
        if quiet.is_set():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            text = line.decode(errors="replace").rstrip()
            print(text, file=out, flush=True)  # a traceback or other raw output
            continue
        if isinstance(record, dict) and (shown := render(record)) is not None:
            print(shown, file=out, flush=True)


async def run(
    args: argparse.Namespace,
    objects: Sequence[dict[str, Any]],
    kubeconfig: str,
    log: IO[bytes],
    *,
    selector: str = "",
    controllers: Sequence[str] = (),
) -> int:
    """Apply, run ``metashard run`` (with ``--target-label-selector selector`` when given,
    saying so with the ``controllers`` it selects) and stream its reconciles until a signal
    or its exit."""
    for line in await prepare(kubeconfig, objects, args.namespace):
        print(line, flush=True)
    if selector:
        print(scope_line(selector, controllers), flush=True)
    metrics = free_port()
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "manager.cli", "run", "--processes", str(args.processes)),
        *("--kubeconfig", kubeconfig, "--log-format", "json"),
        *("--metrics-address", f"127.0.0.1:{metrics}"),
        *("--health-probe-bind-address", f"127.0.0.1:{metrics}"),
        *(("--target-label-selector", selector) if selector else ()),
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # Ctrl-C reaches it through us, once
    )
    print(
        f"metashard run --processes {args.processes} (pid {proc.pid}); "
        f"metrics and probes on 127.0.0.1:{metrics}"
    )
    print("reconciles that write something are shown below; Ctrl-C stops", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    assert proc.stderr is not None
    streaming = asyncio.create_task(stream(proc.stderr, log, sys.stdout, stop))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({streaming, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.wait_for(proc.wait(), 30)
    except TimeoutError:
        proc.kill()
        code = await proc.wait()
    stopping.cancel()
    await asyncio.gather(streaming, stopping, return_exceptions=True)
    return 0 if stop.is_set() else code or 1


def scope_line(selector: str, controllers: Sequence[str]) -> str:
    """What ``dev`` runs on a cluster it did not start, in one line."""
    if not controllers:
        return (
            "runs no controller: none among the manifests, and the cluster's own are left "
            f"alone (metashard run --target-label-selector {selector})"
        )
    label, _, value = selector.partition("=")
    return (
        f"runs only the controllers applied here, labelled {label}={value} "
        f"(metashard run --target-label-selector {selector}, no leader election): "
        f"{', '.join(controllers)}; the cluster's other controllers are left alone"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    try:
        objects = manifests.load(args.paths)  # every file read before anything starts
    except manifests.ManifestError as err:
        return fail(PROG, err, code=EXIT_CONFIG)
    if args.log:
        log_path = Path(args.log)
    else:
        log_path = Path(tempfile.mkdtemp(prefix="metashard-dev-")) / "metashard.log"
    cluster: ClusterProcess | None = None
    selector = ""
    controllers: list[str] = []
    try:
        if args.kubeconfig:
            kubeconfig = args.kubeconfig
            selector = f"{DEV_LABEL}={secrets.token_hex(3)}"
            objects, controllers = labelled(objects, selector.partition("=")[2])
        else:
            print("starting the embedded cluster...", flush=True)
            cluster = ClusterProcess(args=["--metacontroller-crds"]).start()
            kubeconfig = str(cluster.kubeconfig)
            print(f"cluster: {cluster.url}")
        print(f"export KUBECONFIG={kubeconfig}", flush=True)
        print(f"metashard's log: {log_path}", flush=True)
        with log_path.open("ab") as log:
            code = asyncio.run(
                run(args, objects, kubeconfig, log, selector=selector, controllers=controllers)
            )
    except errors.ConfigError as err:
        code = fail(PROG, err, code=EXIT_CONFIG)
    except (errors.KubeError, TimeoutError) as err:
        code = fail(PROG, err)
    except KeyboardInterrupt:  # Ctrl-C before the loop installed its handler
        code = 0
    finally:
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.stop()
    print(f"stopped. metashard's log is kept in {log_path}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
