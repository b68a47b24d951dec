"""The fanout benchmark's arithmetic and report, pure: JSON-line records in, lines of text out.

A record is one measured wave (the shared harness's fields plus this benchmark's):
``label``, ``wave`` (create, update, coldstart), ``repeat``, ``n``, ``seconds`` (until the job
converged), ``measured_seconds`` (metashard waves: until the controller was quiet, the span of
``cpu``, ``cpu_processes`` and ``reconciles``, since work a wave causes after it converged is
the wave's too), ``cpu`` (seconds per named process: ``apiserver`` when it is a local process,
``harness`` = the raw client's own process for raw waves, ``watchers`` = the idle informers'
process in ``raw+watchers`` waves, ``box`` = the whole machine's busy CPU in the controller
waves), ``requests`` (the API server's request counts per ``VERB resource``), and for
metashard ``cpu_processes`` (seconds per role: ``coordinator``, ``worker ID``), ``reconciles``
(per worker) and ``reconcile_buckets`` (the wave's cumulative reconcile-time histogram, upper
bound -> count).

Every figure is the median over the repeats of one (label, wave), and every row that has a
baseline measured in the same run prints its ratio to it:

- wall time against ``raw`` (the raw client writing exactly what a perfect controller writes)
  and against the **zero-cost-controller limit**: the raw wave time plus the API-server CPU
  seconds a do-nothing watcher adds (``raw+watchers`` minus ``raw``, both measured). Adding
  CPU seconds to wall seconds assumes the API server is on the critical path (true for the
  single-threaded embedded cluster); the measured ``raw+watchers`` wall time is printed too.
  Without a local API-server pid there is no CPU to add and the limit is that wall time.
  The idle watchers' own CPU per parent is printed beside it: the floor of the coordinator's
  ingest (decode, store) with nothing to route;
- CPU per parent against the raw client's CPU per parent, 2 workers against 1 (target <=
  1.15x), the coordinator's CPU per reconcile against a worker's (target <= 1/10);
- API writes per parent (``POST``, ``PUT``, ``PATCH``, ``APPLY`` (server-side apply) and
  ``DELETE`` requests of every client, the benchmark's own parent writes included) against
  the raw client's;
- a configuration under server-side apply (label ``metashard-Ww-ssa``) right after dynamic
  apply's ``metashard-Ww``, with its CPU and writes per parent against dynamic apply's;
- cold start against ``raw-cold``, measured: a fresh client process started at t0 that lists
  the N waiting parents and writes their children and status (process start included);
- with ``--baseline-src``, after each configuration of this build (``metashard-Ww``,
  ``metashard-Ww-ssa``; cold start included), the same configuration of the other build
  (``base-Ww``, ``base-Ww-ssa``): its seconds and CPU per parent, each followed by this
  build's against it (ratio this build / baseline).
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
WATCHERS = "watchers"  # the idle informers' process, in a raw+watchers record's ``cpu``
WAVES = ("create", "update")
COORDINATOR = "coordinator"
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE"})  # APPLY: server-side apply
DYNAMIC, SSA = "dynamic-apply", "server-side-apply"  # metashard run's --apply-strategy values
CURRENT, BASELINE = "metashard", "base"  # the builds: this source tree, --baseline-src's
_SSA_SUFFIX = "-ssa"


@dataclass(frozen=True, slots=True)
class Configuration:
    """What a metashard label names: worker processes, apply strategy and build."""

    workers: int
    strategy: str
    build: str


def metashard_label(workers: int, strategy: str = DYNAMIC, *, build: str = CURRENT) -> str:
    """The label of ``metashard run --processes workers --apply-strategy strategy`` of
    ``build``: ``metashard-2w``, ``metashard-2w-ssa``; ``base-2w`` for the ``--baseline-src``
    tree's."""
    return f"{build}-{workers}w" + (_SSA_SUFFIX if strategy == SSA else "")


def parse_label(label: str) -> Configuration | None:
    """The configuration of a ``metashard_label``; None for any other label."""
    build, dash, body = label.partition("-")
    if not dash or build not in (CURRENT, BASELINE):
        return None
    strategy = SSA if body.endswith(_SSA_SUFFIX) else DYNAMIC
    body = body.removesuffix(_SSA_SUFFIX)
    count = body.removesuffix("w")
    if not body.endswith("w") or not count.isdigit():
        return None
    return Configuration(int(count), strategy, build)


