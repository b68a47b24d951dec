"""The scale benchmark's report, pure: its JSON-line records in, lines of text out.

One table per phase, one row per configuration (records of one N and K), and under it one
row per process (``coordinator``, ``worker ID``; ``controller`` for another controller,
``client`` for the raw one). A label and phase measured more than once (``--repeat``) is shown
by its median run (``median_runs``: the median seconds of its finished runs, the lower of the
two middle ones for an even count), and under it a line ``runs`` with every run's seconds
in round order, each with its ratio to the ``x PEER`` configuration's run of the same round
(to the raw client's without a peer). Columns:

- ``seconds``: the phase's time (see ``_scale_phases``); ``x raw`` against the raw client's
  in the same run (cold start and update wave), ``x PEER`` against the first other controller
  given (``--controller``) at the same hook latency;
- ``CPU s``: CPU seconds of all the configuration's processes (to quiet), per process below;
- ``peak MB``: the sum of the processes' peak RSS in the phase, per process below;
- ``writes``, ``LIST``: the API server's write requests (POST, PUT, PATCH, APPLY, DELETE: every
  client, the benchmark's own edits included) and LIST requests; ``relists``: metashard's
  ``metashard_informer_relists_total`` (first lists included; others: ``-``); ``hook``: sync
  hook calls; ``other``: cores busy with work outside the benchmark during the phase (the
  machine's busy CPU less every process measured, over the phase's seconds: the noise);
- per phase: ``coldstart`` the coordinator's RSS per cached object and its ratio to the raw
  JSON bytes it caches (target: RSS <= 1.5 x raw + 100 MB); ``resync`` CPU per no-op
  reconcile, all processes (target <= 0.5 ms; writes should be 0); ``edits`` p50/p99 of the
  edit latency (target p99 <= 1 s); ``failover`` when the standby led (metashard: its
  ``/readyz``), the edit's own latency, and the target, lease duration + 1.5 x the initial
  list measured alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loadtest.bench._fanout_report import writes
from loadtest.bench._scale_config import PHASES, RAW

Record = Mapping[str, Any]
MB = 1 << 20
TITLES = {
    "coldstart": "cold start: N parents waiting, process start included",
    "resync": "full resync of N unchanged parents (no writes expected)",
    "edits": "fresh edits during a full resync: parent write to its children written",
    "update": "update wave: spec.data of a fraction of the parents",
    "failover": "failover: SIGKILL of the leader to a new edit reconciled by the next one",
}


def quantile(q: float, values: Sequence[float]) -> float | None:
    """The nearest-rank ``q`` quantile of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def runs(records: Iterable[Record]) -> dict[tuple[str, str], list[Record]]:
    """The records of each (label, phase), in the order given."""
    out: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        out.setdefault((str(r["label"]), str(r["phase"])), []).append(r)
    return out


def median_runs(records: Iterable[Record]) -> dict[tuple[str, str], Record]:
    """The median run of each (label, phase) (``_median_run``)."""
    return {key: _median_run(measured) for key, measured in runs(records).items()}


