"""The metashard builds a fanout run measures: this source tree, and with ``--baseline-src``
another one (an earlier commit's ``git worktree``, say), interleaved in the same run.

- A build is a source tree run by this interpreter and its virtualenv: ``sys.executable -m
  manager.cli ARGS``, started with the tree as working directory and ``PYTHONPATH`` set to the
  tree alone. ``python -m`` puts the working directory first on ``sys.path`` and
  ``PYTHONPATH`` comes before site-packages, so the tree's ``manager``, ``workers`` and
  ``proto`` shadow whatever the virtualenv has installed (its editable install may point at
  another checkout). ``metashard run`` starts its workers as ``sys.executable -m workers``,
  which inherit both: the whole process tree runs the one build. Both builds are started this
  way, so two configurations differ in their source only.
- ``Build.refusal`` checks a tree before anything starts: a directory with ``manager/cli.py``
  (the layout of earlier builds) or ``manager/cli/__main__.py``, whose ``metashard run
  --help`` answers and lists every flag the benchmark passes (``RUN_FLAGS``, from
  ``run_args``). A build without one of them is refused by name, not found out mid-run.
- ``Build.identity()`` is what a JSON line records of the build it measured: its name, its
  tree and ``revision(tree)``, the commit checked out there (``+dirty`` with uncommitted
  changes to tracked files; None outside a git work tree), so a line says which code it
  measured without the run's header.
- ``Build.start`` returns a ``Proc``: the harness's ``Proc`` (``p``, ``logfile``, ``alive()``,
  ``stop()``) with the working directory the build needs, which the harness's does not take.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CLI_PATHS = ("manager/cli.py", "manager/cli/__main__.py")  # what `python -m manager.cli` runs
HELP_TIMEOUT = 60.0


def run_args(*, processes: int, kubeconfig: str, metrics_port: int, strategy: str) -> list[str]:
    """The arguments of ``metashard run`` for one measured configuration."""
    return [
        *("run", "--processes", str(processes), "--kubeconfig", kubeconfig),
        *("--metrics-address", f"127.0.0.1:{metrics_port}", "--health-probe-bind-address", "0"),
        *("--log-format", "json", "--log-level", "warning", "--apply-strategy", strategy),
    ]


RUN_FLAGS = tuple(
    arg
    for arg in run_args(processes=1, kubeconfig="", metrics_port=0, strategy="")
    if arg.startswith("--")
)


class Proc:
    """A process in its own session (so that stopping it stops its workers too), its output in
    ``logfile``."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, logfile: Path):
        self.logfile = logfile
        with logfile.open("wb") as log:
            self.p = subprocess.Popen(
                list(argv),
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.p.poll() is None

    def stop(self, grace: float = 20.0) -> None:
        """SIGINT to the session's process group; SIGKILL after ``grace`` seconds."""
        if not self.alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.p.pid, signal.SIGINT)
        try:
            self.p.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()


def revision(src: Path) -> str | None:
    """The commit checked out in ``src``, with ``+dirty`` when git reports tracked files
    changed; None when ``src`` is not in a git work tree (an unpacked archive) or git is missing."""
    try:
        head = _git(src, "rev-parse", "--verify", "HEAD")
        if head.returncode != 0:
            return None
        changed = _git(src, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = head.stdout.strip()
    return commit + "+dirty" if changed.returncode == 0 and changed.stdout.strip() else commit


def _git(src: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(src), *args],
        capture_output=True,
        text=True,
        timeout=HELP_TIMEOUT,
        check=False,
    )


@dataclass(frozen=True, slots=True)
class Build:
    """A metashard source tree (see the module docstring); ``name`` prefixes the labels of its
    configurations (``_fanout_report.metashard_label``)."""

    name: str
    src: Path

    def command(self, args: Sequence[str]) -> list[str]:
        return [sys.executable, "-m", "manager.cli", *args]

    def identity(self) -> dict[str, str | None]:
        """The build as a JSON line records it (see the module docstring)."""
        return {"name": self.name, "src": str(self.src), "commit": revision(self.src)}

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with ``PYTHONPATH`` this tree alone."""
        return {**base, "PYTHONPATH": str(self.src)}

    def start(self, args: Sequence[str], *, env: Mapping[str, str], logfile: Path) -> Proc:
        """``metashard ARGS`` of this build, in its tree, ``env`` otherwise."""
        return Proc(self.command(args), env=self.env(env), cwd=self.src, logfile=logfile)

    def refusal(self, flags: Sequence[str] = RUN_FLAGS) -> str | None:
        """Why this tree cannot be measured (one line), or None; runs its ``run --help``."""
        if not self.src.is_dir():
            return f"{self.src} is not a directory"
        if not any((self.src / path).is_file() for path in CLI_PATHS):
            return f"{self.src} has no {' or '.join(CLI_PATHS)}: not a metashard source tree"
        try:
            result = subprocess.run(
                self.command(["run", "--help"]),
                env=self.env(os.environ),
                cwd=self.src,
                capture_output=True,
                text=True,
                timeout=HELP_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"`metashard run --help` of {self.src} did not answer in {HELP_TIMEOUT:g} s"
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            return f"`metashard run --help` of {self.src} exited {result.returncode}: {last}"
        missing = [
            flag
            for flag in flags
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", result.stdout)
        ]
        if missing:
            return f"`metashard run` of {self.src} has no {', '.join(missing)}, which it is given"
        return None
