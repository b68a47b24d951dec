"""The fanout job: N parents x K child ConfigMaps plus status, timed against a raw client.

Runs the reference harness in ``../shared/bench`` (``fanoutbench``) against the embedded
cluster, in one run and interleaved:
- ``raw``: a tuned aiohttp client writing exactly the objects a perfect controller writes
  (the API-server limit for the job; the baseline);
- ``metashard``: ``metashard run`` with 1 and with 2 worker processes, driven by the harness's
  sync-hook server and CompositeController (create wave, update wave, and a cold start with the
  N parents waiting);
- ``metashard-2w-ssa``: ``metashard run`` with 2 workers under ``--apply-strategy
  server-side-apply`` (create and update waves), against dynamic apply's ``metashard-2w``;
- ``kopf``: the harness's kopf operator (the peer).
For each it prints the wave time and its ratio to raw, metashard's CPU per parent (all its
processes), API writes per parent, and for metashard its reconciles/s and p50/p99 reconcile
latency from the workers' ``controller_runtime_reconcile_time_seconds``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Any

import orjson

from loadtest.apiserver.background import ClusterProcess
from loadtest.bench._report import header, row
from loadtest.processes import REPO, free_port

SHARED_BENCH = REPO.parent / "shared" / "bench"
WRITE_VERBS = ("POST", "PUT", "PATCH", "APPLY", "DELETE")  # APPLY: server-side apply PATCHes
# The runs under another apply strategy: (label, worker processes, --apply-strategy).
STRATEGY_RUNS = (("metashard-2w-ssa", 2, "server-side-apply"),)


def _metashard_cmd(workers: int, metrics_port: int, strategy: str = "dynamic-apply") -> str:
    return (
        f"{{python}} -m manager.cli run --processes {workers} --kubeconfig {{kubeconfig}} "
        f"--metrics-address 127.0.0.1:{metrics_port} --health-probe-bind-address 0 "
        f"--log-format json --log-level warning --apply-strategy {strategy}"
    )


class Scraper:
    """Polls /metrics while a run lasts (the coordinator's serves every worker's too);
    keeps each port's last sample."""

    def __init__(self, ports: list[int]) -> None:
        self._ports = ports
        self._last: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.25):
            for port in self._ports:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                        self._last[port] = r.read().decode()
                except OSError:
                    pass

    def reconciles(self) -> tuple[float, dict[float, float]]:
        """Total reconciles and the merged reconcile-time histogram (upper bound -> count)."""
        total = 0.0
        buckets: dict[float, float] = {}
        for text in self._last.values():
            for line in text.splitlines():
                if line.startswith("controller_runtime_reconcile_total{"):
                    total += float(line.rpartition(" ")[2])
                elif line.startswith("controller_runtime_reconcile_time_seconds_bucket{"):
                    le = line.split('le="', 1)[1].split('"', 1)[0]
                    bound = float("inf") if le == "+Inf" else float(le)
                    buckets[bound] = buckets.get(bound, 0.0) + float(line.rpartition(" ")[2])
        return total, buckets


def _quantile(buckets: dict[float, float], q: float) -> float | None:
    """The upper bound of the bucket holding quantile ``q`` (a cumulative histogram)."""
    if not buckets:
        return None
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]
    for bound in bounds:
        if total and buckets[bound] >= q * total:
            return bound
    return None


def _harness(args: list[str], *, env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "fanoutbench", *args],
        cwd=SHARED_BENCH,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _writes(line: dict[str, Any]) -> float:
    requests = line.get("requests") or {}
    return sum(
        count
        for key, count in requests.items()
        if key.split(" ")[0] in WRITE_VERBS
        and key.split(" ")[1].split("/")[0] in ("configmaps", "fanouts")
    )


def _cpu_ms(line: dict[str, Any]) -> float:
    return float((line.get("cpu") or {}).get("controller", 0.0)) * 1e3


