"""The fanout job: N parents x K child ConfigMaps plus status, timed against baselines measured
in the same run, on the embedded cluster or on any cluster.

``python -m loadtest.bench fanout`` (``make bench``) uses N=500; ``python -m loadtest.bench.fanout
--full`` the issue's size (N=2000, 3 repeats); ``--help`` lists the flags. With ``--kubeconfig``
(or ``METASHARD_E2E_KUBECONFIG``) it runs against that cluster; otherwise it starts the embedded
cluster. The workload, checker, client and raw baseline are the shared harness's
(``../shared/bench``, see ``_harness``). Configurations are interleaved, each repeat in turn
(the order of the metashard configurations alternates), and every figure is the median over
``--repeat`` repeats. Measured per repeat:

- ``raw``: the harness's raw client, 128 requests in flight, writes what a perfect controller
  writes (create wave, then update wave);
- ``raw+watchers``: the same while ``_watchers`` runs metashard's informers doing nothing, for
  the zero-cost-controller limit (see ``_fanout_report``) and the informers' own CPU per
  parent (``cpu.watchers``: what the coordinator's ingest costs with nothing to route);
- ``metashard-{1,2}w``: ``metashard run --processes W`` with the harness's sync hook and
  CompositeController: warm-up parent, create wave, update wave. A wave's time ends when the
  job converged; what it cost ends when the controller is quiet (no reconcile for a second,
  ``_quiet``), since the reconciles its own writes queue again may run after the last parent
  converged. Per wave: CPU seconds of every metashard process from ``/proc`` (``_proc``),
  reconciles per worker and the reconcile-time histogram from ``/metrics`` scraped at the
  wave's start and when quiet, the API server's CPU when it is a local process (the embedded
  one, or ``--apiserver-pid``), and its request counts (``APPLY``, server-side apply, counts as
  a write);
- ``metashard-{W}w-ssa``: the same under ``--apply-strategy server-side-apply`` for the worker
  counts of ``--ssa-workers`` (default 2; create and update waves, no cold start), reported
  next to dynamic apply's ``metashard-{W}w`` with their CPU and writes per parent compared;
- cold start: ``raw-cold`` (``_coldraw``: a new client process writing the waiting parents'
  children and status) and ``metashard-{1,2}w`` started with N parents waiting; the clock
  starts before the process is spawned;
- with ``--baseline-src DIR`` (another source tree, e.g. ``git worktree add /tmp/base
  COMMIT``): every metashard configuration above again with that build, labelled ``base-{W}w``
  (``base-{W}w-ssa``), right after or before this build's in each repeat (the order
  alternates), reported next to it with the ratio this build / baseline. Both builds run in
  this interpreter and virtualenv, each from its own tree (``_build``); a tree whose
  ``metashard run`` lacks a flag the benchmark passes is refused before anything starts.

Each wave is one JSON line (the harness's fields and the ones above; a metashard
configuration's also names its ``build``: name, tree and commit, ``_build.Build.identity``)
appended to ``--out``
(default: a new file under the temporary directory, printed at the end);
``--report FILE ...`` prints the report of saved lines, one per (N, K); lines of several runs
with the same N and K count as repeats. Clean-up, at the end and also after a failure,
Ctrl-C or SIGTERM: the namespaces labelled ``fanoutbench=1`` that appeared during the run
(so two runs must not share a cluster), the CompositeController ``fanout-bench``, and those
of the Fanout and Metacontroller CRDs that were missing at the start. Process logs stay in a
temporary directory, printed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

from loadtest.apiserver.background import ClusterProcess
from loadtest.bench import _fanout_report as report
from loadtest.bench import _harness
from loadtest.bench._build import Build, run_args
from loadtest.bench._proc import RoleCpu, busy_seconds, per_role
from loadtest.bench._report import header
from loadtest.dev.processes import REPO, free_port

KUBECONFIG_ENV = "METASHARD_E2E_KUBECONFIG"
LABEL = "fanoutbench"
CRDS = {
    "fanouts.bench.metashard.io",
    "compositecontrollers.metacontroller.k8s.io",
    "decoratorcontrollers.metacontroller.k8s.io",
    "controllerrevisions.metacontroller.k8s.io",
}
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAMESPACES = f"/api/v1/namespaces?labelSelector={LABEL}%3D1"


@dataclass(frozen=True, slots=True)
class Options:
    n: int
    k: int
    repeat: int
    workers: tuple[int, ...]
    ssa_workers: tuple[int, ...]
    kubeconfig: str | None
    apiserver_pid: int | None
    out: Path
    concurrency: int
    coldstart: bool
    watchers: bool
    timeout: float
    baseline_src: Path | None


def parse(argv: Sequence[str], *, quick: bool = False) -> Options | list[Path]:
    """Options from flags, or with ``--report`` the files to report on."""
    p = argparse.ArgumentParser(
        prog="python -m loadtest.bench.fanout", description=__doc__.split("\n")[0]
    )
    p.add_argument("--n", type=int, help="parents (default 500; 50 with --quick; 2000 with --full)")
    p.add_argument("--k", type=int, default=3, help="ConfigMaps per parent (default 3)")
    p.add_argument(
        "--repeat",
        type=int,
        help="repeats, interleaved; medians reported (default 1; 3 with --full)",
    )
    p.add_argument("--full", action="store_true", help="the issue's size: N=2000, 3 repeats")
    p.add_argument("--quick", action="store_true", default=quick, help="N=50 (a smoke run)")
    p.add_argument("--workers", default="1,2", help="metashard worker counts to run (default 1,2)")
    p.add_argument(
        "--ssa-workers",
        default="2",
        help="worker counts also run under server-side apply (default 2; '' for none)",
    )
    cluster_flags(p)
    p.add_argument("--out", type=Path, help="append the JSON lines here")
    p.add_argument("--concurrency", type=int, default=128, help="raw client's requests in flight")
    p.add_argument(
        "--no-coldstart", dest="coldstart", action="store_false", help="skip cold starts"
    )
    p.add_argument("--no-watchers", dest="watchers", action="store_false", help="skip raw+watchers")
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait for one wave")
    p.add_argument(
        "--baseline-src",
        type=Path,
        metavar="DIR",
        help="also measure every metashard configuration with the build in this source tree"
        " (e.g. a `git worktree` of an earlier commit), labelled base-Ww, with ratios to it",
    )
    p.add_argument("--report", nargs="+", type=Path, metavar="FILE", help="only report saved lines")
    a = p.parse_args(list(argv))
    if a.report:
        return list(a.report)
    workers = _counts(p, "--workers", a.workers)
    if not workers:
        p.error("--workers: at least one worker count")
    ssa_workers = _counts(p, "--ssa-workers", a.ssa_workers)
    n = a.n if a.n is not None else 2000 if a.full else 50 if a.quick else 500
    repeat = a.repeat if a.repeat is not None else 3 if a.full else 1
    if n < 1 or repeat < 1 or a.k < 1:
        p.error("--n, --k and --repeat must be positive")
    baseline_src = None
    if a.baseline_src is not None:
        baseline_src = a.baseline_src.resolve()
        refusal = Build(report.BASELINE, baseline_src).refusal()
        if refusal is not None:
            p.exit(2, f"{p.prog}: error: --baseline-src: {refusal}\n")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = a.out or Path(tempfile.gettempdir()) / "metashard-bench" / f"fanout-{stamp}.jsonl"
    return Options(
        n=n,
        k=a.k,
        repeat=repeat,
        workers=workers,
        ssa_workers=ssa_workers,
        kubeconfig=a.kubeconfig,
        apiserver_pid=a.apiserver_pid,
        out=out,
        concurrency=a.concurrency,
        coldstart=a.coldstart,
        watchers=a.watchers,
        timeout=a.timeout,
        baseline_src=baseline_src,
    )


def cluster_flags(p: argparse.ArgumentParser) -> None:
    """``--kubeconfig`` (default ``$METASHARD_E2E_KUBECONFIG``, else the embedded cluster)
    and ``--apiserver-pid``, as ``cluster()`` takes them."""
    p.add_argument(
        "--kubeconfig",
        default=os.environ.get(KUBECONFIG_ENV) or None,
        help=f"run on this cluster (default ${KUBECONFIG_ENV}; unset: the embedded cluster)",
    )
    p.add_argument("--apiserver-pid", type=int, help="pid of the cluster's API server, when local")


def _counts(p: argparse.ArgumentParser, flag: str, text: str) -> tuple[int, ...]:
    """Positive worker counts separated by commas (exits through ``p.error`` otherwise)."""
    try:
        counts = tuple(int(w) for w in text.split(",") if w.strip())
    except ValueError:
        counts = (0,)
    if counts and min(counts) < 1:
        p.error(f"{flag}: positive counts separated by commas, got {text!r}")
    return counts


def main(quick: bool, argv: Sequence[str] = ()) -> None:
    """Entry point of ``python -m loadtest.bench`` (defaults) and of this module (flags)."""
    parsed = parse(argv, quick=quick)
    if isinstance(parsed, list):
        records = [orjson.loads(x) for path in parsed for x in path.read_bytes().splitlines() if x]
        workers, ssa_workers = report.configurations(records)
        for (n, k), group in sorted(report.split(records).items()):
            header(f"fanout: N={n}, K={k}, {len(group)} waves from {len(parsed)} file(s)")
            print("\n".join(report.report(group, workers=workers, ssa_workers=ssa_workers)))
        return
    if not _harness.available():
        print(f"  skipped: the fanout harness is expected at {_harness.SHARED_BENCH}")
        return
    opts = parsed
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        target = cluster(kubeconfig=opts.kubeconfig, apiserver_pid=opts.apiserver_pid)
        with terminate_as_interrupt(), target as (kubeconfig, pids):
            bench = Bench(opts, kubeconfig, pids)
            records, logs = asyncio.run(bench.run()), bench.logs
    except KeyboardInterrupt:
        print(f"  interrupted; the waves measured so far are in {opts.out}", file=sys.stderr)
        raise SystemExit(130) from None
    where = f"kubeconfig {opts.kubeconfig}" if opts.kubeconfig else "the embedded cluster"
    if opts.baseline_src is not None:
        where += f", baseline build {opts.baseline_src}"
    loads = [float(r["loadavg"]) for r in records] or [os.getloadavg()[0]]
    header(
        f"fanout on {where}: N={opts.n}, K={opts.k}, median of {opts.repeat},"
        f" {os.cpu_count()} CPUs, load average {min(loads):.2f} to {max(loads):.2f} while measuring"
    )
    print("\n".join(report.report(records, workers=opts.workers, ssa_workers=opts.ssa_workers)))
    print(f"\n  JSON lines: {opts.out}\n  logs: {logs}", flush=True)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt as Ctrl-C does, so the clean-up runs either way."""

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def cluster(
    *, kubeconfig: str | None, apiserver_pid: int | None
) -> Iterator[tuple[str, dict[str, int]]]:
    """(kubeconfig, local API-server pids by name): the given cluster or the embedded one."""
    if kubeconfig:
        yield kubeconfig, ({"apiserver": apiserver_pid} if apiserver_pid else {})
        return
    embedded = ClusterProcess().start()
    try:
        assert embedded.process is not None
        yield str(embedded.kubeconfig), {"apiserver": embedded.process.pid}
    finally:
        embedded.stop()


