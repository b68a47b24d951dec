"""The fanout benchmark's arithmetic and report, pure: JSON-line records in, lines of text out.

A record is one measured wave (the shared harness's fields plus this benchmark's):
``label``, ``wave`` (create, update, coldstart), ``repeat``, ``n``, ``seconds``, ``cpu``
(seconds per named process: ``apiserver`` when it is a local process, ``harness`` = the
raw client's own process for raw waves), ``requests``, and for metashard ``cpu_processes``
(seconds per role: ``coordinator``, ``worker ID``), ``reconciles`` (per worker) and
``reconcile_buckets`` (the wave's cumulative reconcile-time histogram, upper bound -> count).

Every figure is the median over the repeats of one (label, wave), and every row that has a
baseline measured in the same run prints its ratio to it:

- wall time against ``raw`` (the raw client writing exactly what a perfect controller writes)
  and against the **zero-cost-controller limit**: the raw wave time plus the API-server CPU
  seconds a do-nothing watcher adds (``raw+watchers`` minus ``raw``, both measured). Adding
  CPU seconds to wall seconds assumes the API server is on the critical path (true for the
  single-threaded embedded cluster); the measured ``raw+watchers`` wall time is printed too.
  Without a local API-server pid there is no CPU to add and the limit is that wall time;
- CPU per parent against the raw client's CPU per parent, 2 workers against 1 (target <=
  1.15x), the coordinator's CPU per reconcile against a worker's (target <= 1/10);
- cold start against ``raw-cold``, measured: a fresh client process started at t0 that lists
  the N waiting parents and writes their children and status (process start included).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from loadtest.bench._report import format_row

Record = Mapping[str, Any]
RAW, WATCHED, RAW_COLD = "raw", "raw+watchers", "raw-cold"
WAVES = ("create", "update")
COORDINATOR = "coordinator"


def metashard_label(workers: int) -> str:
    return f"metashard-{workers}w"


# --- metrics ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reconciles:
    """The reconcile metrics of one scrape: totals per worker and the merged histogram."""

    per_worker: dict[str, float]
    buckets: dict[float, float]

    def minus(self, earlier: Reconciles) -> Reconciles:
        """What happened between ``earlier`` and this scrape (counters only grow)."""
        return Reconciles(
            {w: v - earlier.per_worker.get(w, 0.0) for w, v in self.per_worker.items()},
            {b: v - earlier.buckets.get(b, 0.0) for b, v in self.buckets.items()},
        )


def _labels(line: str) -> dict[str, str]:
    inner = line[line.index("{") + 1 : line.rindex("}")]
    out = {}
    for part in inner.split('",'):
        key, _, value = part.partition('="')
        out[key.strip(",")] = value.rstrip('"')
    return out


def parse_reconciles(text: str) -> Reconciles:
    """``controller_runtime_reconcile_total`` per ``worker`` label (all controllers and
    results) and ``controller_runtime_reconcile_time_seconds`` buckets summed over all series,
    from a Prometheus text exposition."""
    per_worker: dict[str, float] = {}
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith("controller_runtime_reconcile_total{"):
            worker = _labels(line).get("worker", "")
            per_worker[worker] = per_worker.get(worker, 0.0) + float(line.rpartition(" ")[2])
        elif line.startswith("controller_runtime_reconcile_time_seconds_bucket{"):
            le = _labels(line)["le"]
            bound = math.inf if le == "+Inf" else float(le)
            buckets[bound] = buckets.get(bound, 0.0) + float(line.rpartition(" ")[2])
    return Reconciles(per_worker, buckets)


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus's ``histogram_quantile``: linear interpolation inside the bucket holding the
    quantile (from 0 for the first bucket); the highest finite bound if it falls in +Inf.
    None for an empty histogram."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


# --- arithmetic -------------------------------------------------------------------------------


def median(records: Iterable[Record], label: str, wave: str, fn: Callable[[Record], Any]) -> Any:
    """The median of ``fn(record)`` over the records of (label, wave) where it is not None."""
    values = [fn(r) for r in records if r.get("label") == label and r.get("wave") == wave]
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def zero_cost_limit(
    raw_seconds: float, raw_apiserver_cpu: float | None, watched: Record | None
) -> float | None:
    """The zero-cost-controller limit (see the module docstring), or None without the
    measurements it needs."""
    if watched is None:
        return None
    cpu = (watched.get("cpu") or {}).get("apiserver")
    if cpu is None or raw_apiserver_cpu is None:
        return float(watched["seconds"])
    return raw_seconds + max(0.0, float(cpu) - raw_apiserver_cpu)


def _cpu(name: str) -> Callable[[Record], float | None]:
    def get(r: Record) -> float | None:
        value = (r.get("cpu") or {}).get(name)
        return None if value is None else float(value)

    return get


def controller_cpu(r: Record) -> float | None:
    """All metashard processes' CPU seconds in the wave (sum of the per-process figures)."""
    procs = r.get("cpu_processes")
    return None if procs is None else float(sum(procs.values()))


