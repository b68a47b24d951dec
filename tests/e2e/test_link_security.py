"""Who can join the worker link of ``metashard run`` on one host: another account cannot.

Running as root, the probe is a process that drops to uid 65534 (``nobody``) after its
imports: it tries the run's ipc socket (the private directory refuses it), the run's
ephemeral CURVE keys (unreadable to it), and a plain HELLO on a loopback tcp bind (refused
by CURVE, counted and logged); against a coordinator with ``--insecure-worker-link`` the
same probe gets its WELCOME. Running as anyone else, the modes that make this so are
checked directly. The start-up refusal of a loopback tcp bind without keys is a unit test
(``tests/unit/manager/cli/test_main.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadtest.dev.processes import REPO, Proc, Processes, free_port
from tests.e2e.harness import eventually, run_directories, with_own_tmpdir

pytestmark = pytest.mark.e2e

NOBODY = 65534
ROOT = os.geteuid() == 0

# Imports first (the interpreter and the repository may be out of nobody's reach), then
# nobody's uid for good, then each attempt; prints what happened as JSON.
_PROBE = """
import json, os, socket, sys
import zmq
from proto.wire import Hello, decode, encode

os.setgroups([])
os.setgid(NOBODY)
os.setuid(NOBODY)
what, target = sys.argv[1], sys.argv[2]
try:
    if what == "read":
        open(target).read()
    elif what == "unix":
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(target)
    else:
        ctx = zmq.Context()
        dealer = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(target)
        dealer.send(encode(Hello("w-rogue", "rogue", 64, os.getpid())))
        if dealer.poll(3000):
            print(json.dumps({"uid": os.getuid(), "answer": repr(decode(dealer.recv()))}))
            sys.exit()
        ctx.destroy(linger=0)
    print(json.dumps({"uid": os.getuid(), "result": "ok"}))
except OSError as e:
    print(json.dumps({"uid": os.getuid(), "result": type(e).__name__}))
""".replace("NOBODY", str(NOBODY))


def as_nobody(what: str, target: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, what, target],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    assert result["uid"] == NOBODY
    return result


def _private(tmp: Path) -> Path:
    (private,) = run_directories(tmp)
    return private


def test_another_account_cannot_join_a_run_over_ipc(cluster: str, tmp_path: Path) -> None:
    procs, tmp = with_own_tmpdir(cluster, tmp_path)
    try:
        run = procs.run(2)
        asyncio.run(eventually(run.ready, within=30, message=procs.logs))
        private = _private(tmp)
        link = private / "link.sock"
        assert stat.S_IMODE(private.stat().st_mode) == 0o700
        assert stat.S_ISSOCK(link.stat().st_mode) and stat.S_IMODE(link.stat().st_mode) == 0o600
        assert link.stat().st_uid == os.geteuid()
        if ROOT:
            assert as_nobody("unix", str(link))["result"] == "PermissionError"
            assert "answer" not in as_nobody("zmq", f"ipc://{link}")
        asyncio.run(eventually(lambda: _workers(run, 2), within=10, message=procs.logs))
    finally:
        procs.close()


def test_another_account_cannot_join_a_run_over_loopback_tcp(cluster: str, tmp_path: Path) -> None:
    """``metashard run --bind tcp://127.0.0.1:PORT`` needs no other flag: it makes ephemeral
    keys that only its own workers can read."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    procs, tmp = with_own_tmpdir(cluster, tmp_path)
    try:
        run = procs.run(2, extra=["--bind", endpoint])
        asyncio.run(eventually(run.ready, within=30, message=procs.logs))
        asyncio.run(eventually(lambda: _workers(run, 2), within=30, message=procs.logs))
        keys = _private(tmp) / "curve"
        for name in ("server.secret", "worker.secret"):
            assert stat.S_IMODE((keys / name).stat().st_mode) == 0o600
        if not ROOT:
            return
        assert as_nobody("read", str(keys / "worker.secret"))["result"] == "PermissionError"
        assert "answer" not in as_nobody("zmq", endpoint)

        async def refused() -> bool:
            values = [
                await run.metric("metashard_wire_peers_refused_total", {"reason": reason})
                for reason in ("protocol", "other")
            ]
            return sum(v or 0.0 for v in values) >= 1

        asyncio.run(eventually(refused, within=10, message=procs.logs))
        assert "refused a peer of the worker link" in run.log.read_text()
        asyncio.run(eventually(lambda: _workers(run, 2), within=10, message=procs.logs))
    finally:
        procs.close()


@pytest.mark.skipif(not ROOT, reason="needs root to probe as another account")
def test_with_insecure_worker_link_another_account_joins(cluster: str, tmp_path: Path) -> None:
    """What the opt-out means, and proof that the probe above can tell: an answer."""
    procs = Processes(kubeconfig=cluster, workdir=tmp_path)
    try:
        coordinator = procs.coordinator()  # the harness passes --insecure-worker-link
        asyncio.run(eventually(coordinator.ready, within=30, message=procs.logs))
        assert "Welcome(" in as_nobody("zmq", procs.endpoint).get("answer", "")
    finally:
        procs.close()


async def _workers(run: Proc, count: int) -> bool:
    return await run.metric("metashard_coordinator_workers") == count
