"""The scale benchmark: N parents x K children through cold start, full resync, fresh edits
during a resync, an update wave and leader failover, every configuration in one run.

``python -m loadtest.bench.scale`` (``make bench-scale SCALE="..."``); ``--help`` lists the
flags. With ``--kubeconfig`` (or ``METASHARD_E2E_KUBECONFIG``) it runs on that cluster,
otherwise on the embedded cluster it starts. The job is the shared harness's fanout job (a
Fanout owns K ConfigMaps and reports ``status.children``), served by a sync hook of this
benchmark's (``_scale_hook``: the harness's answer after ``--hook-latency`` seconds, counting
its calls, which count any controller's reconciles). The configurations (``_scale_config``):
the raw client (and with ``--raw-metacontroller`` the raw client writing children as
Metacontroller's must be, ``raw-mc``), ``metashard run --processes P`` for each
``--processes``, and any command
given with ``--controller LABEL=COMMAND`` (Metacontroller, say), each again for every
non-zero ``--hook-latency``. Each gets its own namespace and runs the phases of
``_scale_phases``; every configuration x phase is one JSON line in ``OUT/scale.jsonl``.
``--repeat R`` runs them all R times, in rounds (``_scale_config.rounds``: the order reversed
every other round); each line carries its ``repeat`` (0 to R-1).

At the end it prints one table per phase with ratios against the raw client and the first
``--controller`` measured in the same run (``_scale_report``: with repeats, each row is the
configuration's median run, and each run is listed under it) and draws ``OUT/<phase>.png``
(``_scale_plot``: parents converged or hook calls over time per configuration, and memory
over time per process). ``--report FILE ...`` prints the tables and draws the pictures of
saved lines again (next to the first file).

Clean-up, at the end and after a failure, Ctrl-C or SIGTERM, as the fanout job's: the
namespaces it created (labelled ``fanoutbench=1``), the CompositeController ``fanout-bench``
and the CRDs that were missing at the start. Process logs stay in a temporary directory,
printed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from loadtest.bench import _harness, _scale_plot
from loadtest.bench._proc import SETTLE_CORES, SETTLE_MAX
from loadtest.bench._report import header
from loadtest.bench._scale_config import (
    COLDSTART,
    PHASES,
    Config,
    Options,
    configurations,
    go_duration,
    parse_command,
    rounds,
)
from loadtest.bench._scale_hook import HookClient
from loadtest.bench._scale_phases import Context, PhaseFailed, Phases
from loadtest.bench._scale_report import report
from loadtest.bench.fanout import (
    CRD_PATH,
    NAMESPACES,
    clean_up,
    cluster,
    cluster_flags,
    names,
    start_server,
    terminate_as_interrupt,
)
from loadtest.dev.processes import free_port

RECORDS = "scale.jsonl"


def _floats(p: argparse.ArgumentParser, flag: str, text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        p.error(f"{flag}: numbers separated by commas, got {text!r}")
    if not values or min(values) < 0 or len(set(values)) != len(values):
        p.error(f"{flag}: distinct numbers >= 0 separated by commas, got {text!r}")
    return values


def _counts(p: argparse.ArgumentParser, text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        p.error(f"--processes: whole numbers separated by commas, got {text!r}")
    if counts and min(counts) < 1:
        p.error(f"--processes: positive counts, got {text!r}")
    return tuple(dict.fromkeys(counts))


def _positive(p: argparse.ArgumentParser, **values: float) -> None:
    for flag, value in values.items():
        if value <= 0:
            p.error(f"--{flag.replace('_', '-')} must be positive, got {value:g}")


def parse(argv: Sequence[str], *, quick: bool = False) -> Options | list[Path]:
    """Options from flags, or with ``--report`` the files to report on; a wrong flag exits
    with status 2 and a message naming it."""
    p = argparse.ArgumentParser(
        prog="python -m loadtest.bench.scale", description=__doc__.split("\n")[0]
    )
    p.add_argument("--n", type=int, help="parents (default 2000; 20 with --quick)")
    p.add_argument("--k", type=int, default=3, help="ConfigMaps per parent (default 3)")
    p.add_argument("--quick", action="store_true", default=quick, help="N=20 (a smoke run)")
    p.add_argument(
        "--processes",
        default="1,2",
        help="worker process counts of metashard run to measure (default 1,2; '' for none)",
    )
    p.add_argument("--no-raw", dest="raw", action="store_false", help="no raw-client baseline")
    p.add_argument(
        "--raw-metacontroller",
        action="store_true",
        help="also the raw client writing its children as a Metacontroller-compatible"
        " controller must create them (controller-uid label, last-applied annotation), as"
        " 'raw-mc'; cold start only",
    )
    p.add_argument(
        "--controller",
        action="append",
        default=[],
        metavar="LABEL=COMMAND",
        help="another controller to measure, e.g. 'metacontroller=/path/metacontroller"
        " --kubeconfig {kubeconfig} --metrics-address 127.0.0.1:{port}"
        " --cache-flush-interval {flush} --leader-election --leader-election-id {lease}"
        " --leader-election-namespace {namespace} --health-probe-bind-address 127.0.0.1:0';"
        " placeholders {kubeconfig} {python} {port}"
        " {flush} {lease} {namespace} (repeatable)",
    )
    p.add_argument(
        "--hook-latency",
        default="0",
        help="seconds the sync hook waits before answering; several separated by commas"
        " run every controller once per latency (default 0; e.g. 0,0.05)",
    )
    p.add_argument(
        "--phases", default=",".join(PHASES), help=f"phases to run (default {','.join(PHASES)})"
    )
    p.add_argument(
        "--resync-interval",
        type=float,
        help="controllers' resync (metashard --cache-flush-interval), seconds; longer than a"
        " full resync takes (default max(20, N/100))",
    )
    p.add_argument(
        "--lease-duration",
        type=float,
        default=15.0,
        help="failover: the Lease duration given to metashard, seconds (default 15, as"
        " Metacontroller's); renew deadline 2/3 and retry period 2/15 of it",
    )
    p.add_argument(
        "--edit-rate", type=float, default=20.0, help="edits per second during a resync (20)"
    )
    p.add_argument(
        "--update-fraction",
        type=float,
        default=0.1,
        help="parents changed by the update wave (default 0.1)",
    )
    cluster_flags(p)
    p.add_argument("--out", type=Path, help="output directory (default: a new temporary one)")
    p.add_argument(
        "--concurrency", type=int, default=128, help="the benchmark's own requests in flight"
    )
    p.add_argument("--timeout", type=float, default=1800, help="seconds to wait for one phase")
    p.add_argument(
        "--sample-interval", type=float, default=0.5, help="seconds between samples (0.5)"
    )
    p.add_argument(
        "--settle",
        type=float,
        default=10.0,
        help="before each cold start, wait until the machine was quiet (at most"
        f" {SETTLE_CORES:g} cores busy) for this many seconds, up to {SETTLE_MAX / 60:g}"
        " minutes (--settle-max); 0: no wait (default 10)",
    )
    p.add_argument(
        "--settle-max",
        type=float,
        default=SETTLE_MAX,
        help="seconds to wait at most for that quiet machine; then the cold start is measured"
        f" anyway and the load is printed (default {SETTLE_MAX:g})",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every configuration this many times, in rounds, the order reversed every"
        " other round; each table row is then the median run (default 1)",
    )
    p.add_argument("--report", nargs="+", type=Path, metavar="FILE", help="only report saved lines")
    a = p.parse_args(list(argv))
    if a.report:
        return list(a.report)
    n = a.n if a.n is not None else 20 if a.quick else 2000
    _positive(p, n=n, k=a.k, concurrency=a.concurrency, timeout=a.timeout, repeat=a.repeat)
    _positive(p, edit_rate=a.edit_rate, sample_interval=a.sample_interval)
    _positive(p, lease_duration=a.lease_duration, update_fraction=a.update_fraction)
    if a.settle < 0:
        p.error(f"--settle: seconds >= 0 (0: no wait), got {a.settle:g}")
    _positive(p, settle_max=a.settle_max)
    if a.update_fraction > 1:
        p.error(f"--update-fraction: at most 1, got {a.update_fraction:g}")
    resync = a.resync_interval if a.resync_interval is not None else max(20.0, n / 100)
    _positive(p, resync_interval=resync)
    phases = [x.strip() for x in a.phases.split(",") if x.strip()]
    unknown = sorted(set(phases) - set(PHASES))
    if unknown or not phases:
        p.error(f"--phases: {unknown or 'none'}; choose from {','.join(PHASES)}")
    commands: list[Config] = []
    for spec in a.controller:
        try:
            commands.append(parse_command(spec))
        except ValueError as err:
            p.error(f"--controller: {err}")
    if len({c.name for c in commands}) != len(commands):
        p.error("--controller: two commands with one label")
    configs = configurations(
        raw=a.raw,
        raw_mc=a.raw_metacontroller,
        processes=_counts(p, a.processes),
        commands=commands,
        hook_latencies=_floats(p, "--hook-latency", a.hook_latency),
    )
    if not configs:
        p.error("nothing to measure: no --processes, no --controller and --no-raw")
    if a.raw_metacontroller and COLDSTART not in phases:
        p.error("--raw-metacontroller: raw-mc runs the coldstart phase only; it is not in --phases")
    if a.out is not None and a.out.exists() and not a.out.is_dir():
        p.error(f"--out: {a.out} is a file, not a directory")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = a.out or Path(tempfile.gettempdir()) / "metashard-bench" / f"scale-{stamp}"
    same = "lease_duration edit_rate update_fraction kubeconfig apiserver_pid concurrency timeout"
    return Options(
        n=n,
        k=a.k,
        configs=tuple(configs),
        phases=frozenset(phases),
        resync_interval=resync,
        out=out,
        sample_interval=a.sample_interval,
        settle=a.settle,
        settle_max=a.settle_max,
        repeat=a.repeat,
        **{name: getattr(a, name) for name in same.split()},
    )


def show(records: list[dict[str, Any]], out: Path) -> None:
    """Print the tables of ``records`` and draw their pictures into ``out``."""
    print("\n".join(report(records)))
    if not _scale_plot.available():
        print("\n  no pictures: matplotlib is not installed (pip install -e '.[bench]')")
        return
    for path in _scale_plot.plot(records, out):
        print(f"  picture: {path}")


def main(quick: bool, argv: Sequence[str] = ()) -> None:
    """Entry point of ``python -m loadtest.bench`` (defaults) and of this module (flags)."""
    parsed = parse(argv, quick=quick)
    if isinstance(parsed, list):
        records = [orjson.loads(x) for path in parsed for x in path.read_bytes().splitlines() if x]
        show(records, parsed[0].parent)
        return
    if not _harness.available():
        print(f"  skipped: the fanout harness is expected at {_harness.SHARED_BENCH}")
        return
    opts = parsed
    opts.out.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="metashard-scale-logs-"))
    bench = Run(opts, logs)
    try:
        target = cluster(kubeconfig=opts.kubeconfig, apiserver_pid=opts.apiserver_pid)
        with terminate_as_interrupt(), target as (kubeconfig, pids):
            asyncio.run(bench.run(kubeconfig, pids))
    except KeyboardInterrupt:
        print(f"  interrupted; the phases measured so far are in {bench.path}", file=sys.stderr)
        raise SystemExit(130) from None
    where = f"kubeconfig {opts.kubeconfig}" if opts.kubeconfig else "the embedded cluster"
    loads = [float(r["loadavg"]) for r in bench.records] or [os.getloadavg()[0]]
    header(
        f"scale on {where}: N={opts.n}, K={opts.k}, resync every"
        f" {go_duration(opts.resync_interval)}, {os.cpu_count()} CPUs, load average"
        f" {min(loads):.2f} to {max(loads):.2f} while measuring (one run: noisy)"
    )
    show(bench.records, opts.out)
    print(f"\n  JSON lines: {bench.path}\n  logs: {logs}", flush=True)
    if bench.failed:
        print(f"  not finished: {', '.join(bench.failed)}", file=sys.stderr)
        raise SystemExit(1)


class Run:
    """One run on one cluster: the set-up every configuration shares, then each one's phases."""

    def __init__(self, opts: Options, logs: Path) -> None:
        self.opts = opts
        self.logs = logs
        self.path = opts.out / RECORDS
        self.records: list[dict[str, Any]] = []
        self.failed: list[str] = []
        self.server = "?"

    def record(self, rec: dict[str, Any], *, repeat: int = 0) -> None:
        rec.update(
            nproc=os.cpu_count(),
            loadavg=os.getloadavg()[0],
            server=self.server,
            ts=time.time(),
            repeat=repeat,
        )
        self.records.append(rec)
        with self.path.open("ab") as f:
            f.write(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS) + b"\n")
        again = f" (round {repeat + 1} of {self.opts.repeat})" if self.opts.repeat > 1 else ""
        print(
            f"  {rec['label']} {rec['phase']}{again}: {rec['seconds']:.2f} s"
            + ("" if rec["converged"] else " (not finished)"),
            file=sys.stderr,
            flush=True,
        )

    async def run(self, kubeconfig: str, pids: dict[str, int]) -> None:
        h, opts = _harness.load(), self.opts
        env = _harness.env(kubeconfig)
        async with h.kube.Kube(
            kubeconfig, concurrency=opts.concurrency, user_agent="metashard-scale-bench/1.0"
        ) as kube:
            crds, namespaces = await names(kube, CRD_PATH), await names(kube, NAMESPACES)
            cc_docs: list[dict[str, Any]] = []
            hook_proc: Any = None
            try:
                await h.runner.install(kube, metacontroller=True)
                self.server = await h.runner._server_version(kube)
                port = free_port()
                argv = [sys.executable, "-m", "loadtest.bench._scale_hook", "--port", str(port)]
                hook_proc = start_server(h, argv, env, self.logs / "hook.log", port)
                async with HookClient(port) as hook:
                    cc_docs = h.runner.load_manifest(
                        "fanout-compositecontroller.yaml", HOOK_URL=hook.url
                    )
                    await h.runner.apply(kube, cc_docs)
                    meter = h.cpu.CpuMeter({**pids, "hook": hook_proc.p.pid})
                    ctx = Context(
                        h,
                        kube,
                        hook,
                        meter,
                        opts=opts,
                        kubeconfig=kubeconfig,
                        env=env,
                        logs=self.logs,
                        record=self.record,
                    )
                    for repeat, config in rounds(opts.configs, opts.repeat):
                        record = functools.partial(self.record, repeat=repeat)
                        try:
                            await Phases(dataclasses.replace(ctx, record=record), config).run()
                        except PhaseFailed as err:
                            print(f"  {err}", file=sys.stderr, flush=True)
                            again = f" (round {repeat + 1})" if opts.repeat > 1 else ""
                            self.failed.append(config.label + again)
            finally:
                await clean_up(
                    h, kube, cc_docs=cc_docs, crds=crds, namespaces=namespaces, hook=hook_proc
                )


if __name__ == "__main__":
    main(quick=False, argv=sys.argv[1:])