def role_cpu(r: Record, worker: bool) -> float | None:
    procs = r.get("cpu_processes")
    if procs is None:
        return None
    return float(sum(v for role, v in procs.items() if (role != COORDINATOR) == worker))


def reconciles(r: Record) -> float | None:
    counts = r.get("reconciles")
    return None if counts is None else float(sum(counts.values()))


def per_reconcile(r: Record, worker: bool) -> float | None:
    cpu, count = role_cpu(r, worker), reconciles(r)
    return None if cpu is None or not count else cpu / count


def coordinator_share(r: Record) -> float | None:
    """Coordinator CPU per reconcile / worker CPU per reconcile (workers taken together)."""
    coord, work = per_reconcile(r, False), per_reconcile(r, True)
    return None if coord is None or not work else coord / work


def quantile_of(q: float) -> Callable[[Record], float | None]:
    def get(r: Record) -> float | None:
        buckets = r.get("reconcile_buckets")
        if not buckets:
            return None
        return histogram_quantile(q, {float(k): float(v) for k, v in buckets.items()})

    return get


# --- the report -------------------------------------------------------------------------------


def _role(role: str, r: Record) -> float | None:
    return (r.get("cpu_processes") or {}).get(role)


def _per_role_rows(records: list[Record], label: str, wave: str, n: int) -> list[str]:
    roles = sorted(
        {
            role
            for r in records
            if r.get("label") == label and r.get("wave") == wave
            for role in (r.get("cpu_processes") or {})
        },
        key=lambda role: (role != COORDINATOR, role),
    )
    lines = []
    count = median(records, label, wave, reconciles)
    for role in roles:
        cpu = median(records, label, wave, partial(_role, role))
        if cpu is None:
            continue
        lines.append(format_row(f"    {role}: CPU per parent", cpu * 1e3 / n, "ms", digits=3))
        if count:
            lines.append(format_row(f"    {role}: CPU per reconcile", cpu * 1e6 / count, "us"))
    return lines


