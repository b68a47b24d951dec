"""The fanout benchmark's ``--baseline-src``: the flag and its refusals, the order of the two
builds in a run, and how a build's processes are started (``_build``), checked on a tiny fake
source tree whose ``manager.cli`` and ``workers`` record where they were imported from."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from loadtest.bench import _fanout_report as report
from loadtest.bench import fanout
from loadtest.bench._build import RUN_FLAGS, Build, revision, run_args
from loadtest.bench._proc import RoleCpu
from loadtest.dev.processes import REPO

RECORD = """\
import json, os, sys
from pathlib import Path

import {package}

def record(name):
    (Path(__file__).resolve().parents[{up}] / name).write_text(json.dumps({{
        "cwd": os.getcwd(),
        "path0": sys.path[0],
        "module": {package}.__file__,
        "pythonpath": os.environ.get("PYTHONPATH"),
        "argv": sys.argv[1:],
    }}))
"""

CLI = """\
import subprocess, sys
if "--help" in sys.argv:
    print("usage: metashard run " + " ".join("[%s X]" % flag for flag in {flags!r}))
    sys.exit(0)
argv = [sys.executable, "-m", "workers", "--coordinator", "ipc://x", "--id", "w0"]
worker = subprocess.Popen(argv)
record("coordinator.json")
worker.wait()
"""

WORKER = """\
import time
record("worker.json")
time.sleep(60)
"""


def fake_tree(root: Path, *, flags: Sequence[str] = RUN_FLAGS, layout: str = "cli.py") -> Path:
    """A source tree with a ``manager.cli`` (as ``manager/cli.py`` or
    ``manager/cli/__main__.py``) whose ``run --help`` lists ``flags`` and whose ``run`` starts
    ``python -m workers --id w0``; each records its cwd, ``sys.path[0]``, package file,
    ``PYTHONPATH`` and arguments in ``root/coordinator.json`` or ``root/worker.json``."""
    cli = root / "manager" / layout
    cli.parent.mkdir(parents=True)
    (root / "manager" / "__init__.py").write_text("")
    if cli.parent.name == "cli":
        (cli.parent / "__init__.py").write_text("")
    up = len(cli.relative_to(root).parts) - 1
    cli.write_text(RECORD.format(package="manager", up=up) + CLI.format(flags=list(flags)))
    (root / "workers").mkdir()
    (root / "workers" / "__init__.py").write_text("")
    (root / "workers" / "__main__.py").write_text(RECORD.format(package="workers", up=1) + WORKER)
    return root


def parse(argv: list[str]) -> fanout.Options:
    opts = fanout.parse(argv)
    assert isinstance(opts, fanout.Options)
    return opts


def test_without_the_flag_only_this_tree_is_measured() -> None:
    opts = parse(["--workers", "1,2"])
    assert opts.baseline_src is None
    assert fanout.measured_builds(opts) == (Build(report.CURRENT, REPO),)


def test_the_flag_takes_a_source_tree_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = fake_tree(tmp_path / "base", layout="cli/__main__.py")
    monkeypatch.chdir(tmp_path)
    opts = parse(["--baseline-src", "base"])
    assert opts.baseline_src == tree
    assert fanout.measured_builds(opts) == (
        Build(report.CURRENT, REPO),
        Build(report.BASELINE, tree),
    )


def _file(root: Path) -> Path:
    (root / "file").write_text("")
    return root / "file"


def _old(root: Path) -> Path:
    return fake_tree(root / "old", flags=[f for f in RUN_FLAGS if f != "--log-format"])


def _broken(root: Path) -> Path:
    tree = fake_tree(root / "broken")
    (tree / "manager" / "__init__.py").write_text("raise ImportError('no such thing')")
    return tree


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: root / "missing", "is not a directory"),
        (_file, "is not a directory"),
        (lambda root: root, "has no manager/cli.py or manager/cli/__main__.py"),
        (_old, "has no --log-format, which it is given"),
        (_broken, "exited 1: ImportError: no such thing"),
    ],
)
def test_a_tree_that_cannot_be_measured_is_refused_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[Path], Path],
    message: str,
) -> None:
    with pytest.raises(SystemExit) as exit_:
        fanout.parse(["--baseline-src", str(make(tmp_path))])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("python -m loadtest.bench.fanout: error: --baseline-src: ")
    assert message in err


def test_this_tree_takes_every_flag_the_benchmark_passes() -> None:
    assert Build(report.CURRENT, REPO).refusal() is None


def test_the_builds_of_a_configuration_run_back_to_back_first_one_then_the_other(
    tmp_path: Path,
) -> None:
    opts = parse(
        ["--workers", "1,2", "--ssa-workers", "2", "--baseline-src", str(fake_tree(tmp_path))]
    )
    this, base = fanout.measured_builds(opts)
    waves, colds = fanout.schedule(opts, (this, base), 0)
    assert waves == [
        (this, 1, report.DYNAMIC),
        (base, 1, report.DYNAMIC),
        (this, 2, report.DYNAMIC),
        (base, 2, report.DYNAMIC),
        (this, 2, report.SSA),
        (base, 2, report.SSA),
    ]
    assert colds == [(this, 1), (base, 1), (this, 2), (base, 2)]
    assert fanout.schedule(opts, (this, base), 1) == (waves[::-1], colds[::-1])
    assert fanout.schedule(opts, (this, base), 2) == (waves, colds)
    alone = fanout.schedule(opts, (this,), 1)
    assert alone == (
        [(this, 2, report.SSA), (this, 2, report.DYNAMIC), (this, 1, report.DYNAMIC)],
        [(this, 2), (this, 1)],
    )


def test_a_build_runs_from_its_tree_and_its_workers_too(tmp_path: Path) -> None:
    tree = fake_tree(tmp_path / "base")
    args = run_args(processes=1, kubeconfig="kc", metrics_port=1234, strategy=report.SSA)
    env = {**os.environ, "PYTHONPATH": str(REPO), "KUBECONFIG": "kc"}
    proc = Build(report.BASELINE, tree).start(args, env=env, logfile=tmp_path / "base.log")
    try:
        deadline = time.monotonic() + 30
        while not ((tree / "coordinator.json").exists() and (tree / "worker.json").exists()):
            assert proc.alive(), (tmp_path / "base.log").read_text()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        roles = {role for role, _ in RoleCpu(proc.p.pid).sample().values()}
    finally:
        proc.stop(grace=10)
    assert not proc.alive()
    assert roles == {"coordinator", "worker w0"}
    coordinator = json.loads((tree / "coordinator.json").read_text())
    assert coordinator["argv"] == args
    worker = json.loads((tree / "worker.json").read_text())
    for ran, package in ((coordinator, "manager"), (worker, "workers")):
        assert ran["cwd"] == ran["path0"] == ran["pythonpath"] == str(tree)
        assert Path(ran["module"]) == tree / package / "__init__.py"


def test_a_build_names_the_commit_of_its_tree_and_whether_it_was_changed(tmp_path: Path) -> None:
    tree = fake_tree(tmp_path / "base")
    assert revision(tree) is None  # not a git work tree: an unpacked archive, say
    git = ["git", "-C", str(tree), "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "base"]):
        subprocess.run([*git, *args], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    identity = Build(report.BASELINE, tree).identity()
    assert identity == {"name": report.BASELINE, "src": str(tree), "commit": head}
    (tree / "notes.txt").write_text("untracked files do not count")
    assert revision(tree) == head
    (tree / "workers" / "__init__.py").write_text("# changed\n")
    assert revision(tree) == head + "+dirty"
