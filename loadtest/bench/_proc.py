"""CPU time of real processes from ``/proc`` (Linux): one process, or a controller's tree by role.

- ``parse_stat`` reads one ``/proc/<pid>/stat`` line: the command name is in parentheses and
  may itself hold spaces and parentheses, so the fields are split after the *last* ``)``.
  CPU is ``utime + stime`` (fields 14 and 15, in clock ticks): all threads of the process,
  not its children (``cutime``/``cstime`` count only reaped children and are ignored).
- ``role_of`` names a process of ``metashard run`` from its command line: a process started
  as ``python -m workers ... --id ID`` is ``worker ID``; the root of the tree is
  ``coordinator`` (``metashard run`` hosts the coordinator in its own process).
- ``memory`` reads a process's resident set now and its peak (``VmRSS``, ``VmHWM`` of
  ``/proc/<pid>/status``); ``reset_peak`` starts a new peak from the current RSS (writes 5 to
  ``/proc/<pid>/clear_refs``, Linux 4.0+; False where that is not allowed).
- ``busy_seconds`` reads the first line of ``/proc/stat``: CPU seconds the whole machine
  spent busy (all but idle and iowait), to tell how much other load ran during a wave.
- ``settle`` waits until the machine is quiet (``busy_seconds`` over a window), so that work
  left from before (an API server or garbage collector still busy with the objects of the
  last run) is not counted in the next one.
- ``RoleCpu`` samples a tree at chosen moments and reports per role the CPU seconds each
  process used between two samples. Every figure is read from the process itself, never
  derived by subtracting one total from another. A process that exits between two samples
  is counted up to its last sample (``/proc`` forgets it when it is reaped).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

CLK_TCK = os.sysconf("SC_CLK_TCK")
T = TypeVar("T")
COORDINATOR = "coordinator"


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` this module uses."""

    pid: int
    comm: str
    ppid: int
    utime: int  # clock ticks
    stime: int  # clock ticks

    def cpu_seconds(self, clk_tck: int = CLK_TCK) -> float:
        """``utime + stime`` in seconds."""
        return (self.utime + self.stime) / clk_tck


def parse_stat(text: str) -> ProcStat:
    """One ``/proc/<pid>/stat`` line; ``ValueError`` if it is not one."""
    open_, close = text.find("("), text.rfind(")")
    if open_ < 0 or close < open_:
        raise ValueError(f"not a /proc stat line: {text[:80]!r}")
    rest = text[close + 2 :].split()
    if len(rest) < 13:
        raise ValueError(f"not a /proc stat line (too few fields): {text[:80]!r}")
    # rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
    return ProcStat(
        pid=int(text[:open_]),
        comm=text[open_ + 1 : close],
        ppid=int(rest[1]),
        utime=int(rest[11]),
        stime=int(rest[12]),
    )


def _read(pid: int, name: str, parse: Callable[[str], T], proc: str) -> T | None:
    """``parse`` of ``/proc/<pid>/<name>``, or None when the process is gone (or the file is
    not readable, or not what ``parse`` expects)."""
    try:
        with open(f"{proc}/{pid}/{name}", encoding="utf-8", errors="replace") as f:
            return parse(f.read())
    except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
        return None


def read_stat(pid: int, proc: str = "/proc") -> ProcStat | None:
    """The stat of ``pid``, or None when it is gone (or not readable)."""
    return _read(pid, "stat", parse_stat, proc)


def cpu_seconds(pid: int) -> float | None:
    """``utime + stime`` of one live process in seconds, or None if it is gone."""
    stat = read_stat(pid)
    return None if stat is None else stat.cpu_seconds()


@dataclass(frozen=True, slots=True)
class Memory:
    """Resident memory of one process, bytes: now and the peak (since start or the last
    ``reset_peak``)."""

    rss: int
    peak: int


def parse_memory(status: str) -> Memory:
    """``VmRSS`` and ``VmHWM`` of a ``/proc/<pid>/status`` text; ``ValueError`` without them
    (a zombie has neither)."""
    fields: dict[str, int] = {}
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            number, _, unit = value.strip().partition(" ")
            if unit != "kB":
                raise ValueError(f"{name} in {unit!r}, not kB")
            fields[name] = int(number) * 1024
    if len(fields) != 2:
        raise ValueError("no VmRSS and VmHWM in this status")
    return Memory(rss=fields["VmRSS"], peak=fields["VmHWM"])


