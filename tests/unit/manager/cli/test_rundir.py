from __future__ import annotations

import fcntl
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from manager.cli.rundir import RunDirectory, remove_stale
from proto.runtime.curve import generate


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _left_behind(parent: Path, pid: int, name: str = "x") -> Path:
    """A run directory as a SIGKILL leaves it: sockets, keys, mode 0700."""
    path = parent / f"metashard-{pid}-{name}"
    path.mkdir(mode=0o700)
    for sock in ("link.sock", "w0.sock", "w1.sock"):
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path / sock))
    generate(path / "curve")
    return path


def test_a_run_directory_is_private_locked_and_removed(tmp_path: Path) -> None:
    run = RunDirectory.create(parent=str(tmp_path))
    assert run.path.parent == tmp_path
    assert run.path.name.startswith(f"metashard-{os.getpid()}-")
    assert stat.S_IMODE(run.path.stat().st_mode) == 0o700
    assert run.metrics_socket(3) == str(run.path / "w3.sock")
    fd = os.open(run.path, os.O_RDONLY)
    with pytest.raises(BlockingIOError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    run.remove()
    assert not run.path.exists()
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released
    os.close(fd)


def test_what_a_dead_run_left_is_removed_and_logged(tmp_path: Path) -> None:
    stale = _left_behind(tmp_path, _dead_pid())
    empty = tmp_path / f"metashard-{_dead_pid()}-y"
    empty.mkdir(mode=0o700)
    with capture_logs() as logs:
        assert sorted(remove_stale(parent=str(tmp_path))) == sorted([stale, empty])
    assert list(tmp_path.iterdir()) == []
    assert {(line["event"], line["path"]) for line in logs} == {
        ("removed the private directory of a dead run", str(stale)),
        ("removed the private directory of a dead run", str(empty)),
    }


def test_a_live_run_is_left_alone_also_in_another_pid_namespace(tmp_path: Path) -> None:
    live = RunDirectory.create(parent=str(tmp_path))  # this process: alive
    # A pid this namespace does not know, but a live process holds the lock.
    elsewhere = _left_behind(tmp_path, _dead_pid(), "elsewhere")
    fd = os.open(elsewhere, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert remove_stale(parent=str(tmp_path)) == []
        assert live.path.exists() and elsewhere.exists()
    finally:
        os.close(fd)
        live.remove()
    assert remove_stale(parent=str(tmp_path)) == [elsewhere]


def test_only_what_a_run_makes_is_removed(tmp_path: Path) -> None:
    pid = _dead_pid()
    foreign = _left_behind(tmp_path, pid, "foreign")
    (foreign / "notes.txt").write_text("mine")
    open_mode = _left_behind(tmp_path, pid, "open")
    open_mode.chmod(0o755)
    a_file = _left_behind(tmp_path, pid, "file")
    (a_file / "link.sock").unlink()
    (a_file / "link.sock").write_text("not a socket")
    odd_key = _left_behind(tmp_path, pid, "key")
    (odd_key / "curve" / "extra").write_text("")
    target = _left_behind(tmp_path, pid, "target")
    target.rename(tmp_path / "elsewhere")
    link = tmp_path / f"metashard-{pid}-link"
    link.symlink_to(tmp_path / "elsewhere")
    named = _left_behind(tmp_path, pid, "named")
    named.rename(tmp_path / f"metashard-x{pid}-named")
    _left_behind(tmp_path, 2**31, "n")  # no pid can be that large
    before = sorted(tmp_path.iterdir())
    assert remove_stale(parent=str(tmp_path)) == []
    assert sorted(tmp_path.iterdir()) == before
    assert (tmp_path / "elsewhere" / "link.sock").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory away")
def test_another_users_directory_is_left_alone(tmp_path: Path) -> None:
    theirs = _left_behind(tmp_path, _dead_pid())
    os.chown(theirs, 65534, 65534)
    assert remove_stale(parent=str(tmp_path)) == []
    assert theirs.exists()


def test_a_missing_temporary_directory_is_nothing_to_clean(tmp_path: Path) -> None:
    assert remove_stale(parent=str(tmp_path / "missing")) == []


KILLED_HOLDING_CREDENTIALS = """
import os, sys
from proto.kube.kubeconfig import _DATA_FILES
print(os.getpid(), _DATA_FILES.path(b"client key"), flush=True)
os.kill(os.getpid(), 9)
"""


def test_the_kubeconfig_files_a_killed_process_left_are_removed(tmp_path: Path) -> None:
    """A process killed with SIGKILL leaves the private directory of its kubeconfig's
    ``*-data`` files; a live process's, or one holding anything else, is left alone."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", KILLED_HOLDING_CREDENTIALS],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == -9
    pid, file = done.stdout.split()
    left = Path(file).parent
    assert left.parent == tmp_path and left.name.startswith(f"metashard-kubeconfig-{pid}-")
    live = tmp_path / f"metashard-kubeconfig-{os.getpid()}-x"
    live.mkdir(mode=0o700)
    other = tmp_path / f"metashard-kubeconfig-{_dead_pid()}-y"
    other.mkdir(mode=0o700)
    (other / "notes.txt").write_text("not a credential file of ours")
    with capture_logs() as logs:
        assert remove_stale(parent=str(tmp_path)) == [left]
    assert sorted(tmp_path.iterdir()) == sorted([live, other])
    assert [(line["event"], line["path"]) for line in logs] == [
        ("removed the kubeconfig credential files of a dead process", str(left))
    ]
