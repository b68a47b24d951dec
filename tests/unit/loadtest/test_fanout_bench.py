"""The fanout benchmark's pure parts: /proc parsing, roles, metrics, arithmetic and report."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtest.bench import _fanout_report as report
from loadtest.bench import fanout
from loadtest.bench._proc import (
    ProcStat,
    RoleCpu,
    busy_seconds,
    descendants,
    parse_busy,
    parse_stat,
    per_role,
    role_of,
)
from loadtest.bench._report import format_row

STAT = "4242 (python3) S 1 4242 4242 0 -1 4194304 900 0 0 0 250 37 0 0 20 0 3 0 1 0 0"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (STAT, ProcStat(pid=4242, comm="python3", ppid=1, utime=250, stime=37)),
        (
            STAT.replace("(python3)", "(a b) (c))"),
            ProcStat(pid=4242, comm="a b) (c)", ppid=1, utime=250, stime=37),
        ),
    ],
)
def test_parse_stat_reads_pid_comm_ppid_and_cpu_ticks(line: str, expected: ProcStat) -> None:
    assert parse_stat(line) == expected
    assert parse_stat(line).cpu_seconds(clk_tck=100) == pytest.approx(2.87)


@pytest.mark.parametrize("line", ["", "4242 python3 S 1", "4242 (python3) S 1 2 3"])
def test_parse_stat_refuses_what_is_not_a_stat_line(line: str) -> None:
    with pytest.raises(ValueError, match="not a /proc stat line"):
        parse_stat(line)


@given(
    comm=st.text(st.characters(blacklist_characters="\n\0"), max_size=16),
    pid=st.integers(1, 2**22),
    ppid=st.integers(0, 2**22),
    utime=st.integers(0, 2**40),
    stime=st.integers(0, 2**40),
)
def test_parse_stat_round_trips_any_command_name(
    comm: str, pid: int, ppid: int, utime: int, stime: int
) -> None:
    line = f"{pid} ({comm}) R {ppid} 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 5 0 0\n"
    assert parse_stat(line) == ProcStat(pid, comm, ppid, utime, stime)


def test_parse_stat_of_this_process_from_proc() -> None:
    stat = parse_stat(Path(f"/proc/{os.getpid()}/stat").read_text())
    assert stat.pid == os.getpid()
    assert stat.ppid == os.getppid()


def test_descendants_walks_the_tree_below_the_root_only() -> None:
    parents = {10: 1, 11: 10, 12: 10, 13: 11, 20: 1, 21: 20}
    assert sorted(descendants(10, parents)) == [10, 11, 12, 13]
    assert descendants(21, parents) == [21]


@pytest.mark.parametrize(
    ("argv", "is_root", "role"),
    [
        (["python", "-m", "manager.cli", "run"], True, "coordinator"),
        (
            ["python", "-m", "workers", "--coordinator", "ipc://x", "--id", "vm-w1"],
            False,
            "worker vm-w1",
        ),
        (["python", "-m", "fanoutbench", "hook"], False, None),
        (["python", "-c", "-m workers"], False, None),
    ],
)
def test_role_of_names_coordinator_and_workers(
    argv: list[str], is_root: bool, role: str | None
) -> None:
    assert role_of(argv, is_root=is_root) == role


def test_per_role_counts_new_processes_from_zero_and_adds_a_role_up() -> None:
    before = {1: ("coordinator", 1.0), 2: ("worker a", 2.0)}
    after = {1: ("coordinator", 1.5), 2: ("worker a", 2.25), 3: ("worker a", 0.5)}
    assert per_role(before, after) == {"coordinator": 0.5, "worker a": 0.75}


def test_role_cpu_reads_the_real_process() -> None:
    roles = RoleCpu(os.getpid())
    before = roles.sample()
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    used = per_role(before, roles.sample())
    assert set(used) == {"coordinator"}
    assert 0.1 <= used["coordinator"] <= 2.0


METRICS = """\
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="fanout",result="success",worker="vm-w0"} 7
controller_runtime_reconcile_total{controller="fanout",result="error",worker="vm-w0"} 1
controller_runtime_reconcile_total{controller="fanout",result="success",worker="vm-w1"} 4
controller_runtime_reconcile_time_seconds_bucket{controller="fanout",worker="vm-w0",le="0.01"} 4
controller_runtime_reconcile_time_seconds_bucket{controller="fanout",worker="vm-w0",le="0.1"} 8
controller_runtime_reconcile_time_seconds_bucket{controller="fanout",worker="vm-w0",le="+Inf"} 8
controller_runtime_reconcile_time_seconds_bucket{controller="fanout",worker="vm-w1",le="0.01"} 0
controller_runtime_reconcile_time_seconds_bucket{controller="fanout",worker="vm-w1",le="0.1"} 2
controller_runtime_reconcile_time_seconds_bucket{controller="fanout",worker="vm-w1",le="+Inf"} 4
"""


def test_parse_reconciles_sums_per_worker_and_merges_buckets() -> None:
    parsed = report.parse_reconciles(METRICS)
    assert parsed.per_worker == {"vm-w0": 8, "vm-w1": 4}
    assert parsed.buckets == {0.01: 4, 0.1: 10, math.inf: 12}
    later = report.Reconciles({"vm-w0": 10, "vm-w1": 4}, {0.01: 5, 0.1: 12, math.inf: 14})
    assert later.minus(parsed) == report.Reconciles(
        {"vm-w0": 2, "vm-w1": 0}, {0.01: 1, 0.1: 2, math.inf: 2}
    )


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        (0.5, {0.1: 50, 0.2: 100, math.inf: 100}, 0.1),
        (0.5, {0.1: 0, 0.2: 100, math.inf: 100}, 0.15),
        (0.25, {0.1: 100, math.inf: 100}, 0.025),
        (0.99, {0.1: 50, 0.2: 90, math.inf: 100}, 0.2),
        (0.5, {0.1: 0, math.inf: 0}, None),
        (0.5, {}, None),
    ],
)
def test_histogram_quantile_interpolates_as_prometheus_does(
    q: float, buckets: dict[float, float], expected: float | None
) -> None:
    got = report.histogram_quantile(q, buckets)
    assert got == (None if expected is None else pytest.approx(expected))


@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=8),
    st.floats(0.01, 1.0),
)
def test_histogram_quantile_stays_within_the_finite_bounds(counts: list[int], q: float) -> None:
    bounds = [0.005 * 2**i for i in range(len(counts))]
    cumulative, total = {}, 0
    for bound, count in zip(bounds, counts, strict=True):
        total += count
        cumulative[bound] = float(total)
    cumulative[math.inf] = float(total)
    got = report.histogram_quantile(q, cumulative)
    if total == 0:
        assert got is None
    else:
        assert got is not None
        assert 0.0 <= got <= bounds[-1]


@pytest.mark.parametrize(
    ("raw", "raw_cpu", "watched", "expected"),
    [
        (4.0, 3.0, {"seconds": 4.6, "cpu": {"apiserver": 3.5}}, 4.5),
        (4.0, 3.0, {"seconds": 4.6, "cpu": {"apiserver": 2.9}}, 4.0),
        (4.0, None, {"seconds": 4.6, "cpu": {}}, 4.6),
        (4.0, 3.0, None, None),
    ],
)
def test_zero_cost_limit_adds_the_api_server_cpu_the_watchers_cost(
    raw: float, raw_cpu: float | None, watched: dict[str, Any] | None, expected: float | None
) -> None:
    assert report.zero_cost_limit(raw, raw_cpu, watched) == expected


def test_format_row_prints_the_ratio_its_baseline_and_target() -> None:
    line = format_row("x", 3.0, "s", baseline=2.0, vs="raw", target="<= 1.1", digits=2)
    assert line.split() == ["x", "3.00", "s", "x", "1.50", "vs", "raw", "(target", "<=", "1.1)"]
    assert "vs" not in format_row("x", 3.0, "s")


def _wave(label: str, wave: str, seconds: float, **extra: Any) -> dict[str, Any]:
    return {"label": label, "wave": wave, "n": 100, "k": 3, "seconds": seconds, **extra}


RECORDS: list[report.Record] = [
    _wave("raw", "create", 2.0, cpu={"apiserver": 1.5, "harness": 0.05}),
    _wave("raw", "create", 4.0, cpu={"apiserver": 2.5, "harness": 0.05}),
    _wave("raw+watchers", "create", 3.5, cpu={"apiserver": 2.5, "watchers": 0.01}),
    _wave(
        "metashard-1w",
        "create",
        4.0,
        cpu={"apiserver": 2.0},
        cpu_processes={"coordinator": 0.02, "worker a": 0.18},
        reconciles={"a": 200},
        reconcile_buckets={"0.01": 100, "0.1": 200, "+Inf": 200},
    ),
    _wave(
        "metashard-2w",
        "create",
        4.0,
        cpu_processes={"coordinator": 0.03, "worker a": 0.1, "worker b": 0.1},
        reconciles={"a": 100, "b": 100},
    ),
    _wave("raw-cold", "coldstart", 1.0),
    _wave("metashard-1w", "coldstart", 2.5),
]


def _line(lines: list[str], start: str, contains: str = "") -> list[str]:
    found = [x for x in lines if x.strip().startswith(start) and contains in x]
    assert found, (start, lines)
    return found[0].split()


def test_report_prints_medians_with_their_same_run_baselines() -> None:
    lines = report.report(RECORDS, workers=(1, 2))
    assert _line(lines, "raw client, seconds")[3] == "3.00"  # median of 2 and 4
    # limit: raw 3.0 s + (2.5 - 2.0) s of API-server CPU the watchers added
    assert _line(lines, "zero-cost-controller limit")[2:8] == [
        "3.50",
        "s",
        "x",
        "1.17",
        "vs",
        "raw",
    ]
    assert _line(lines, "idle watchers CPU per parent")[5] == "0.100"  # ms: 0.01 s / 100
    assert _line(lines, "metashard-1w, seconds", "limit")[3:6] == ["s", "x", "1.14"]
    cpu = _line(lines, "CPU per parent, all processes")
    assert cpu[5:11] == ["2.000", "ms", "x", "4.00", "vs", "raw"]  # raw client: 0.5 ms
    assert _line(lines, "coordinator: CPU per reconcile")[4] == "100.0"  # us
    assert _line(lines, "worker a: CPU per reconcile")[5] == "900.0"  # 0.18 s / 200
    assert _line(lines, "worker b: CPU per reconcile")[5] == "1,000.0"  # 0.1 s / its 100
    assert _line(lines, "coordinator/worker")[4:5] == ["0.111"]  # 0.02/200 over 0.18/200
    assert _line(lines, "p50 reconcile latency")[3] == "10.0"
    assert _line(lines, "CPU per parent, 2 workers vs 1")[9:11] == ["x", "1.15"]
    assert _line(lines, "metashard-1w, seconds", "raw-cold")[3:6] == ["s", "x", "2.50"]


def test_report_without_records_says_so() -> None:
    assert report.report([], workers=(1,)) == ["  no measurements"]


def test_options_default_small_full_and_kubeconfig_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(fanout.KUBECONFIG_ENV, raising=False)
    opts = fanout.parse([])
    assert isinstance(opts, fanout.Options)
    assert (opts.n, opts.repeat, opts.workers, opts.kubeconfig) == (500, 1, (1, 2), None)
    full = fanout.parse(["--full", "--workers", "2"])
    assert isinstance(full, fanout.Options)
    assert (full.n, full.repeat, full.workers) == (2000, 3, (2,))
    quick = fanout.parse([], quick=True)
    assert isinstance(quick, fanout.Options) and quick.n == 50
    monkeypatch.setenv(fanout.KUBECONFIG_ENV, "/tmp/kc")
    from_env = fanout.parse(["--repeat", "5"])
    assert isinstance(from_env, fanout.Options)
    assert (from_env.kubeconfig, from_env.repeat) == ("/tmp/kc", 5)
    assert fanout.parse(["--report", "a.jsonl"]) == [Path("a.jsonl")]
    with pytest.raises(SystemExit):
        fanout.parse(["--workers", "0"])


@pytest.mark.parametrize("flags", [["--n", "0"], ["--repeat", "0"], ["--k", "0"], ["--n", "-3"]])
def test_a_count_of_zero_or_less_is_refused_not_taken_as_the_default(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        fanout.parse(flags)
    assert "--n, --k and --repeat must be positive" in capsys.readouterr().err


def test_records_of_different_sizes_are_reported_separately() -> None:
    other = {**RECORDS[0], "n": 200}
    groups = report.split([*RECORDS, other])
    assert sorted(groups) == [(100, 3), (200, 3)]
    assert groups[(200, 3)] == [other]
    with pytest.raises(ValueError, match="different N or K"):
        report.report([*RECORDS, other], workers=(1,))


def test_parse_busy_counts_all_but_idle_and_iowait() -> None:
    line = "cpu  100 5 50 1000 20 3 2 1 0 0"
    assert parse_busy(line, clk_tck=100) == pytest.approx(1.61)
    with pytest.raises(ValueError, match="cpu line"):
        parse_busy("cpu0 1 2 3 4", clk_tck=100)
    assert busy_seconds() > 0


def test_other_load_is_the_machine_less_the_measured_processes_per_second() -> None:
    record = {"seconds": 2.0, "cpu": {"box": 3.0, "apiserver": 1.0, "controller": 0.5}}
    assert report.other_load(record) == pytest.approx(0.75)
    assert report.other_load({"seconds": 2.0, "cpu": {"apiserver": 1.0}}) is None
    # a metashard wave's CPU spans until the controller was quiet, not only until convergence
    assert report.other_load({**record, "measured_seconds": 3.0}) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("metashard-1w", (1, "dynamic-apply", "metashard")),
        ("metashard-12w", (12, "dynamic-apply", "metashard")),
        ("metashard-2w-ssa", (2, "server-side-apply", "metashard")),
        ("base-1w", (1, "dynamic-apply", "base")),
        ("base-2w-ssa", (2, "server-side-apply", "base")),
        ("metashard-w", None),
        ("metashard-2-ssa", None),
        ("base-", None),
        ("basement-1w", None),
        ("raw", None),
        ("raw-cold", None),
    ],
)
def test_metashard_labels_name_workers_apply_strategy_and_build(
    label: str, expected: tuple[int, str, str] | None
) -> None:
    parsed = report.parse_label(label)
    if expected is None:
        assert parsed is None
        return
    assert parsed == report.Configuration(*expected)
    workers, strategy, build = expected
    assert report.metashard_label(workers, strategy, build=build) == label


def test_configurations_of_saved_lines_split_by_apply_strategy() -> None:
    records = [
        *RECORDS,
        _wave("metashard-2w-ssa", "create", 1.0),
        _wave("base-3w-ssa", "create", 1.0),
        _wave("kopf", "create", 1.0),
    ]
    assert report.configurations(records) == ([1, 2], [2, 3])


def test_writes_count_apply_as_a_write_and_leave_out_reads() -> None:
    record = {"requests": {"POST configmaps": 6, "APPLY configmaps": 3, "GET fanouts": 9}}
    assert report.writes(record) == 9.0
    assert report.writes({}) is None


def test_report_puts_server_side_apply_next_to_dynamic_apply() -> None:
    writes = {"POST fanouts": 100, "POST configmaps": 300, "PUT fanouts/status": 100}
    records = [
        *[{**r, "requests": writes} if r["label"] == "raw" else r for r in RECORDS],
        {**RECORDS[4], "requests": {**writes, "PATCH configmaps": 100}},
        _wave(
            "metashard-2w-ssa",
            "create",
            5.0,
            requests={"POST fanouts": 100, "APPLY configmaps": 300, "PUT fanouts/status": 100},
            cpu_processes={"coordinator": 0.03, "worker a": 0.2, "worker b": 0.17},
        ),
    ]
    records = [r for r in records if r is not RECORDS[4]]
    lines = report.report(records, workers=(1, 2), ssa_workers=(2,))
    starts = [x.split(",")[0].strip() for x in lines]
    assert starts.index("metashard-2w-ssa") > starts.index("metashard-2w")
    assert _line(lines, "API writes per parent")[4] == "5.00"  # raw: (100 + 300 + 100) / 100
    ssa_writes = _line(lines, "writes per parent, 2w server-side vs dynamic apply")
    assert ssa_writes[8:12] == ["5.00", "x", "0.83", "vs"]  # 500 against dynamic's 600
    ssa_cpu = _line(lines, "CPU per parent, 2w server-side vs dynamic apply")
    assert ssa_cpu[8:12] == ["4.000", "ms", "x", "1.74"]  # 0.4 s against 0.23 s, N=100
    without = report.report(records, workers=(1,), ssa_workers=(2,))
    assert not [x for x in without if "server-side vs dynamic" in x]  # no dynamic 2w to compare
    assert [x for x in without if x.strip().startswith("metashard-2w-ssa")]


def test_ssa_workers_option() -> None:
    opts = fanout.parse([])
    assert isinstance(opts, fanout.Options) and opts.ssa_workers == (2,)
    none = fanout.parse(["--ssa-workers", ""])
    assert isinstance(none, fanout.Options) and none.ssa_workers == ()
    with pytest.raises(SystemExit):
        fanout.parse(["--ssa-workers", "x"])


def _builds(seconds: float, cpu: float, **extra: Any) -> list[dict[str, Any]]:
    """Two repeats of one configuration's create wave: ``seconds`` and ``cpu`` are their
    medians (the repeats are 1 s and 0.1 s either side)."""
    return [
        _wave(
            repeat=rep,
            seconds=seconds + d,
            cpu_processes={"coordinator": cpu + d / 10},
            **extra,
        )
        for rep, d in ((0, -1.0), (1, 1.0))
    ]


def test_report_puts_the_baseline_build_after_this_one_with_the_ratio() -> None:
    raw = [r for r in RECORDS if r["label"] in ("raw", "raw-cold")]
    records = [
        *raw,
        *_builds(4.0, 0.3, label="metashard-1w", wave="create"),
        *_builds(5.0, 0.2, label="base-1w", wave="create"),
        *_builds(3.0, 0.4, label="metashard-2w-ssa", wave="create"),
        *_builds(6.0, 0.5, label="base-2w-ssa", wave="create"),
        _wave("base-2w", "create", 9.0),  # no metashard-2w: no ratio
        _wave("metashard-1w", "coldstart", 2.5),
        _wave("base-1w", "coldstart", 2.0),
    ]
    lines = report.report(records, workers=(1, 2), ssa_workers=(2,))
    starts = [x.split(",")[0].strip() for x in lines]
    assert starts.index("base-1w") > starts.index("metashard-1w")
    assert _line(lines, "base-1w, seconds")[2:4] == ["5.00", "s"]  # median of 4 and 6
    assert _line(lines, "metashard-1w against base-1w", " s ")[3:7] == ["4.00", "s", "x", "0.80"]
    # CPU per parent, all processes: 0.2 s and 0.3 s over N=100
    assert _line(lines, "base-1w, CPU per parent")[6:8] == ["2.000", "ms"]
    assert _line(lines, "metashard-1w against base-1w", " ms ")[3:7] == ["3.000", "ms", "x", "1.50"]
    assert _line(lines, "metashard-2w-ssa against base-2w-ssa", " s ")[5:7] == ["x", "0.50"]
    assert _line(lines, "base-2w, seconds")[2] == "9.00"
    assert not [x for x in lines if "against base-2w " in x or x.endswith("base-2w")]
    cold = lines[lines.index("\ncold start: N=100 parents waiting, process start included") :]
    assert _line(cold, "base-1w, seconds")[2] == "2.00"
    assert _line(cold, "metashard-1w against base-1w")[3:7] == ["2.50", "s", "x", "1.25"]
    plain = report.report(
        [*raw, *_builds(4.0, 0.3, label="metashard-1w", wave="create")], workers=(1,)
    )
    assert not [x for x in plain if "base-" in x]


def test_report_of_saved_lines_prints_the_baseline_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        RECORDS[0],
        *_builds(4.0, 0.3, label="metashard-2w", wave="create"),
        *_builds(5.0, 0.2, label="base-2w", wave="create"),
    ]
    saved = tmp_path / "fanout.jsonl"
    saved.write_text("".join(json.dumps(r) + "\n" for r in lines))
    fanout.main(quick=False, argv=["--report", str(saved)])
    out = capsys.readouterr().out.splitlines()
    assert _line(out, "base-2w, seconds")[2] == "5.00"
    assert _line(out, "metashard-2w against base-2w", " s ")[3:7] == ["4.00", "s", "x", "0.80"]
    assert _line(out, "metashard-2w against base-2w", " ms ")[3:7] == ["3.000", "ms", "x", "1.50"]
