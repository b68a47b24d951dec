"""The scale benchmark's pure parts: flags, configurations, edit timing, memory, the report
and the pictures of a tiny run (N=20)."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from loadtest.bench import _harness, scale
from loadtest.bench._coldraw import metacontroller_child
from loadtest.bench._proc import SETTLE_MAX, Memory, parse_memory, settle
from loadtest.bench._scale_config import (
    PHASES,
    Config,
    Kind,
    Lease,
    Options,
    parse_command,
    rounds,
)
from loadtest.bench._scale_edits import Edits
from loadtest.bench._scale_phases import delete_children, metric_sums
from loadtest.bench._scale_report import quantile, report, table
from loadtest.bench._scale_sampler import Sampler

N = 20
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"
COLDSTART, RESYNC, EDITS, UPDATE, FAILOVER = PHASES


def options(*flags: str) -> Options:
    parsed = scale.parse(flags)
    assert isinstance(parsed, Options)
    return parsed


def refused(capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        scale.parse(flags)
    assert exit_.value.code == 2
    return capsys.readouterr().err


# --- flags -------------------------------------------------------------------------------------


def test_defaults_measure_raw_and_metashard_with_one_and_two_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("METASHARD_E2E_KUBECONFIG", raising=False)
    opts = options()
    assert (opts.n, opts.k, opts.kubeconfig) == (2000, 3, None)
    assert [c.label for c in opts.configs] == ["raw", "metashard-1p", "metashard-2p"]
    assert opts.phases == frozenset(PHASES)
    assert opts.resync_interval == 20.0  # max(20, N/100)
    assert options("--n", "20000").resync_interval == 200.0
    assert options("--quick").n == 20
    assert options("--out", "/x/y").out == Path("/x/y")
    assert opts.settle == 10.0 and options("--settle", "0").settle == 0.0
    assert opts.settle_max == SETTLE_MAX and options("--settle-max", "20").settle_max == 20.0


def test_a_slow_hook_runs_every_controller_again_and_the_raw_client_once() -> None:
    opts = options("--hook-latency", "0,0.05", "--controller", "mc=mc --kubeconfig {kubeconfig}")
    assert [c.label for c in opts.configs] == [
        "raw",
        "metashard-1p",
        "metashard-2p",
        "mc",
        "metashard-1p+hook50ms",
        "metashard-2p+hook50ms",
        "mc+hook50ms",
    ]
    assert [c.hook_latency for c in opts.configs][-1] == 0.05


def test_the_raw_client_writing_metacontroller_children_runs_once_after_the_raw_client() -> None:
    opts = options("--raw-metacontroller", "--hook-latency", "0,0.05", "--processes", "1")
    assert [c.label for c in opts.configs] == [
        "raw",
        "raw-mc",
        "metashard-1p",
        "metashard-1p+hook50ms",
    ]
    raw_mc = opts.configs[1]
    assert (raw_mc.kind, raw_mc.children, raw_mc.phases()) == (
        Kind.RAW,
        "metacontroller",
        (COLDSTART,),
    )
    assert options("--raw-metacontroller", "--no-raw").configs[0].label == "raw-mc"


REFUSED = {
    "--n 0": "--n must be positive",
    "--k -1": "--k must be positive",
    "--processes 1,0": "--processes: positive counts",
    "--processes two": "--processes: whole numbers",
    "--hook-latency -0.1": "--hook-latency: distinct numbers >= 0",
    "--hook-latency slow": "--hook-latency: numbers separated by commas",
    "--hook-latency 0,0": "--hook-latency: distinct numbers",
    "--phases coldstart,warmup": "--phases: ['warmup']",
    "--update-fraction 1.5": "--update-fraction: at most 1",
    "--settle -1": "--settle: seconds >= 0 (0: no wait), got -1",
    "--repeat 0": "--repeat must be positive, got 0",
    "--settle-max 0": "--settle-max must be positive, got 0",
    "--edit-rate 0": "--edit-rate must be positive",
    "--resync-interval 0": "--resync-interval must be positive",
    "--no-raw --processes ''": "nothing to measure",
    "--controller mc": "want LABEL=COMMAND",
    "--controller 'raw=x {kubeconfig}'": "not 'raw'",
    "--controller 'raw-mc=x {kubeconfig}'": "not 'raw', 'raw-mc'",
    "--raw-metacontroller --phases resync": "raw-mc runs the coldstart phase only",
    "--controller 'metashard-3p=x {kubeconfig}'": "nor 'metashard-",
    "--controller 'mc=x {kubeconfig} {hook}'": "unknown placeholder(s) ['hook']",
    "--controller 'mc=x {kubeconfig'": "not a valid template",
    "--controller 'mc=x --server 1'": "must name the cluster with {kubeconfig}",
    "--controller 'mc=a {kubeconfig}' --controller 'mc=b {kubeconfig}'": "two commands with one",
}


@pytest.mark.parametrize("flags", REFUSED)
def test_wrong_flags_are_refused_with_a_message_naming_them(
    capsys: pytest.CaptureFixture[str], flags: str
) -> None:
    assert REFUSED[flags] in refused(capsys, *shlex.split(flags))


def test_out_must_be_a_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("")
    assert "is a file, not a directory" in refused(capsys, "--out", str(file))


def test_report_flag_returns_the_files() -> None:
    assert scale.parse(["--report", "a.jsonl", "b.jsonl"]) == [Path("a.jsonl"), Path("b.jsonl")]


# --- configurations ----------------------------------------------------------------------------


@pytest.mark.skipif(not _harness.available(), reason="no fanout harness in ../shared/bench")
def test_raw_mc_children_are_what_a_metacontroller_compatible_controller_creates() -> None:
    workload = _harness.load().workload
    parent = {
        "apiVersion": "bench.metashard.io/v1",
        "kind": "Fanout",
        "metadata": {"name": "fo-1", "namespace": "ns", "uid": "u-1"},
        "spec": {"children": 2, "data": "d"},
    }
    hook_children = workload.desired_children(parent, with_owner=False)
    bodies = [metacontroller_child(parent, child) for child in hook_children]
    for body, child in zip(bodies, hook_children, strict=True):
        meta = body["metadata"]
        assert (meta["name"], meta["namespace"], body["data"]) == (
            child["metadata"]["name"],
            "ns",
            child["data"],
        )
        assert meta["labels"] == {"controller-uid": "u-1"}
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "bench.metashard.io/v1",
                "kind": "Fanout",
                "name": "fo-1",
                "uid": "u-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        applied = orjson.loads(meta["annotations"][LAST_APPLIED])
        assert applied == {**child, "metadata": {**child["metadata"], "labels": meta["labels"]}}
    assert "labels" not in hook_children[0]["metadata"]  # the hook's answer is left as it was


def test_a_command_runs_the_phases_its_placeholders_allow() -> None:
    bare = parse_command("mc=mc --kubeconfig {kubeconfig}")
    assert bare.phases() == (COLDSTART, UPDATE)
    flush = parse_command("mc=mc --kubeconfig {kubeconfig} --cache-flush-interval {flush}")
    assert flush.phases() == (COLDSTART, RESYNC, EDITS, UPDATE)
    both = parse_command("mc=mc --kubeconfig {kubeconfig} --x {flush} --id {lease}")
    assert both.phases() == PHASES
    assert Config(name="raw", kind=Kind.RAW).phases() == (COLDSTART, UPDATE)


def test_a_command_line_gets_its_placeholders_filled_in() -> None:
    config = parse_command(
        "mc= {python} -m mc --kubeconfig {kubeconfig} --metrics-address :{port}"
        " --cache-flush-interval {flush} --leader-election-id {lease} --ns {namespace}"
    )
    lease = Lease(name="scale-abc", namespace="scale-ns", duration=15)
    argv = config.argv(kubeconfig="/k", flush=20, port=4242, lease=lease)
    assert argv == [
        sys.executable,
        *("-m", "mc", "--kubeconfig", "/k", "--metrics-address", ":4242"),
        *("--cache-flush-interval", "20s", "--leader-election-id", "scale-abc"),
        *("--ns", "scale-ns"),
    ]


def test_metashard_runs_with_leader_election_only_when_given_a_lease() -> None:
    config = Config(name="metashard-2p", kind=Kind.METASHARD, processes=2)
    plain = config.argv(kubeconfig="/k", flush=30, port=1, lease=None)
    assert plain[1:6] == ["-m", "manager.cli", "run", "--processes", "2"]
    assert "--cache-flush-interval" in plain and "30s" in plain
    assert not any(arg.startswith("--leader-election") for arg in plain)
    lease = Lease(name="l", namespace="ns", duration=15)
    elected = config.argv(kubeconfig="/k", flush=30, port=1, lease=lease)

    def value(flag: str) -> str:
        return elected[elected.index(flag) + 1]

    assert value("--leader-election") == "--leader-election-id"
    assert (value("--leader-election-id"), value("--leader-election-namespace")) == ("l", "ns")
    assert value("--leader-election-lease-duration") == "15s"
    assert value("--leader-election-renew-deadline") == "10s"
    assert value("--leader-election-retry-period") == "2s"
    with pytest.raises(ValueError, match="not a controller"):
        Config(name="raw", kind=Kind.RAW).argv(kubeconfig="/k", flush=1, port=1, lease=None)


# --- edits, memory, metrics --------------------------------------------------------------------


def child_data(data: str, i: int) -> dict[str, str]:
    return {"value": data, "index": str(i)}


@pytest.mark.asyncio
async def test_an_edit_resolves_when_all_its_children_hold_it() -> None:
    edits = Edits(k=2, child_data=child_data)
    edits.expect("p", "new", at=10.0)
    cms: dict[str, tuple[Any, Any]] = {"p-0": (child_data("new", 0), "uid")}
    edits.observe("p", cms, now=10.5)
    assert edits.pending == 1 and not await edits.wait(0.01)
    cms["p-1"] = (child_data("old", 1), "uid")
    edits.observe("p", cms, now=10.6)
    assert edits.pending == 1
    cms["p-1"] = (child_data("new", 1), "uid")
    edits.observe("other", cms, now=10.7)  # not expected: ignored
    edits.observe("p", cms, now=11.25)
    assert edits.latencies == [1.25] and edits.last_resolved == 11.25
    assert await edits.wait(0.01)


def test_a_newer_edit_of_a_parent_replaces_the_pending_one() -> None:
    edits = Edits(k=1, child_data=child_data)
    edits.expect("p", "first", at=1.0)
    edits.expect("p", "second", at=2.0)
    edits.observe("p", {"p-0": (child_data("first", 0), None)}, now=3.0)
    assert edits.pending == 1
    edits.observe("p", {"p-0": (child_data("second", 0), None)}, now=3.5)
    assert edits.latencies == [1.5]


class Machine:
    """A clock and the machine's busy seconds, advanced by ``sleep`` at ``loads[i]`` cores
    during the i-th window (the last load holds after the list ends)."""

    def __init__(self, loads: list[float]) -> None:
        self.now, self.busy, self.loads, self.windows = 0.0, 0.0, loads, 0

    async def sleep(self, seconds: float) -> None:
        load = self.loads[min(self.windows, len(self.loads) - 1)]
        self.now, self.busy = self.now + seconds, self.busy + load * seconds
        self.windows += 1


@pytest.mark.parametrize(
    ("loads", "limit", "waited", "last"),
    [
        ([0.1], 900.0, 10.0, 0.1),  # already quiet: one window
        ([1.9, 1.0, 0.6, 0.2], 900.0, 40.0, 0.2),  # a collector still busy, then done
        ([0.25], 900.0, 10.0, 0.25),  # the bound is inclusive
        ([1.5], 30.0, 30.0, 1.5),  # never quiet: the limit ends the wait, the load says so
    ],
)
@pytest.mark.asyncio
async def test_settle_waits_for_a_quiet_window(
    loads: list[float], limit: float, waited: float, last: float
) -> None:
    m = Machine(loads)
    got = await settle(lambda: m.busy, window=10.0, limit=limit, clock=lambda: m.now, sleep=m.sleep)
    assert got == pytest.approx((waited, last))


def test_parse_memory_reads_rss_and_peak() -> None:
    status = "Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t3\n"
    assert parse_memory(status) == Memory(rss=1024 * 1024, peak=2048 * 1024)
    with pytest.raises(ValueError, match="no VmRSS and VmHWM"):
        parse_memory("Name:\tzombie\nState:\tZ\n")


def test_metric_sums_add_up_per_resource() -> None:
    text = (
        "# TYPE metashard_informer_relists_total counter\n"
        'metashard_informer_relists_total{resource="configmaps",reason="initial"} 1.0\n'
        'metashard_informer_relists_total{resource="configmaps",reason="gone"} 2.0\n'
        'metashard_informer_relists_total{resource="fanouts",reason="initial"} 1\n'
        'metashard_informer_objects{resource="configmaps"} 60\n'
    )
    assert metric_sums(text, "metashard_informer_relists_total") == {
        "configmaps": 3.0,
        "fanouts": 1.0,
    }


@pytest.mark.asyncio
async def test_the_sampler_reads_a_real_process_by_role() -> None:
    ticks = iter(float(i) for i in range(100))
    calls = 0

    async def progress() -> int:
        nonlocal calls
        calls += 1
        return calls * 10

    sampler = Sampler(progress=progress, root_role="me", interval=0.5, clock=lambda: next(ticks))
    sampler.start(t0=0.0)
    sampler.attach(os.getpid())
    sum(i * i for i in range(200_000))  # some CPU
    await sampler.stop()
    result = sampler.result()
    assert set(result["cpu_processes"]) == {"me"} and result["cpu_processes"]["me"] >= 0
    assert result["peak_rss"]["me"] >= result["rss"]["me"] > 0
    series = result["series"]
    assert len(series["t"]) == len(series["progress"]) == len(series["rss"]["me"]) >= 1
    assert series["progress"][-1] == calls * 10


# --- the report and the pictures of a tiny run -------------------------------------------------


def rec(label: str, phase: str, seconds: float, **extra: Any) -> dict[str, Any]:
    kind = "raw" if label == "raw" else "command" if label.startswith("mc") else "metashard"
    roles = (
        {"client": 0.5}
        if kind == "raw"
        else {"controller": 1.0}
        if kind == "command"
        else {"coordinator": 0.4, "worker h-w0": 0.6}
    )
    mb = 1 << 20
    return {
        "label": label,
        "name": label.partition("+")[0],
        "kind": kind,
        "hook_latency": 0.05 if "+hook" in label else 0.0,
        "phase": phase,
        "n": N,
        "k": 3,
        "seconds": seconds,
        "converged": True,
        "progress_of": "parents converged",
        "cpu_processes": roles,
        "peak_rss": {role: 50 * mb for role in roles},
        "rss": {role: 40 * mb for role in roles},
        "requests": {"LIST fanouts": 1, "POST configmaps": 3 * N, "PATCH fanouts/status": N},
        "hook_calls": N,
        "other_load": 0.25,
        "cache_objects": 4 * N,
        "cache_raw_bytes": 4 * N * 1000,
        "list_seconds": 0.1,
        "series": {
            "t": [0.0, 0.5, 1.0],
            "progress": [0, N // 2, N],
            "rss": {role: [None, 30 * mb, 40 * mb] for role in roles},
        },
        **extra,
    }


def tiny_run() -> list[dict[str, Any]]:
    out = [rec("raw", COLDSTART, 1.0), rec("raw", UPDATE, 0.2)]
    for label, scale_ in (
        ("metashard-1p", 1.0),
        ("mc", 2.0),
        ("metashard-1p+hook50ms", 1.5),
        ("mc+hook50ms", 2.0),
    ):
        out += [
            rec(label, COLDSTART, 1.2 * scale_),
            rec(label, RESYNC, 0.1 * scale_, requests={"WATCH fanouts": 1}),
            rec(label, EDITS, 0.2 * scale_, edits=3, latencies=[0.03, 0.01, 0.02]),
            rec(label, UPDATE, 0.3 * scale_),
            rec(
                label,
                FAILOVER,
                5.0 * scale_,
                edit_latency=4.9,
                leading_after=4.0,
                lease_duration=3.0,
            ),
        ]
    return out


def line(lines: list[str], start: str, after: str) -> str:
    at = next(i for i, x in enumerate(lines) if x.startswith(after))
    return next(x for x in lines[at:] if x.strip().startswith(start))


def test_the_report_has_a_table_per_phase_with_same_run_ratios() -> None:
    lines = report(tiny_run())
    titles = [x for x in lines if x.startswith("\n") and not x.startswith("\n ")]
    assert [t.split()[0] for t in titles] == list(PHASES)
    cold = line(lines, "metashard-1p ", "\ncoldstart").split()
    header = line(lines, "configuration", "\ncoldstart").split()
    assert header[:4] == ["configuration", "seconds", "x", "raw"]
    assert cold[1:4] == ["1.20", "1.20", "0.50"]  # seconds, x raw, x mc
    assert cold[4] == "1.00" and cold[5] == "100.0"  # CPU s, peak MB of two processes
    assert cold[6:11] == ["80", "1", "-", "20", "0.25"]  # writes, LIST, relists, hook, other
    assert cold[-2:] == ["524.29", "512.0"]  # RSS/raw (40 MiB / 80,000 B), KB per object
    slow = line(lines, "metashard-1p+hook50ms", "\ncoldstart").split()
    assert slow[3] == "0.75"  # against mc+hook50ms, the peer at the same latency
    resync = line(lines, "metashard-1p ", "\nresync").split()
    assert resync[6] == "0" and resync[-2] == "50.000"  # no writes; 1 s CPU / 20 calls
    edits = line(lines, "metashard-1p ", "\nedits").split()
    assert edits[-3:] == ["3", "20", "30"]  # edits, p50 ms, p99 ms
    failover = line(lines, "metashard-1p ", "\nfailover").split()
    assert failover[-3:] == ["4.00", "4.90", "3.15"]  # leads, the edit, lease + 1.5 x list
    assert line(lines, "worker h-w0", "\ncoldstart").split()[-3:] == ["RSS", "50.0", "MB"]
    assert lines[-1] == (
        "    mc+hook50ms: 80 objects, 0.1 MB of JSON as listed (1,000 bytes each),"
        " one paged list 0.10 s"
    )


def test_a_phase_not_finished_is_marked_and_sizes_are_not_mixed() -> None:
    records = [r for r in tiny_run() if (r["label"], r["phase"]) != ("metashard-1p", UPDATE)]
    records.append(rec("metashard-1p", UPDATE, 9.0, converged=False))
    rows = table(UPDATE, records)
    assert line(rows, "metashard-1p ", "\nupdate").split()[1] == "9.00!"
    assert table("failover", [rec("raw", COLDSTART, 1.0)]) == []
    assert report([]) == ["  no measurements"]
    with pytest.raises(ValueError, match="several sizes"):
        report([rec("raw", COLDSTART, 1.0), {**rec("raw", UPDATE, 1.0), "n": 2 * N}])


def repeated(label: str, seconds: list[float], **extra: Any) -> list[dict[str, Any]]:
    """One cold start of ``label`` per round, in round order."""
    return [rec(label, COLDSTART, s, repeat=i, **extra) for i, s in enumerate(seconds)]


def test_repeats_are_shown_by_the_median_run_and_each_run_against_its_round() -> None:
    records = [
        *repeated("raw", [1.0, 1.0, 1.0]),
        *repeated("metashard-1p", [1.2, 1.6, 1.4]),
        *repeated("mc", [2.4, 2.2, 3.0]),
    ]
    records[4] = {**records[4], "cpu_processes": {"coordinator": 9.0}}  # metashard's 1.6 s
    records[5] = {**records[5], "cpu_processes": {"coordinator": 7.0}}  # its 1.4 s: the median
    lines = table(COLDSTART, records)
    row = line(lines, "metashard-1p ", "\ncoldstart").split()
    assert row[1:5] == ["1.40", "1.40", "0.58", "7.00"]  # the median run, x raw, x mc (2.4), CPU
    assert line(lines, "runs:", "  metashard-1p ") == (
        "    runs: 1.20 (x0.50 mc), 1.60 (x0.73 mc), 1.40 (x0.47 mc) s"
    )
    assert line(lines, "runs:", "  mc ") == "    runs: 2.40, 2.20, 3.00 s"


def test_the_median_run_is_one_that_finished_and_the_lower_middle_of_an_even_count() -> None:
    records = [
        *repeated("raw", [1.0, 1.0, 1.0, 1.0]),
        *repeated("metashard-1p", [1.2, 9.0, 1.6, 1.4]),
    ]
    records[5] = {**records[5], "converged": False}  # 9.0 s, not finished: not a candidate
    lines = table(COLDSTART, records)
    assert line(lines, "metashard-1p ", "\ncoldstart").split()[1] == "1.40"
    assert line(lines, "runs:", "  metashard-1p ") == (
        "    runs: 1.20 (x1.20 raw), 9.00!, 1.60 (x1.60 raw), 1.40 (x1.40 raw) s"
    )
    alone = [rec("metashard-1p", COLDSTART, 5.0, converged=False, repeat=r) for r in (0, 1)]
    assert line(table(COLDSTART, alone), "metashard-1p ", "\ncoldstart").split()[1] == "5.00!"


def test_rounds_run_every_configuration_once_each_in_turn_reversed() -> None:
    configs = options("--repeat", "3").configs
    assert [c.label for c in configs] == ["raw", "metashard-1p", "metashard-2p"]
    order = [(r, c.label) for r, c in rounds(configs, 3)]
    assert order == [
        (0, "raw"),
        (0, "metashard-1p"),
        (0, "metashard-2p"),
        (1, "metashard-2p"),
        (1, "metashard-1p"),
        (1, "raw"),
        (2, "raw"),
        (2, "metashard-1p"),
        (2, "metashard-2p"),
    ]
    assert options().repeat == 1 and [r for r, _ in rounds(configs, 1)] == [0, 0, 0]


@pytest.mark.parametrize(
    ("q", "values", "expected"),
    [(0.5, [3.0, 1.0, 2.0], 2.0), (0.99, [float(i) for i in range(1, 101)], 99.0), (0.5, [], None)],
)
def test_quantile_is_the_nearest_rank(q: float, values: list[float], expected: float) -> None:
    assert quantile(q, values) == expected


def test_one_picture_per_phase(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    from loadtest.bench import _scale_plot

    written = _scale_plot.plot(tiny_run(), tmp_path)
    assert [p.name for p in written] == [f"{phase}.png" for phase in PHASES]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width, _ = imread(path).shape
        assert (width, height) == (1000, 800)


@pytest.mark.skipif(not _harness.available(), reason="no fanout harness in ../shared/bench")
@pytest.mark.asyncio
async def test_the_hook_answers_late_and_counts_its_calls() -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from loadtest.bench._scale_hook import make_app

    parent = {
        "apiVersion": "bench.metashard.io/v1",
        "kind": "Fanout",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"children": 2, "data": "d"},
    }
    async with TestClient(TestServer(make_app())) as client:
        assert (await client.put("/latency", params={"seconds": "-1"})).status == 400
        assert (await client.put("/latency", params={"seconds": "0.2"})).status == 200
        loop = asyncio.get_running_loop()
        started = loop.time()
        answer = await client.post("/sync", json={"parent": parent, "children": {}})
        assert loop.time() - started >= 0.2
        body = await answer.json()
        assert body["status"] == {"children": 2} and len(body["children"]) == 2
        assert (await client.post("/sync", data=b"[1]")).status == 400
        assert await (await client.get("/calls")).json() == {"calls": 1}


class _Kube:
    """The part of the harness's client ``delete_children`` uses."""

    def __init__(self, session: aiohttp.ClientSession, server: str) -> None:
        self.session = session
        self.cfg = type("Cfg", (), {"server": server})()

    async def request(
        self, method: str, path: str, *, params: dict[str, str], ok: tuple[int, ...]
    ) -> tuple[int, Any]:
        async with self.session.request(method, self.cfg.server + path, params=params) as r:
            assert r.status in ok
            return r.status, await r.json()


@pytest.mark.asyncio
async def test_children_are_deleted_again_when_a_delete_is_cut_short() -> None:
    left = ["a", "b", "c"]
    deletes: list[str] = []

    async def delete(request: web.Request) -> web.StreamResponse:
        deletes.append(request.headers["Accept"])
        if len(deletes) <= 2:  # the server's timeout closes the connection (aiohttp tries twice)
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        if len(deletes) == 3:
            return web.Response(status=504)  # or a 5xx answers it
        left.clear()
        return web.json_response({"items": []})

    async def get(request: web.Request) -> web.Response:
        items = [{"metadata": {"name": n}} for n in ["kube-root-ca.crt", *left]]
        return web.json_response({"items": items[: int(request.query["limit"])]})

    app = web.Application()
    app.router.add_delete("/api/v1/namespaces/ns/configmaps", delete)
    app.router.add_get("/api/v1/namespaces/ns/configmaps", get)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with aiohttp.ClientSession() as session:
            await asyncio.wait_for(
                delete_children(_Kube(session, f"http://127.0.0.1:{port}"), "ns"), 10
            )
    finally:
        await runner.cleanup()
    assert len(deletes) == 4 and not left