async def names(kube: Any, path: str) -> set[str]:
    """The names of the objects a LIST of ``path`` returns (the harness's client)."""
    items = (await kube.get(path)).get("items") or []
    return {item["metadata"]["name"] for item in items}


def start_server(h: Any, argv: list[str], env: dict[str, str], log: Path, port: int) -> Any:
    """Start a server process (the harness's ``Proc``) and wait until it listens on ``port``."""
    proc = h.runner.Proc(argv, env, log)
    deadline = time.monotonic() + 30
    while not listening(port):
        if time.monotonic() > deadline or not proc.alive():
            proc.stop()
            raise RuntimeError(f"{argv[2:4]} did not start; see {log}")
        time.sleep(0.05)
    return proc


async def clean_up(
    h: Any,
    kube: Any,
    *,
    cc_docs: list[dict[str, Any]],
    crds: set[str],
    namespaces: set[str],
    hook: Any,
) -> None:
    """Stop ``hook`` (a ``Proc``, or None), delete the controller objects ``cc_docs``, the
    namespaces labelled ``LABEL`` not in ``namespaces`` and the benchmark's CRDs not in
    ``crds``, each waited for until it is gone. Best effort: each step is tried even if
    another failed (the cluster may be gone)."""
    steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = []
    if cc_docs:
        steps.append(("CompositeController", lambda: h.runner.delete(kube, cc_docs)))

    async def namespaces_() -> None:
        now = await names(kube, NAMESPACES)
        await h.runner.delete_namespaces(kube, sorted(now - namespaces), timeout=120)

    async def crds_() -> None:
        doomed = sorted(CRDS & (await names(kube, CRD_PATH) - crds))
        for name in doomed:
            await kube.request("DELETE", f"{CRD_PATH}/{name}", ok=(200, 202, 404))
        # A CRD stays until its objects are deleted: wait, or the next run installs it while
        # it is going and loses it mid-run.
        for name in doomed:
            while True:
                status, _ = await kube.request("GET", f"{CRD_PATH}/{name}", ok=(200, 404))
                if status == 404:
                    break
                await asyncio.sleep(1.0)

    steps += [("namespaces", namespaces_), ("CRDs", crds_)]
    if hook is not None:
        hook.stop()
    for what, step in steps:
        try:
            await asyncio.wait_for(step(), 180)
        except (Exception, asyncio.CancelledError) as err:
            print(f"  clean-up of {what} failed: {err!r}", file=sys.stderr, flush=True)