def configurations(records: Iterable[Record]) -> tuple[list[int], list[int]]:
    """The worker counts measured under dynamic apply and under server-side apply (by either
    build)."""
    parsed = {p for r in records if (p := parse_label(str(r.get("label", "")))) is not None}
    return (
        sorted({p.workers for p in parsed if p.strategy != SSA}),
        sorted({p.workers for p in parsed if p.strategy == SSA}),
    )


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


def other_load(r: Record) -> float | None:
    """Cores busy with processes outside the benchmark during the wave: the machine's busy
    CPU seconds less every process the benchmark measured, over the wave's seconds. Noise
    indicator only (by subtraction, and 0 when the API server is not a local process)."""
    cpu = r.get("cpu") or {}
    seconds = r.get("measured_seconds") or r.get("seconds")
    if "box" not in cpu or not seconds:
        return None
    ours = sum(float(v) for k, v in cpu.items() if k != "box")
    return max(0.0, float(cpu["box"]) - ours) / float(seconds)


def writes(r: Record) -> float | None:
    """The wave's API write requests (``WRITE_VERBS``, all clients); None if not counted."""
    requests = r.get("requests")
    if requests is None:
        return None
    return float(sum(v for key, v in requests.items() if key.partition(" ")[0] in WRITE_VERBS))


def reconciles(r: Record) -> float | None:
    counts = r.get("reconciles")
    return None if counts is None else float(sum(counts.values()))


def role_per_reconcile(role: str, r: Record) -> float | None:
    """CPU seconds per reconcile of one role: the coordinator's over all reconciles, a
    worker's (``worker ID``) over its own (the ``worker`` label of its metrics)."""
    cpu = (r.get("cpu_processes") or {}).get(role)
    counts = r.get("reconciles") or {}
    count = (
        sum(counts.values()) if role == COORDINATOR else counts.get(role.removeprefix("worker "))
    )
    return None if cpu is None or not count else float(cpu) / float(count)


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


def _seconds(r: Record) -> float:
    return float(r["seconds"])


@dataclass(frozen=True, slots=True)
class _Wave:
    """One wave's medians and same-run baselines, for the report's rows."""

    records: list[Record]
    wave: str
    n: int
    raw_seconds: float
    raw_apiserver: float | None
    raw_client_ms: float | None  # the raw client's CPU per parent
    raw_writes: float | None  # the raw client's API writes per parent

    def median(self, label: str, fn: Callable[[Record], Any]) -> Any:
        return median(self.records, label, self.wave, fn)

    def seconds_row(self, label: str, value: float, **ratio: Any) -> str:
        return format_row(label, value, "s", digits=2, **ratio)

    def apiserver_row(self, label: str) -> list[str]:
        cpu = self.median(label, _cpu("apiserver"))
        if cpu is None:
            return []
        return [self.seconds_row("  API server CPU", cpu, baseline=self.raw_apiserver, vs="raw")]


def _baseline_rows(w: _Wave) -> tuple[list[str], float | None]:
    """The raw and raw+watchers rows, and the zero-cost-controller limit (None: not measured)."""
    out = [w.seconds_row("raw client, seconds", w.raw_seconds)]
    if w.raw_apiserver is not None:
        out.append(w.seconds_row("  API server CPU", w.raw_apiserver))
    if w.raw_client_ms is not None:
        out.append(format_row("  raw client CPU per parent", w.raw_client_ms, "ms", digits=3))
    if w.raw_writes is not None:
        out.append(format_row("  API writes per parent", w.raw_writes, "", digits=2))
    watched = w.median(WATCHED, _seconds)
    if watched is None:
        return out, None
    out.append(
        w.seconds_row(
            "raw client + idle watchers, seconds", watched, baseline=w.raw_seconds, vs="raw"
        )
    )
    out += w.apiserver_row(WATCHED)
    ingest = w.median(WATCHED, _cpu(WATCHERS))
    if ingest is not None:
        out.append(format_row("  idle watchers CPU per parent", ingest * 1e3 / w.n, "ms", digits=3))
    cpu = w.median(WATCHED, _cpu("apiserver"))
    summary = {"seconds": watched, "cpu": {} if cpu is None else {"apiserver": cpu}}
    limit = zero_cost_limit(w.raw_seconds, w.raw_apiserver, summary)
    if limit is not None:
        out.append(
            w.seconds_row("zero-cost-controller limit", limit, baseline=w.raw_seconds, vs="raw")
        )
    return out, limit