def memory(pid: int, proc: str = "/proc") -> Memory | None:
    """The resident memory of ``pid``, or None when it is gone (or not readable)."""
    return _read(pid, "status", parse_memory, proc)


def reset_peak(pid: int, proc: str = "/proc") -> bool:
    """Restart ``pid``'s peak RSS from its RSS now; False if it is gone or not allowed."""
    try:
        with open(f"{proc}/{pid}/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return True


def parse_busy(stat_line: str, clk_tck: int = CLK_TCK) -> float:
    """Busy CPU seconds of the machine from the ``cpu`` line of ``/proc/stat`` (all fields but
    idle and iowait, up to steal; guest time is already inside user and nice)."""
    name, *fields = stat_line.split()
    if name != "cpu" or len(fields) < 4:
        raise ValueError(f"not the cpu line of /proc/stat: {stat_line[:80]!r}")
    ticks = [int(x) for x in fields[:8]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks) - idle) / clk_tck


def busy_seconds(proc: str = "/proc") -> float:
    """Busy CPU seconds of the whole machine since boot."""
    with open(f"{proc}/stat", encoding="ascii") as f:
        return parse_busy(f.readline())


SETTLE_CORES = 0.25
SETTLE_WINDOW = 10.0
SETTLE_MAX = 900.0


async def settle(
    busy: Callable[[], float] = busy_seconds,
    *,
    cores: float = SETTLE_CORES,
    window: float = SETTLE_WINDOW,
    limit: float = SETTLE_MAX,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[float, float]:
    """Wait until the machine was busy at most ``cores`` on average over the last ``window``
    seconds, or ``limit`` seconds passed; the seconds waited and the cores busy over the last
    window (above ``cores`` when the limit ended the wait)."""
    start = clock()
    while True:
        t0, b0 = clock(), busy()
        await sleep(window)
        load = (busy() - b0) / max(clock() - t0, 1e-9)
        waited = clock() - start
        if load <= cores or waited >= limit:
            return waited, load


def read_cmdline(pid: int, proc: str = "/proc") -> list[str]:
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            return [part.decode(errors="replace") for part in f.read().split(b"\0") if part]
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []


def descendants(root: int, parents: Mapping[int, int]) -> list[int]:
    """``root`` and every process below it, given each process's parent (pid -> ppid)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.append(pid)
        todo.extend(sorted(children.get(pid, ())))
    return out


def role_of(cmdline: Iterable[str], *, is_root: bool) -> str | None:
    """``coordinator`` for the root, ``worker ID`` for a worker process, else None."""
    if is_root:
        return COORDINATOR
    argv = list(cmdline)
    for i, arg in enumerate(argv[:-1]):
        if arg == "-m" and argv[i + 1] == "workers":
            ident = argv[argv.index("--id") + 1] if "--id" in argv[:-1] else str(i)
            return f"worker {ident}"
    return None


def _parents(proc: str = "/proc") -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in os.listdir(proc):
        if entry.isdigit():
            stat = read_stat(int(entry), proc)
            if stat is not None:
                out[stat.pid] = stat.ppid
    return out


Sample = dict[int, tuple[str, float]]  # pid -> (role, CPU seconds so far)


class RoleCpu:
    """CPU seconds per role of the process tree under ``root`` (see the module docstring)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self._roles: dict[int, str] = {}
        self._last: Sample = {}

    def sample(self) -> Sample:
        """Every known process of the tree now: its role and CPU seconds (a gone process keeps
        its last value)."""
        for pid in descendants(self.root, _parents()):
            if pid not in self._roles:
                role = role_of(read_cmdline(pid), is_root=pid == self.root)
                if role is None:
                    continue
                self._roles[pid] = role
            seconds = cpu_seconds(pid)
            if seconds is not None:
                self._last[pid] = (self._roles[pid], seconds)
        return dict(self._last)


def per_role(before: Sample, after: Sample) -> dict[str, float]:
    """CPU seconds each role used between two samples (a process new in ``after`` counts from 0;
    two processes of one role, a restarted worker, add up)."""
    out: dict[str, float] = {}
    for pid, (role, seconds) in after.items():
        used = seconds - before.get(pid, (role, 0.0))[1]
        out[role] = round(out.get(role, 0.0) + used, 3)
    return out
