"""The narrowing benchmark: a DecoratorController of ConfigMaps in a cluster full of ConfigMaps
it does not select (Metacontroller #1033), with the parent watch narrowed and whole.

``python -m loadtest.bench.narrowing`` (``make bench BENCH=narrowing`` runs it with 20,000
unselected ConfigMaps); ``--help`` lists the flags. With ``--kubeconfig`` (or
``METASHARD_E2E_KUBECONFIG``) it runs on that cluster, otherwise on the embedded cluster it
starts. In a namespace of its own (labelled ``narrowbench=1``, deleted at the end, also after
a failure or Ctrl-C) it creates ``--unselected`` ConfigMaps no controller selects and
``--selected`` ConfigMaps carrying ``narrowbench.metashard.io/selected=yes``. Then, for each
configuration in turn, it creates a DecoratorController of ConfigMaps with that label selector
(its sync hook, served by this process, puts an annotation of the configuration's own on each
target), starts ``metashard run --processes 1`` with ``--narrow-watches=true`` (``narrowed``)
or ``false`` (``whole``, what Metacontroller does: it watches every ConfigMap), and measures
until every selected ConfigMap carries the annotation:

- ``seconds``: from the process's start to the last selected ConfigMap annotated;
- ``cached``: the coordinator's ``metashard_informer_objects{resource="configmaps.v1"}``;
- ``coordinator MB``: the coordinator's peak RSS (``VmHWM``), ``CPU s``: the process tree's.

Both configurations run in the same run on the same objects, so their ratio holds on a noisy
machine. The numbers are printed, with the ratios ``whole / narrowed``, and written as JSON
lines to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from loadtest.bench import _proc
from loadtest.bench._report import header
from loadtest.bench.decorator import CONFIGMAPS, DCS, NAMESPACES, decorator_of_configmaps
from loadtest.bench.fanout import cluster, terminate_as_interrupt
from loadtest.dev import crds, webhook
from loadtest.dev.processes import Processes, free_port
from proto.api.crds import load_crds
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.session import Session

SELECTED = "narrowbench.metashard.io/selected"
DONE = "narrowbench.metashard.io/synced-by-"
CONFIGS = ("narrowed", "whole")
DATA = "x" * 200  # a small ConfigMap's payload


def parse(argv: Sequence[str], *, quick: bool = False) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loadtest.bench.narrowing", description=__doc__)
    p.add_argument("--unselected", type=int, default=300 if quick else 20_000)
    p.add_argument("--selected", type=int, default=20 if quick else 200)
    p.add_argument("--kubeconfig", default=os.environ.get("METASHARD_E2E_KUBECONFIG"))
    p.add_argument("--apiserver-pid", type=int, default=None)
    p.add_argument("--concurrency", type=int, default=64, help="the benchmark's own writes")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per configuration")
    p.add_argument("--out", type=Path, default=None, help="directory of narrowing.jsonl")
    args = p.parse_args(list(argv))
    if args.unselected < 0 or args.selected < 1 or args.concurrency < 1:
        p.error("--unselected >= 0, --selected >= 1 and --concurrency >= 1")
    return args


async def _hook(request: web.Request) -> web.Response:
    """Annotate the target with the configuration named in the path."""
    config = request.match_info["config"]
    return web.json_response({"annotations": {DONE + config: "yes"}})


async def _create_all(
    client: Client,
    namespace: str,
    count: int,
    prefix: str,
    labels: dict[str, str],
    concurrency: int,
) -> None:
    queue = iter(range(count))

    async def writer() -> None:
        for i in queue:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{prefix}-{i:06d}", "namespace": namespace, "labels": labels},
                "data": {"value": DATA},
            }
            await client.create(CONFIGMAPS, body, namespace=namespace)

    await asyncio.gather(*(writer() for _ in range(concurrency)))


async def _done(client: Client, namespace: str, config: str) -> int:
    listed = await client.list(CONFIGMAPS, namespace=namespace, label_selector=f"{SELECTED}=yes")
    return sum(
        1 for cm in listed.items if (cm["metadata"].get("annotations") or {}).get(DONE + config)
    )


async def _measure(
    client: Client,
    args: argparse.Namespace,
    kubeconfig: str,
    namespace: str,
    hook: str,
    config: str,
    logs: Path,
) -> dict[str, Any]:
    name = f"narrowbench-{config}"
    decorator = decorator_of_configmaps(
        name, match_labels={SELECTED: "yes"}, hook_url=f"{hook}/{config}"
    )
    await client.create(DCS, decorator)
    processes = Processes(kubeconfig=kubeconfig, workdir=logs, fast=False)
    started = time.monotonic()
    proc = processes.run(1, extra=["--narrow-watches", "true" if config == "narrowed" else "false"])
    try:
        done = 0
        while done < args.selected:
            if time.monotonic() - started > args.timeout:
                raise TimeoutError(f"{config}: {done} of {args.selected} annotated")
            if not proc.alive:
                raise RuntimeError(f"{config}: metashard run exited; see {proc.log}")
            await asyncio.sleep(0.25)
            done = await _done(client, namespace, config)
        seconds = time.monotonic() - started
        cached = await proc.metric("metashard_informer_objects", {"resource": "configmaps.v1"})
        memory = _proc.memory(proc.popen.pid)  # the root process is the coordinator
        cpu = _proc.per_role({}, _proc.RoleCpu(proc.popen.pid).sample())
    finally:
        processes.close()
        with contextlib.suppress(errors.NotFound):
            await client.delete(DCS, name)
    return {
        "config": config,
        "seconds": seconds,
        "cached": cached,
        "coordinator_peak_mb": round(memory.peak / 2**20, 1) if memory else None,
        "cpu_s": round(sum(cpu.values()), 2),
        "cpu_by_role": cpu,
        "unselected": args.unselected,
        "selected": args.selected,
    }


async def run(args: argparse.Namespace, kubeconfig: str, logs: Path) -> list[dict[str, Any]]:
    namespace = f"narrowbench-{secrets.token_hex(3)}"
    async with Session(load_config(kubeconfig), qps=0) as session:
        client = Client(session)
        await crds.install(client, load_crds())
        meta = {"name": namespace, "labels": {"narrowbench": "1"}}
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        port = free_port()
        runner = await webhook.serve("/{config}", _hook, port=port)
        try:
            t0 = time.monotonic()
            await _create_all(client, namespace, args.unselected, "other", {}, args.concurrency)
            selected = {SELECTED: "yes"}
            await _create_all(
                client, namespace, args.selected, "selected", selected, args.concurrency
            )
            print(
                f"  created {args.unselected + args.selected} ConfigMaps in"
                f" {time.monotonic() - t0:.1f} s",
                file=sys.stderr,
                flush=True,
            )
            results = []
            for config in CONFIGS:
                hook = f"http://127.0.0.1:{port}"
                results.append(
                    await _measure(client, args, kubeconfig, namespace, hook, config, logs)
                )
                print(f"  {config}: {results[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
            return results
        finally:
            await runner.cleanup()
            with contextlib.suppress(errors.NotFound):
                await client.delete(NAMESPACES, namespace)


def report(results: list[dict[str, Any]]) -> list[str]:
    """The table of ``results``, with the ratios whole / narrowed."""
    by = {r["config"]: r for r in results}
    lines = [
        f"  {'config':<10} {'seconds':>9} {'cached':>8} {'coordinator MB':>15} {'CPU s':>7}",
    ]
    for r in results:
        lines.append(
            f"  {r['config']:<10} {r['seconds']:>9.1f} {r['cached'] or 0:>8.0f}"
            f" {r['coordinator_peak_mb'] or 0:>15.1f} {r['cpu_s']:>7.1f}"
        )
    narrowed, whole = by.get("narrowed"), by.get("whole")
    if narrowed and whole:

        def ratio(key: str) -> str:
            a, b = whole[key] or 0, narrowed[key] or 0
            return f"x{a / b:.2f}" if b else "-"

        lines.append(
            f"  {'whole / narrowed':<10} {ratio('seconds'):>3} {ratio('cached'):>8}"
            f" {ratio('coordinator_peak_mb'):>15} {ratio('cpu_s'):>7}"
        )
    return lines


def main(quick: bool, argv: Sequence[str] = ()) -> None:
    """Entry point of ``python -m loadtest.bench`` (small) and of this module (flags)."""
    args = parse(argv, quick=quick)
    out = args.out or Path(tempfile.mkdtemp(prefix="metashard-narrowing-"))
    out.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="metashard-narrowing-logs-"))
    try:
        target = cluster(kubeconfig=args.kubeconfig, apiserver_pid=args.apiserver_pid)
        with terminate_as_interrupt(), target as (kubeconfig, _):
            results = asyncio.run(run(args, kubeconfig, logs))
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    where = f"kubeconfig {args.kubeconfig}" if args.kubeconfig else "the embedded cluster"
    header(
        f"narrowing on {where}: {args.unselected} ConfigMaps no controller selects,"
        f" {args.selected} selected, metashard run --processes 1, load average"
        f" {os.getloadavg()[0]:.2f}"
    )
    print("\n".join(report(results)))
    path = out / "narrowing.jsonl"
    with path.open("ab") as f:
        for r in results:
            f.write(orjson.dumps({**r, "ts": time.time()}, option=orjson.OPT_SORT_KEYS) + b"\n")
    print(f"\n  JSON lines: {path}\n  logs: {logs}", flush=True)


if __name__ == "__main__":
    main(quick=False, argv=sys.argv[1:])