@dataclass(frozen=True, slots=True)
class _PerParent:
    """One configuration's CPU (ms, all its processes) and API writes per parent."""

    cpu_ms: float | None
    writes: float | None


def _metashard_rows(w: _Wave, label: str, limit: float | None) -> tuple[list[str], _PerParent]:
    """One metashard configuration's rows, and its figures per parent (None: not measured)."""
    seconds = w.median(label, _seconds)
    if seconds is None:
        return [], _PerParent(None, None)
    out = [w.seconds_row(f"{label}, seconds", seconds, baseline=w.raw_seconds, vs="raw")]
    if limit is not None:
        out.append(
            w.seconds_row(f"{label}, seconds", seconds, baseline=limit, vs="limit", target="<= 1.1")
        )
    out += w.apiserver_row(label)
    cpu = w.median(label, controller_cpu)
    per_parent = None if cpu is None else cpu * 1e3 / w.n
    if per_parent is not None:
        out.append(
            format_row(
                "  CPU per parent, all processes",
                per_parent,
                "ms",
                baseline=w.raw_client_ms,
                vs="raw client",
                target="<= 1.0 ms",
                digits=3,
            )
        )
    count = w.median(label, writes)
    writes_per_parent = None if count is None else count / w.n
    if writes_per_parent is not None:
        out.append(
            format_row(
                "  API writes per parent",
                writes_per_parent,
                "",
                baseline=w.raw_writes,
                vs="raw client",
                digits=2,
            )
        )
    out += _per_role_rows(w.records, label, w.wave, w.n)
    count = w.median(label, reconciles)
    if count is not None:
        out.append(format_row("  reconciles per parent", count / w.n, "", digits=2))
    share = w.median(label, coordinator_share)
    if share is not None:
        out.append(
            format_row(
                "  coordinator/worker CPU per reconcile", share, "x", target="<= 0.1", digits=3
            )
        )
    other = w.median(label, other_load)
    if other is not None:
        out.append(format_row("  other load on the machine (noise)", other, "cores", digits=2))
    for q, target in ((0.5, ""), (0.99, "<= 100 ms" if w.wave == "create" else "")):
        value = w.median(label, quantile_of(q))
        if value is not None:
            name = f"  p{round(q * 100)} reconcile latency"
            out.append(format_row(name, value * 1e3, "ms", target=target))
    return out, _PerParent(per_parent, writes_per_parent)


def _strategy_rows(workers: int, dynamic: _PerParent, ssa: _PerParent) -> list[str]:
    """Server-side apply against dynamic apply, same worker count: CPU and writes per parent."""
    out = []
    if ssa.cpu_ms is not None and dynamic.cpu_ms is not None:
        out.append(
            format_row(
                f"CPU per parent, {workers}w server-side vs dynamic apply",
                ssa.cpu_ms,
                "ms",
                baseline=dynamic.cpu_ms,
                vs="dynamic",
                digits=3,
            )
        )
    if ssa.writes is not None and dynamic.writes is not None:
        out.append(
            format_row(
                f"writes per parent, {workers}w server-side vs dynamic apply",
                ssa.writes,
                "",
                baseline=dynamic.writes,
                vs="dynamic",
                digits=2,
            )
        )
    return out