def _median_run(measured: Sequence[Record]) -> Record:
    """The record of the median seconds among those that finished (the lower middle one of
    an even count); the last record when none did."""
    done = sorted((r for r in measured if r.get("converged", True)), key=_seconds)
    return done[(len(done) - 1) // 2] if done else measured[-1]


def _seconds(r: Record) -> float:
    return float(r["seconds"])


def peer_of(records: Iterable[Record]) -> str | None:
    """The name of the first other controller measured (the ``x PEER`` column), if any."""
    return next((str(r["name"]) for r in records if r.get("kind") == "command"), None)


def cpu_total(r: Record) -> float | None:
    procs = r.get("cpu_processes")
    return float(sum(procs.values())) if procs else None


def peak_total(r: Record) -> float | None:
    peaks = r.get("peak_rss")
    return float(sum(peaks.values())) / MB if peaks else None


def lists(r: Record) -> float:
    return float(sum(v for key, v in (r.get("requests") or {}).items() if key.startswith("LIST ")))


def per_noop(r: Record) -> float | None:
    """CPU ms per no-op reconcile, all processes (the hook's calls count the reconciles)."""
    cpu, calls = cpu_total(r), r.get("hook_calls")
    return None if cpu is None or not calls else cpu * 1e3 / float(calls)


def rss_per_raw(r: Record, cache: Record | None) -> float | None:
    """The coordinator's RSS at the end of ``r`` over the raw JSON bytes it caches (measured
    once per configuration, after its cold start: ``cache``)."""
    rss = (r.get("rss") or {}).get("coordinator")
    raw = None if cache is None else cache.get("cache_raw_bytes")
    return None if rss is None or not raw else float(rss) / float(raw)


def rss_per_object(r: Record, cache: Record | None) -> float | None:
    """The coordinator's RSS at the end of ``r`` per cached object, KB."""
    rss = (r.get("rss") or {}).get("coordinator")
    objects = None if cache is None else cache.get("cache_objects")
    return None if rss is None or not objects else float(rss) / float(objects) / 1024


def failover_target(r: Record) -> float | None:
    lease, listed = r.get("lease_duration"), r.get("list_seconds")
    return None if lease is None or listed is None else float(lease) + 1.5 * float(listed)


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


@dataclass(frozen=True, slots=True)
class Column:
    title: str
    cell: Callable[[Record], str]
    width: int = 9


def _ratio(r: Record, base: Record | None) -> str:
    if base is None or not base.get("seconds") or not r.get("converged", True):
        return "-"
    return f"{float(r['seconds']) / float(base['seconds']):.2f}"


def _cache(records: Iterable[Record], label: str) -> Record | None:
    """The record of ``label`` that carries what its controller caches (after its cold start)."""
    return next((r for r in records if r["label"] == label and r.get("cache_raw_bytes")), None)


def _peer_label(peer: str, r: Record) -> str:
    """The label of the ``x PEER`` configuration at ``r``'s hook latency."""
    latency = r.get("hook_latency")
    return peer if not latency else f"{peer}+hook{round(latency * 1000)}ms"


def _columns(phase: str, table: dict[tuple[str, str], Record], peer: str | None) -> list[Column]:
    raw = table.get((RAW, phase))
    records = list(table.values())

    def peer_record(r: Record) -> Record | None:
        return None if peer is None else table.get((_peer_label(peer, r), phase))

    cols = [
        Column("seconds", lambda r: _fmt(r.get("seconds")) + ("" if r.get("converged") else "!")),
        Column("x raw", lambda r: _ratio(r, raw), 7),
    ]
    if peer is not None:
        cols.append(Column(f"x {peer}", lambda r: _ratio(r, peer_record(r)), max(7, len(peer) + 2)))
    cols += [
        Column("CPU s", lambda r: _fmt(cpu_total(r))),
        Column("peak MB", lambda r: _fmt(peak_total(r), 1)),
        Column("writes", lambda r: _fmt(writes(r), 0), 8),
        Column("LIST", lambda r: _fmt(lists(r), 0), 6),
        Column("relists", lambda r: _relists(r), 8),
        Column("hook", lambda r: _fmt(r.get("hook_calls"), 0), 8),
        Column("other", lambda r: _fmt(r.get("other_load")), 6),
    ]
    extra = {
        "coldstart": [
            Column("RSS/raw", lambda r: _fmt(rss_per_raw(r, _cache(records, r["label"])))),
            Column(
                "KB/object",
                lambda r: _fmt(rss_per_object(r, _cache(records, r["label"])), 1),
                10,
            ),
        ],
        "resync": [
            Column("ms/no-op", lambda r: _fmt(per_noop(r), 3), 10),
            Column("RSS/raw", lambda r: _fmt(rss_per_raw(r, _cache(records, r["label"])))),
        ],
        "edits": [
            Column("edits", lambda r: _fmt(r.get("edits"), 0), 7),
            Column("p50 ms", lambda r: _ms(quantile(0.5, r.get("latencies") or []))),
            Column("p99 ms", lambda r: _ms(quantile(0.99, r.get("latencies") or []))),
        ],
        "failover": [
            Column("leads s", lambda r: _fmt(r.get("leading_after"))),
            Column("edit s", lambda r: _fmt(r.get("edit_latency"))),
            Column("target s", lambda r: _fmt(failover_target(r)), 10),
        ],
    }
    return cols + extra.get(phase, [])


def _relists(r: Record) -> str:
    relists = r.get("relists")
    return "-" if relists is None else _fmt(sum(relists.values()), 0)


def _ms(seconds: float | None) -> str:
    return _fmt(None if seconds is None else seconds * 1e3, 0)


def _process_rows(r: Record, width: int) -> list[str]:
    cpu, peak = r.get("cpu_processes") or {}, r.get("peak_rss") or {}
    roles = sorted(set(cpu) | set(peak), key=lambda role: (role.startswith("worker"), role))
    return [
        f"    {role:<{width - 4}} CPU {_fmt(cpu.get(role))} s, peak RSS "
        f"{_fmt(None if role not in peak else peak[role] / MB, 1)} MB"
        for role in roles
    ]


def _runs_row(
    r: Record, phase: str, every: dict[tuple[str, str], list[Record]], peer: str | None
) -> list[str]:
    """The ``runs`` line under a row measured more than once (module docstring)."""
    measured = every[(str(r["label"]), phase)]
    if len(measured) < 2:
        return []
    base = RAW if peer is None else _peer_label(peer, r)
    by_round = {b.get("repeat"): b for b in every.get((base, phase), ())}
    name = "raw" if peer is None else peer
    cells = []
    for run in measured:
        cell = _fmt(run.get("seconds")) + ("" if run.get("converged", True) else "!")
        other = by_round.get(run.get("repeat"))
        ratio = "-" if other is None or other is run else _ratio(run, other)
        if ratio != "-":
            cell += f" (x{ratio} {name})"
        cells.append(cell)
    return ["    runs: " + ", ".join(cells) + " s"]


def table(phase: str, records: Iterable[Record]) -> list[str]:
    """One phase's table (see the module docstring); [] when no record has that phase."""
    records = list(records)
    every, peer = runs(records), peer_of(records)
    median = {key: _median_run(measured) for key, measured in every.items()}
    rows = [r for (_, p), r in median.items() if p == phase]
    if not rows:
        return []
    cols = _columns(phase, median, peer)
    width = max(16, *(len(str(r["label"])) + 2 for r in rows))
    first = rows[0]
    out = [
        f"\n{phase} -- {TITLES[phase]} (N={first['n']}, K={first['k']})",
        "  " + "configuration".ljust(width) + "".join(c.title.rjust(c.width + 1) for c in cols),
    ]
    for r in rows:
        cells = "".join(c.cell(r).rjust(c.width + 1) for c in cols)
        out.append("  " + str(r["label"]).ljust(width) + cells)
        out += _runs_row(r, phase, every, peer)
        out += _process_rows(r, width)
    return out


def report(records: Sequence[Record]) -> list[str]:
    """Every phase's table, in phase order; a configuration's phase that did not finish in
    time has its seconds marked ``!``."""
    if not records:
        return ["  no measurements"]
    sizes = {(r["n"], r["k"]) for r in records}
    if len(sizes) > 1:
        raise ValueError(f"records of several sizes {sorted(sizes)}: report them separately")
    out: list[str] = []
    for phase in PHASES:
        out += table(phase, records)
    cached = {str(r["label"]): r for r in records if r.get("cache_raw_bytes")}
    if cached:
        out.append("\n  what a controller of the job caches, listed after its cold start:")
    for label, r in cached.items():
        size, objects = float(r["cache_raw_bytes"]), int(r["cache_objects"])
        out.append(
            f"    {label}: {objects:,} objects, {size / MB:,.1f} MB of JSON as listed"
            f" ({size / objects:,.0f} bytes each), one paged list {r['list_seconds']:.2f} s"
        )
    return out
