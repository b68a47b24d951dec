"""Helpers for end-to-end tests: what the recording reconciler saw, and polling.

- ``Recording`` reads what ``tests.e2e.recorder`` wrote: reconcile intervals per key.
- ``eventually`` polls an async condition until it holds.
- ``with_own_tmpdir``: processes with a ``TMPDIR`` of their own.
Processes come from ``loadtest.dev.processes``. The cluster is the embedded one (a subprocess)
or, given ``METASHARD_E2E_KUBECONFIG``, a real one: nothing here depends on which.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from loadtest.dev.processes import Proc, Processes

__all__ = [
    "Interval",
    "Proc",
    "Processes",
    "Recording",
    "eventually",
    "run_directories",
    "with_own_tmpdir",
]


@dataclass(frozen=True, slots=True)
class Interval:
    key: str
    worker: str
    pid: int
    start: float
    end: float | None
    rv: str | None


class Recording:
    """The reconciles ``tests.e2e.recorder`` wrote to ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [orjson.loads(line) for line in self.path.read_bytes().splitlines() if line]

    def intervals(self) -> list[Interval]:
        open_: dict[tuple[int, str], dict[str, Any]] = {}
        out: list[Interval] = []
        for row in self.rows():
            ident = (row["pid"], row["key"])
            if row["event"] == "start":
                open_[ident] = row
            else:
                start = open_.pop(ident)
                out.append(
                    Interval(
                        row["key"], row["worker"], row["pid"], start["t"], row["t"], start["rv"]
                    )
                )
        # A process killed mid-reconcile never wrote "end": it ran until it died.
        out.extend(
            Interval(r["key"], r["worker"], r["pid"], r["t"], None, r["rv"]) for r in open_.values()
        )
        return out

    def overlaps(self, died_at: dict[int, float] | None = None) -> list[tuple[Interval, Interval]]:
        """Pairs of reconciles of one key, by different processes, at overlapping times."""
        ends = died_at or {}
        by_key: dict[str, list[Interval]] = {}
        for iv in self.intervals():
            by_key.setdefault(iv.key, []).append(iv)
        found = []
        for ivs in by_key.values():
            ivs.sort(key=lambda i: i.start)
            for i, a in enumerate(ivs):
                a_end = a.end if a.end is not None else ends.get(a.pid, float("inf"))
                for b in ivs[i + 1 :]:
                    if b.start >= a_end:
                        break
                    if b.pid != a.pid:
                        found.append((a, b))
        return found

    def last_rv(self) -> dict[str, int]:
        """The highest parent resourceVersion each key was reconciled at (completed runs)."""
        best: dict[str, int] = {}
        for iv in self.intervals():
            if iv.end is not None and iv.rv is not None:
                best[iv.key] = max(best.get(iv.key, 0), int(iv.rv))
        return best


def with_own_tmpdir(kubeconfig: str, workdir: Path) -> tuple[Processes, Path]:
    """Processes whose ``TMPDIR`` is a directory of their own, empty at first: where
    ``metashard run`` puts its private directory."""
    tmp = workdir / "tmp"
    tmp.mkdir()
    return Processes(kubeconfig=kubeconfig, workdir=workdir, env={"TMPDIR": str(tmp)}), tmp


async def eventually(
    condition: Callable[[], Awaitable[bool]],
    *,
    within: float = 30.0,
    interval: float = 0.1,
    message: str | Callable[[], str] = "condition not met",
) -> None:
    deadline = time.monotonic() + within
    while True:
        if await condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(message() if callable(message) else message)
        await asyncio.sleep(interval)


def run_directories(tmp: Path) -> list[Path]:
    """The private directories of ``metashard run`` in ``tmp`` (``metashard-<pid>-...``; on a
    cluster whose kubeconfig carries ``*-data`` credentials, each process also keeps those in a
    ``metashard-kubeconfig-<pid>-...`` directory of its own)."""
    return [p for p in tmp.iterdir() if re.fullmatch(r"metashard-\d+-.+", p.name)]