def report(records: list[Record], *, workers: Iterable[int]) -> list[str]:
    """The report's lines (see the module docstring)."""
    out: list[str] = []
    workers = list(workers)
    first = next(iter(records), None)
    if first is None:
        return ["  no measurements"]
    n = int(first["n"])
    raw_api = {w: median(records, RAW, w, _cpu("apiserver")) for w in WAVES}
    raw_cpu = {w: median(records, RAW, w, _cpu("harness")) for w in WAVES}
    for wave in WAVES:
        raw_s = median(records, RAW, wave, lambda r: r["seconds"])
        if raw_s is None:
            continue
        out.append(f"\n{wave} wave: N={n} parents x K={first['k']} ConfigMaps + status")
        out.append(format_row("raw client, seconds", raw_s, "s", digits=2))
        if raw_api[wave] is not None:
            out.append(format_row("  API server CPU", raw_api[wave], "s", digits=2))
        if raw_cpu[wave] is not None:
            out.append(
                format_row("  raw client CPU per parent", raw_cpu[wave] * 1e3 / n, "ms", digits=3)
            )
        watched = [r for r in records if r.get("label") == WATCHED and r.get("wave") == wave]
        limit = None
        if watched:
            w_s = median(records, WATCHED, wave, lambda r: r["seconds"])
            out.append(
                format_row(
                    "raw client + idle watchers, seconds",
                    w_s,
                    "s",
                    digits=2,
                    baseline=raw_s,
                    vs="raw",
                )
            )
            w_api = median(records, WATCHED, wave, _cpu("apiserver"))
            if w_api is not None:
                out.append(
                    format_row(
                        "  API server CPU", w_api, "s", digits=2, baseline=raw_api[wave], vs="raw"
                    )
                )
            summary = {"seconds": w_s, "cpu": {"apiserver": w_api} if w_api is not None else {}}
            limit = zero_cost_limit(raw_s, raw_api[wave], summary)
            if limit is not None:
                out.append(
                    format_row(
                        "zero-cost-controller limit", limit, "s", digits=2, baseline=raw_s, vs="raw"
                    )
                )
        per_parent: dict[int, float] = {}
        for count in workers:
            label = metashard_label(count)
            seconds = median(records, label, wave, lambda r: r["seconds"])
            if seconds is None:
                continue
            out.append(
                format_row(f"{label}, seconds", seconds, "s", digits=2, baseline=raw_s, vs="raw")
            )
            if limit is not None:
                out.append(
                    format_row(
                        f"{label}, seconds",
                        seconds,
                        "s",
                        digits=2,
                        baseline=limit,
                        vs="limit",
                        target="<= 1.1",
                    )
                )
            api = median(records, label, wave, _cpu("apiserver"))
            if api is not None:
                out.append(
                    format_row(
                        "  API server CPU", api, "s", digits=2, baseline=raw_api[wave], vs="raw"
                    )
                )
            cpu = median(records, label, wave, controller_cpu)
            if cpu is not None:
                per_parent[count] = cpu * 1e3 / n
                base = raw_cpu[wave] * 1e3 / n if raw_cpu[wave] else None
                out.append(
                    format_row(
                        "  CPU per parent, all processes",
                        per_parent[count],
                        "ms",
                        baseline=base,
                        vs="raw client",
                        target="<= 1.0 ms",
                        digits=3,
                    )
                )
            out.extend(_per_role_rows(records, label, wave, n))
            count_r = median(records, label, wave, reconciles)
            if count_r is not None:
                out.append(format_row("  reconciles per parent", count_r / n, "", digits=2))
            share = median(records, label, wave, coordinator_share)
            if share is not None:
                out.append(
                    format_row(
                        "  coordinator/worker CPU per reconcile",
                        share,
                        "x",
                        target="<= 0.1",
                        digits=3,
                    )
                )
            for q, target in ((0.5, ""), (0.99, "<= 100 ms" if wave == "create" else "")):
                value = median(records, label, wave, quantile_of(q))
                if value is not None:
                    out.append(
                        format_row(
                            f"  p{round(q * 100)} reconcile latency",
                            value * 1e3,
                            "ms",
                            target=target,
                        )
                    )
        if 1 in per_parent and 2 in per_parent:
            out.append(
                format_row(
                    "CPU per parent, 2 workers vs 1",
                    per_parent[2],
                    "ms",
                    baseline=per_parent[1],
                    vs="1 worker",
                    target="<= 1.15",
                    digits=3,
                )
            )
    cold = median(records, RAW_COLD, "coldstart", lambda r: r["seconds"])
    if cold is not None:
        out.append(f"\ncold start: N={n} parents waiting, process start included")
        out.append(
            format_row(
                "raw-cold: new client process lists them, writes children + status", cold, "s"
            )
        )
        for count in workers:
            label = metashard_label(count)
            seconds = median(records, label, "coldstart", lambda r: r["seconds"])
            if seconds is not None:
                out.append(
                    format_row(
                        f"{label}, seconds",
                        seconds,
                        "s",
                        digits=2,
                        baseline=cold,
                        vs="raw-cold",
                        target="<= 1.3",
                    )
                )
    return out