QUIET_WINDOW = 1.0
QUIET_MAX = 60.0


def _scrape(port: int) -> report.Reconciles:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return report.parse_reconciles(r.read().decode())


class Bench:
    """One run of the matrix on one cluster (see the module docstring)."""

    def __init__(self, opts: Options, kubeconfig: str, pids: dict[str, int]) -> None:
        self.opts = opts
        self.kubeconfig = kubeconfig
        self.h = _harness.load()
        self.meter = self.h.cpu.CpuMeter(pids)
        self.pids = pids
        self.env = _harness.env(kubeconfig)
        self.records: list[dict[str, Any]] = []
        self.logs = Path(tempfile.mkdtemp(prefix="metashard-fanout-logs-"))
        self.kube: Any = None
        self.hook: Any = None
        self.hook_url = ""
        self.version = "?"
        self.builds = measured_builds(opts)
        self.identities = {build.name: build.identity() for build in self.builds}

    # --- the run -------------------------------------------------------------------------------

    async def run(self) -> list[dict[str, Any]]:
        h, opts = self.h, self.opts
        async with h.kube.Kube(
            self.kubeconfig, concurrency=opts.concurrency, user_agent="metashard-bench/1.0"
        ) as kube:
            self.kube = kube
            crds_before = await names(kube, CRD_PATH)
            namespaces_before = await names(kube, NAMESPACES)
            cc_docs: list[dict[str, Any]] = []
            try:
                await h.runner.install(kube, metacontroller=True)
                self.version = await h.runner._server_version(kube)
                self._start_hook()
                cc_docs = h.runner.load_manifest(
                    "fanout-compositecontroller.yaml", HOOK_URL=self.hook_url
                )
                await h.runner.apply(kube, cc_docs)
                for rep in range(opts.repeat):
                    for step in self._plan(rep):
                        await step()
            finally:
                await clean_up(
                    self.h,
                    kube,
                    cc_docs=cc_docs,
                    crds=crds_before,
                    namespaces=namespaces_before,
                    hook=self.hook,
                )
        return self.records

    def _plan(self, rep: int) -> list[Callable[[], Awaitable[None]]]:
        opts = self.opts
        waves, colds = schedule(opts, self.builds, rep)
        steps: list[Callable[[], Awaitable[None]]] = [partial(self._raw, rep, watched=False)]
        if opts.watchers:
            steps.append(partial(self._raw, rep, watched=True))
        steps += [partial(self._metashard_waves, rep, b, w, strategy) for b, w, strategy in waves]
        if opts.coldstart:
            steps += [partial(self._cold, rep, None)]
            steps += [partial(self._cold, rep, cold) for cold in colds]
        return steps

    def _start_hook(self) -> None:
        port = free_port()
        self.hook_url = f"http://127.0.0.1:{port}/sync"
        argv = [sys.executable, "-m", "fanoutbench", "hook", "--port", str(port)]
        self.hook = start_server(self.h, argv, self.env, self.logs / "hook.log", port)

    def _record(self, rec: dict[str, Any]) -> None:
        rec.update(
            n=self.opts.n,
            k=self.opts.k,
            nproc=os.cpu_count(),
            loadavg=os.getloadavg()[0],
            server=self.version,
            ts=time.time(),
        )
        self.records.append(rec)
        with self.opts.out.open("ab") as f:
            f.write(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS) + b"\n")

    # --- raw -----------------------------------------------------------------------------------

    async def _raw(self, rep: int, *, watched: bool) -> None:
        """The harness's raw suite in this process (one run: create and update waves), alone or
        with the idle watchers running."""
        with tempfile.TemporaryDirectory() as tmp:
            pid_dir = Path(tmp)
            watchers = self._start_watchers() if watched else None
            pids = dict(self.pids)
            if watchers is not None:
                pids[report.WATCHERS] = watchers.pid
            for name, pid in pids.items():
                (pid_dir / f"{name}.pid").write_text(str(pid))
            out = pid_dir / "raw.jsonl"
            args = SimpleNamespace(
                kubeconfig=self.kubeconfig,
                pid_dir=str(pid_dir),
                out=str(out),
                label=report.WATCHED if watched else report.RAW,
                n=self.opts.n,
                k=self.opts.k,
                runs=1,
                concurrency=self.opts.concurrency,
                data_bytes=100,
                update=True,
            )
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    await self.h.runner.raw_suite(args)
            finally:
                if watchers is not None:
                    _stop(watchers)
            for line in out.read_bytes().splitlines():
                self._record({**orjson.loads(line), "repeat": rep})

    def _start_watchers(self) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "loadtest.bench._watchers", "--kubeconfig", self.kubeconfig]
        proc = subprocess.Popen(
            argv, env=self.env, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the first list of every informer is in, or it failed
        if line.strip() != "synced":
            _stop(proc)
            raise RuntimeError(
                f"the idle watchers did not sync (exit code {proc.returncode}, {line!r})"
            )
        return proc

    # --- metashard -----------------------------------------------------------------------------

    def _metashard(
        self, build: Build, workers: int, port: int, name: str, strategy: str = report.DYNAMIC
    ) -> Any:
        args = run_args(
            processes=workers, kubeconfig=self.kubeconfig, metrics_port=port, strategy=strategy
        )
        return build.start(args, env=self.env, logfile=self.logs / f"{name}.log")

    async def _namespace(self, suffix: str = "") -> str:
        ns = f"fanout-{uuid.uuid4().hex[:6]}{suffix}"
        await self.h.runner.create_namespace(self.kube, ns)
        return ns

    async def _metashard_waves(self, rep: int, build: Build, workers: int, strategy: str) -> None:
        h, opts, kube = self.h, self.opts, self.kube
        label = report.metashard_label(workers, strategy, build=build.name)
        ns, warm_ns = await self._namespace(), await self._namespace("-warm")
        port = free_port()
        proc = self._metashard(build, workers, port, f"{label}-{rep}-{ns}", strategy)
        target = _Target(
            proc=proc, roles=RoleCpu(proc.p.pid), port=port, fresh=False, build=build.name
        )
        checker = h.checker.Checker(kube, ns, opts.n, opts.k)
        try:
            warm = h.checker.Checker(kube, warm_ns, 1, opts.k)
            await warm.start()
            warm.set_target("warm")
            await h.runner.create_parents(kube, warm_ns, 1, opts.k, "warm", 1)
            converged = await self._converge(warm, target, f"{label} warm-up")
            await warm.stop()
            if not converged:
                raise RuntimeError(
                    f"{label} did not converge the warm-up parent; see {proc.logfile}"
                )
            await checker.start()
            for wave in report.WAVES:
                data = h.workload.payload(f"{wave}{rep}", 100)
                if wave == "create":
                    action = h.runner.create_parents(
                        kube, ns, opts.n, opts.k, data, opts.concurrency
                    )
                else:
                    action = h.runner.patch_parents_data(kube, ns, opts.n, data, opts.concurrency)
                await self._wave(label, wave, rep, data, checker, target, action)
        finally:
            await checker.stop()
            proc.stop()
            await h.runner.delete_namespaces(kube, [ns, warm_ns])

    async def _converge(self, checker: Any, target: _Target, what: str) -> bool:
        """Wait for ``checker``; False on timeout or when the process ended (unexpectedly: a
        ``raw-cold`` client that exited 0 has done its writes, and its result is awaited)."""
        deadline = time.monotonic() + self.opts.timeout
        while (left := deadline - time.monotonic()) > 0:
            if await checker.wait(min(10.0, left)):
                return True
            proc = target.proc
            if (
                proc is not None
                and not proc.alive()
                and not (target.may_exit and proc.p.returncode == 0)
            ):
                print(
                    f"  {what}: exited with {proc.p.returncode}; see {proc.logfile}",
                    file=sys.stderr,
                )
                return False
            print(f"  {what}: {checker.progress()}", file=sys.stderr, flush=True)
        return False

    async def _wave(
        self,
        label: str,
        wave: str,
        rep: int,
        data: str,
        checker: Any,
        target: _Target,
        action: Awaitable[Any],
    ) -> None:
        """Time ``action`` until ``checker`` sees the job converged, and record the wave."""
        h = self.h
        checker.set_target(data)
        await self.meter.settle()
        await h.runner.warm_connections(self.kube, checker.ns, self.opts.concurrency)
        req0 = await h.runner.api_requests(self.kube)
        hook0 = self.hook.cpu.sample()
        scrape0 = (
            None
            if target.fresh or not target.port
            else await asyncio.to_thread(_scrape, target.port)
        )
        procs0 = target.roles.sample() if target.roles and not target.fresh else {}
        box0, cpu0, t0 = busy_seconds(), self.meter.snap(), time.perf_counter()
        await action
        ok = await self._converge(checker, target, f"{label} {wave}")
        t1 = checker.converged_at if ok and checker.converged_at else time.perf_counter()
        counts = None
        if ok and target.port:
            counts = await self._quiet(target.port)
        quiet = time.perf_counter()
        cpu = h.cpu.CpuMeter.delta(cpu0, self.meter.snap())
        cpu["box"] = round(busy_seconds() - box0, 3)
        rec: dict[str, Any] = {"mode": "controller", "label": label, "wave": wave, "repeat": rep}
        if target.build is not None:
            rec["build"] = self.identities[target.build]
        if target.roles is not None:
            rec["cpu_processes"] = per_role(procs0, target.roles.sample())
            cpu["controller"] = round(sum(rec["cpu_processes"].values()), 3)
        if target.port:
            if counts is None:
                counts = await asyncio.to_thread(_scrape, target.port)
            if scrape0 is not None:
                counts = counts.minus(scrape0)
            rec["reconciles"] = counts.per_worker
            rec["reconcile_buckets"] = {_bound(b): v for b, v in counts.buckets.items()}
        cpu["hook"] = round(self.hook.cpu.sample() - hook0, 3)
        rec.update(
            seconds=round(t1 - t0, 3),
            measured_seconds=round(quiet - t0, 3),
            cpu=cpu,
            requests=h.runner.requests_delta(req0, await h.runner.api_requests(self.kube)),
            converged=ok,
            progress=checker.progress(),
        )
        self._record(rec)
        if not ok:
            raise RuntimeError(
                f"{label} {wave}: not converged ({checker.progress()}); logs in {self.logs}"
            )

    async def _quiet(self, port: int) -> report.Reconciles:
        """Wait until the controller has stopped reconciling: its reconcile count unchanged
        over ``QUIET_WINDOW`` (at most ``QUIET_MAX`` seconds); the last scrape. A wave's work
        does not end when it converged: writes of the wave's own reconciles queue their keys
        again (the hooks must see the children they created), and under a long queue those
        reconciles run after the last parent converged."""
        deadline = time.monotonic() + QUIET_MAX
        last = await asyncio.to_thread(_scrape, port)
        while time.monotonic() < deadline:
            await asyncio.sleep(QUIET_WINDOW)
            now = await asyncio.to_thread(_scrape, port)
            if sum(now.per_worker.values()) == sum(last.per_worker.values()):
                return now
            last = now
        return last

    # --- cold start ----------------------------------------------------------------------------

    async def _cold(self, rep: int, config: tuple[Build, int] | None) -> None:
        """N parents waiting, then the clock starts and the process is spawned: ``raw-cold``
        (config None) or metashard (build, workers)."""
        h, opts, kube = self.h, self.opts, self.kube
        if config is None:
            label = report.RAW_COLD
        else:
            label = report.metashard_label(config[1], build=config[0].name)
        ns = await self._namespace()
        data = h.workload.payload(f"cold{rep}", 100)
        await h.runner.create_parents(kube, ns, opts.n, opts.k, data, opts.concurrency)
        checker = h.checker.Checker(kube, ns, opts.n, opts.k)
        await checker.start()
        target = _Target(
            port=free_port() if config else None,
            fresh=True,
            may_exit=config is None,
            build=config[0].name if config else None,
        )

        async def spawn() -> None:
            if config is None:
                argv = [
                    *(
                        sys.executable,
                        "-m",
                        "loadtest.bench._coldraw",
                        "--kubeconfig",
                        self.kubeconfig,
                    ),
                    *("--namespace", ns, "--concurrency", str(opts.concurrency)),
                ]
                target.proc = h.runner.Proc(argv, self.env, self.logs / f"raw-cold-{rep}-{ns}.log")
                return
            assert target.port is not None
            build, workers = config
            target.proc = self._metashard(build, workers, target.port, f"{label}-cold-{rep}-{ns}")
            target.roles = RoleCpu(target.proc.p.pid)

        try:
            await self._wave(label, "coldstart", rep, data, checker, target, spawn())
        finally:
            await checker.stop()
            if target.proc is not None:
                target.proc.stop()
            await h.runner.delete_namespaces(kube, [ns])


def measured_builds(opts: Options) -> tuple[Build, ...]:
    """The builds a run measures: this source tree, then ``--baseline-src``'s if given."""
    this = Build(report.CURRENT, REPO)
    if opts.baseline_src is None:
        return (this,)
    return this, Build(report.BASELINE, opts.baseline_src)


def schedule(
    opts: Options, builds: Sequence[Build], rep: int
) -> tuple[list[tuple[Build, int, str]], list[tuple[Build, int]]]:
    """The metashard configurations of repeat ``rep`` in the order they run: the waves'
    (build, workers, apply strategy) and the cold starts' (build, workers). The builds of one
    configuration run back to back; odd repeats run each list in reverse, so that no build,
    worker count or strategy always goes first."""
    waves = [
        (build, workers, strategy)
        for strategy, counts in ((report.DYNAMIC, opts.workers), (report.SSA, opts.ssa_workers))
        for workers in counts
        for build in builds
    ]
    colds = [(build, workers) for workers in opts.workers for build in builds]
    if rep % 2:
        waves.reverse()
        colds.reverse()
    return waves, colds


@dataclass(slots=True)
class _Target:
    """What a wave measures besides the cluster: the process it waits on (None until spawned),
    metashard's process tree and metrics port, whether they start at zero in the wave (a cold
    start), whether the process may exit before convergence is seen (raw-cold), and the name
    of the metashard build it runs (its ``identity()`` goes into the wave's JSON line)."""

    proc: Any = None
    roles: RoleCpu | None = None
    port: int | None = None
    fresh: bool = False
    may_exit: bool = False
    build: str | None = None


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


def _stop(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


if __name__ == "__main__":
    main(quick=False, argv=sys.argv[1:])