def main(quick: bool) -> None:
    if not SHARED_BENCH.is_dir():
        print(f"  skipped: the fanout harness is expected at {SHARED_BENCH}")
        return
    n = 300 if quick else 2000
    k = 3
    runs = 1 if quick else 2
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.jsonl"
        pid_dir = Path(tmp) / "pids"
        pid_dir.mkdir()
        cluster = ClusterProcess().start()
        try:
            assert cluster.process is not None
            (pid_dir / "apiserver.pid").write_text(str(cluster.process.pid))
            env = {
                **os.environ,
                "KUBECONFIG": str(cluster.kubeconfig),
                "FANOUTBENCH_PID_DIR": str(pid_dir),
                "PYTHONPATH": os.pathsep.join([str(SHARED_BENCH), str(REPO)]),
            }
            _harness(["install", "--metacontroller"], env=env)
            common = ["--n", str(n), "--k", str(k), "--runs", "1", "--out", str(results)]
            logs = ["--log-dir", str(Path(tmp) / "logs")]
            reconciles: dict[int, list[tuple[float, dict[float, float]]]] = {1: [], 2: []}
            for _ in range(runs):
                _harness(["raw", *common, "--concurrency", "128", "--label", "raw"], env=env)
                for w in (1, 2):
                    flags = ["--label", f"metashard-{w}w", "--controller-cmd"]
                    port = free_port()
                    with Scraper([port]) as scraper:
                        _harness(
                            [
                                "controller",
                                *common,
                                *logs,
                                "--hook",
                                *flags,
                                _metashard_cmd(w, port),
                            ],
                            env=env,
                        )
                    reconciles[w].append(scraper.reconciles())
                    cold = ["controller", *common, *logs, "--hook", "--coldstart", *flags]
                    _harness([*cold, _metashard_cmd(w, free_port())], env=env)
                for label, w, strategy in STRATEGY_RUNS:
                    command = _metashard_cmd(w, free_port(), strategy)
                    flags = ["--hook", "--label", label, "--controller-cmd", command]
                    _harness(["controller", *common, *logs, *flags], env=env)
                if not quick:
                    _harness(["controller", *common, *logs, "--kopf", "--label", "kopf"], env=env)
        finally:
            cluster.stop()
        lines = [orjson.loads(x) for x in results.read_bytes().splitlines() if x]
    _report(lines, n, k)
    for w, samples in reconciles.items():
        label = f"metashard-{w}w"
        seconds = sum(
            _median(lines, label, wave, "seconds") or 0.0 for wave in ("create", "update")
        )
        total, buckets = samples[-1]
        header(f"{label}: reconciles over the create and update waves (last run)")
        if seconds:
            row("reconciles per second", total / seconds, "reconciles/s")
        row("reconciles per parent per wave", total / n / 2, "reconciles")
        for q in (0.5, 0.99):
            bound = _quantile(buckets, q)
            if bound is not None:
                row(f"p{int(q * 100)} reconcile latency (bucket upper bound)", bound * 1e3, "ms")


def _median(lines: list[dict[str, Any]], label: str, wave: str, key: str) -> float | None:
    values = [
        float(x[key])
        for x in lines
        if x.get("label") == label and x.get("wave") == wave and x.get(key) is not None
    ]
    return statistics.median(values) if values else None


def _report(lines: list[dict[str, Any]], n: int, k: int) -> None:
    def med(label: str, wave: str, fn: Any) -> float | None:
        values = [fn(x) for x in lines if x.get("label") == label and x.get("wave") == wave]
        return statistics.median(values) if values else None

    raw = {w: _median(lines, "raw", w, "seconds") for w in ("create", "update")}
    # The cold start's baseline: the raw create wave without its parent writes (4 of 5).
    raw["coldstart"] = raw["create"] * 4 / 5 if raw["create"] else None
    for label in ("metashard-1w", "metashard-2w", *(run[0] for run in STRATEGY_RUNS), "kopf"):
        header(f"{label}: N={n} parents x K={k} ConfigMaps (embedded cluster)")
        for wave in ("create", "update", "coldstart"):
            seconds = _median(lines, label, wave, "seconds")
            if seconds is None:
                continue
            base = raw.get(wave)
            ratio = f" (raw {base:.2f} s)" if base else ""
            row(f"{wave} wave, seconds{ratio}", seconds, "s", baseline=base)
            row(f"  {wave}: parents/s", n / seconds, "parents/s")
            cpu = med(label, wave, _cpu_ms)
            if cpu is not None:
                row(f"  {wave}: controller CPU per parent", cpu / n, "ms", target="<= 1 ms")
            writes = med(label, wave, _writes)
            if writes is not None:
                row(
                    f"  {wave}: API writes per parent (incl. harness)",
                    writes / n,
                    "writes",
                    target="5",
                )
