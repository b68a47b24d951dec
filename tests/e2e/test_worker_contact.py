"""A worker that cannot join its coordinator says so, with the likely cause, and counts it.

Real worker processes: one against an address nobody listens on (then a coordinator comes up
there, and it joins), one against a coordinator that holds other CURVE keys, one whose key a
coordinator refuses (then one that admits it comes up, and it joins). The worker logs
(JSON, on stderr) ``cannot join the coordinator`` three heartbeat intervals (of the default
1 s: the worker learns the coordinator's only from a WELCOME) after ``worker started``.
"""

from __future__ import annotations

import asyncio
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadtest.dev.processes import HEARTBEAT, WORKER_TIMEOUT
from proto.runtime import curve
from tests.e2e.harness import Proc, Processes, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

WARNING = "cannot join the coordinator"
FIRST_WARNING = 3.0  # seconds: three heartbeat intervals of 1 s (workers.link.contact)
SLACK = 1.5  # a loaded machine's delay on top


def lines(proc: Proc) -> list[dict[str, Any]]:
    out = []
    for line in proc.log.read_bytes().splitlines():
        if line.startswith(b"{"):
            out.append(orjson.loads(line))
    return out


def leaked(log: Path, keys: Path) -> list[str]:
    """The key files of ``keys`` whose text is in ``log``."""
    text = log.read_text()
    return [f.name for f in keys.iterdir() if f.read_text().strip() in text]


def at(line: dict[str, Any]) -> float:
    return datetime.fromisoformat(line["timestamp"]).timestamp()


async def warned(procs: Processes, worker: Proc, cause: str) -> dict[str, Any]:
    """The worker's first warning, once it came; it has the cause and came in time."""

    async def came() -> bool:
        return any(line["event"] == WARNING for line in lines(worker))

    await eventually(came, within=20, message=procs.logs)
    log = lines(worker)
    started = next(line for line in log if line["event"] == "worker started")
    first = next(line for line in log if line["event"] == WARNING)
    assert first["cause"] == cause, first
    assert first["coordinator"] == procs.endpoint
    assert first["level"] == "warning"
    assert FIRST_WARNING - 0.5 <= at(first) - at(started) <= FIRST_WARNING + SLACK, log

    async def counted() -> bool:
        value = await worker.metric("metashard_worker_join_warnings_total", {"cause": cause})
        return (value or 0) >= 1

    await eventually(counted, within=10, message=procs.logs)
    return first


async def test_a_worker_with_nobody_at_its_address_says_so_then_joins(procs: Processes) -> None:
    worker = procs.worker("w-early")
    first = await warned(procs, worker, "connection_refused")
    assert "nothing listens" in first["detail"]
    procs.coordinator()

    async def joined() -> bool:
        return any(line["event"] == "joined coordinator" for line in lines(worker))

    await eventually(joined, within=20, message=procs.logs)


async def test_a_worker_with_other_curve_keys_says_the_handshake_failed(
    procs: Processes, tmp_path: Path
) -> None:
    ours = str(curve.generate(tmp_path / "ours"))
    theirs = str(curve.generate(tmp_path / "theirs"))
    procs.coordinator(extra=["--curve-keys", ours])
    worker = procs.worker("w-stranger", extra=["--curve-keys", theirs])
    first = await warned(procs, worker, "handshake_failed")
    assert "other CURVE keys" in first["detail"]
    assert not leaked(worker.log, Path(theirs))
    assert not any(line["event"] == "joined coordinator" for line in lines(worker))


async def test_a_worker_whose_key_was_refused_joins_a_coordinator_that_admits_it(
    procs: Processes, tmp_path: Path
) -> None:
    """ZeroMQ never tries a connection again once its CURVE key was refused; the worker does, so
    fixing the admitted keys and restarting the coordinator is enough (not the workers too)."""
    ours = curve.generate(tmp_path / "ours")
    stranger = curve.generate(tmp_path / "stranger")  # another worker key pair ...
    for name in (curve.SERVER_SECRET, curve.SERVER_PUBLIC):  # ... for our coordinator
        shutil.copy(ours / name, stranger / name)
    first = procs.coordinator("first", extra=["--curve-keys", str(ours)])
    worker = procs.worker("w-refused", extra=["--curve-keys", str(stranger)])
    first_warning = await warned(procs, worker, "key_refused")
    assert "refused this worker's CURVE key" in first_warning["detail"]
    procs.stop(first)
    admitting = tmp_path / "admitting"
    admitting.mkdir(mode=0o700)
    shutil.copy(ours / curve.SERVER_SECRET, admitting / curve.SERVER_SECRET)
    keys = [(d / curve.WORKER_PUBLIC).read_text().strip() for d in (ours, stranger)]
    (admitting / curve.WORKER_PUBLIC).write_text("\n".join(keys) + "\n")
    procs.coordinator("second", extra=["--curve-keys", str(admitting)])

    async def joined() -> bool:
        return any(line["event"] == "joined coordinator" for line in lines(worker))

    await eventually(joined, within=20, message=procs.logs)
    assert not leaked(worker.log, stranger)


async def test_after_a_coordinator_crash_the_worker_joins_the_next_within_its_join_window(
    procs: Processes,
) -> None:
    """The next coordinator assigns the slots among the workers that joined within its first
    ``worker_timeout - heartbeat_interval`` (``manager.term.grace``): a worker that retries
    its connection at most every heartbeat interval is back within that window, however long
    the coordinator was gone (ZeroMQ's retries back off, so a late start found them 5 s apart)."""
    first = procs.coordinator("first")
    worker = procs.worker("w-back")

    async def ready() -> bool:
        return await worker.ready()

    await eventually(ready, within=20, message=procs.logs)
    procs.kill(first)
    await asyncio.sleep(8.0)  # long after the fence: the retries have backed off
    second = procs.coordinator("second")

    async def rejoined() -> bool:
        return any(line["event"] == "joined coordinator again" for line in lines(worker))

    await eventually(rejoined, within=30, message=procs.logs)
    leading = next(line for line in lines(second) if line["event"] == "leading")
    back = next(line for line in lines(worker) if line["event"] == "joined coordinator again")
    window = WORKER_TIMEOUT - HEARTBEAT
    assert at(back) - at(leading) <= window, (at(back) - at(leading), procs.logs())