def _build_rows(
    records: list[Record], wave: str, n: int, *, workers: int, strategy: str = DYNAMIC
) -> list[str]:
    """The ``--baseline-src`` build's seconds and CPU per parent in one configuration, each
    followed by this build's against it (ratio this build / baseline); none when the baseline
    build was not measured."""
    ours = metashard_label(workers, strategy)
    theirs = metashard_label(workers, strategy, build=BASELINE)
    out = []
    figures: list[tuple[str, Callable[[Record], float | None], str, float, int]] = [
        ("seconds", _seconds, "s", 1.0, 2),
        ("CPU per parent, all processes", controller_cpu, "ms", 1e3 / n, 3),
    ]
    for what, fn, unit, scale, digits in figures:
        base = median(records, theirs, wave, fn)
        if base is None:
            continue
        out.append(format_row(f"{theirs}, {what}", base * scale, unit, digits=digits))
        value = median(records, ours, wave, fn)
        if value is not None:
            out.append(
                format_row(
                    f"  {ours} against {theirs}",
                    value * scale,
                    unit,
                    baseline=base * scale,
                    vs=theirs,
                    digits=digits,
                )
            )
    return out


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
    for role in roles:
        cpu = median(records, label, wave, partial(_role, role))
        if cpu is None:
            continue
        lines.append(format_row(f"    {role}: CPU per parent", cpu * 1e3 / n, "ms", digits=3))
        each = median(records, label, wave, partial(role_per_reconcile, role))
        if each is not None:
            lines.append(format_row(f"    {role}: CPU per reconcile", each * 1e6, "us"))
    return lines


def _cold_rows(records: list[Record], n: int, workers: list[int]) -> list[str]:
    cold = median(records, RAW_COLD, "coldstart", _seconds)
    if cold is None:
        return []
    out = [
        f"\ncold start: N={n} parents waiting, process start included",
        format_row(
            "raw-cold: new client process lists them, writes children + status",
            cold,
            "s",
            digits=2,
        ),
    ]
    for count in workers:
        label = metashard_label(count)
        seconds = median(records, label, "coldstart", _seconds)
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
        out += _build_rows(records, "coldstart", n, workers=count)
    return out


def split(records: Iterable[Record]) -> dict[tuple[int, int], list[Record]]:
    """Records grouped by (N, K), each group one report."""
    groups: dict[tuple[int, int], list[Record]] = {}
    for r in records:
        groups.setdefault((int(r["n"]), int(r["k"])), []).append(r)
    return groups


def report(
    records: list[Record], *, workers: Iterable[int], ssa_workers: Iterable[int] = ()
) -> list[str]:
    """The report's lines (see the module docstring); all records of one N and K.
    ``ssa_workers``: the worker counts also run under server-side apply."""
    workers, ssa_workers = list(workers), list(ssa_workers)
    first = next(iter(records), None)
    if first is None:
        return ["  no measurements"]
    n = int(first["n"])
    if any((r["n"], r["k"]) != (n, first["k"]) for r in records):
        raise ValueError("records of different N or K: report them separately (see split)")
    out: list[str] = []
    for wave in WAVES:
        raw_seconds = median(records, RAW, wave, _seconds)
        if raw_seconds is None:
            continue
        raw_client = median(records, RAW, wave, _cpu("harness"))
        raw_writes = median(records, RAW, wave, writes)
        w = _Wave(
            records,
            wave,
            n,
            raw_seconds,
            median(records, RAW, wave, _cpu("apiserver")),
            raw_client * 1e3 / n if raw_client else None,
            None if raw_writes is None else raw_writes / n,
        )
        out.append(f"\n{wave} wave: N={n} parents x K={first['k']} ConfigMaps + status")
        rows, limit = _baseline_rows(w)
        out += rows
        per_parent: dict[int, float] = {}
        for count in dict.fromkeys([*workers, *ssa_workers]):
            dynamic = _PerParent(None, None)
            if count in workers:
                rows, dynamic = _metashard_rows(w, metashard_label(count), limit)
                out += rows + _build_rows(records, wave, n, workers=count)
                if dynamic.cpu_ms is not None:
                    per_parent[count] = dynamic.cpu_ms
            if count in ssa_workers:
                rows, ssa = _metashard_rows(w, metashard_label(count, SSA), limit)
                out += rows + _build_rows(records, wave, n, workers=count, strategy=SSA)
                out += _strategy_rows(count, dynamic, ssa)
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
    return out + _cold_rows(records, n, workers)
