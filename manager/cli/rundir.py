"""The private directory of a ``metashard run``, and the removal of those that dead runs left.

- ``RunDirectory.create()`` makes ``metashard-<pid>-<random>`` in the temporary directory
  (``TMPDIR``), mode 0700 (only this uid, and root, can reach what is inside), and holds an
  exclusive ``flock`` on it for as long as this process lives: the kernel releases it
  however the process ends. It holds the worker link's ipc socket (``link.sock``), the
  workers' metrics sockets (``w<i>.sock``) and ephemeral CURVE keys (``curve/``).
  ``remove()`` removes it; ``metashard run`` does so on every exit it lives to see.
- ``remove_stale()`` removes the directories of runs that are gone (a SIGKILL leaves them
  behind). A directory is removed only when all of these hold: its name is
  ``metashard-<pid>-...``; it is a directory, not a symbolic link, owned by this uid, mode
  0700; no process has that pid; nobody holds its lock (a live run in another pid
  namespace sharing this directory still does); and it holds nothing but what a run puts
  there. Each removal is logged; anything else is left alone, and a failure to remove is
  logged and never stops the run.
  It also removes the private directories in which dead processes kept the ``*-data``
  credentials of their kubeconfig (``proto.kube.kubeconfig``, ``metashard-kubeconfig-<pid>-...``:
  a process removes its own at exit, but not when killed): under the same conditions, but
  for the lock (they have none), and holding nothing but those files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from proto.kube.kubeconfig import DATA_FILES_PREFIX
from proto.runtime.curve import SERVER_PUBLIC, SERVER_SECRET, WORKER_PUBLIC, WORKER_SECRET
from proto.runtime.logs import get_logger

PREFIX: Final = "metashard-"
LINK: Final = "link.sock"
CURVE: Final = "curve"
_NAME: Final = re.compile(rf"{PREFIX}(\d+)-[^/]+")
_SOCKET: Final = re.compile(r"w\d+\.sock")
_DATA_DIR: Final = re.compile(rf"{DATA_FILES_PREFIX}(\d+)-[^/]+")
_DATA_FILE: Final = re.compile(r"[0-9a-f]{32}")
_KEYS: Final = frozenset({SERVER_PUBLIC, SERVER_SECRET, WORKER_PUBLIC, WORKER_SECRET})

log = get_logger("metashard.run")


@dataclass(frozen=True, slots=True)
class RunDirectory:
    path: Path
    _lock: int  # the open directory, locked

    @classmethod
    def create(cls, *, parent: str | None = None) -> RunDirectory:
        path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=parent))
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return cls(path, fd)

    def metrics_socket(self, index: int) -> str:
        """Where worker ``index`` serves its metrics."""
        return str(self.path / f"w{index}.sock")

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._lock)


def remove_stale(*, parent: str | None = None) -> list[Path]:
    """Remove what dead runs left in ``parent`` (default: the temporary directory); return
    the directories removed."""
    folder = Path(parent if parent is not None else tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        path = Path(entry.path)
        if (run := _NAME.fullmatch(entry.name)) is not None:
            stale = _gone(int(run[1])) and _ours(path, _left_by_a_run) and _unlocked(path)
            what = "the private directory of a dead run"
        elif (data := _DATA_DIR.fullmatch(entry.name)) is not None:
            stale = _gone(int(data[1])) and _ours(path, _kubeconfig_file)
            what = "the kubeconfig credential files of a dead process"
        else:
            continue
        if not stale:
            continue
        failures = _remove(path)
        if failures:
            log.warning(f"cannot remove {what}", path=str(path), errors=failures)
        else:
            log.info(f"removed {what}", path=str(path))
            removed.append(path)
    return removed


def _gone(pid: int) -> bool:
    """No process has ``pid`` (one of another user, or a number no pid can be: not gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False
    return False


def _ours(path: Path, left: Callable[[os.DirEntry[str]], bool]) -> bool:
    """A directory of this uid, mode 0700, holding only entries ``left`` recognises."""
    try:
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            return False
        if stat.S_IMODE(info.st_mode) != 0o700:
            return False
        return all(left(entry) for entry in os.scandir(path))
    except OSError:
        return False


def _kubeconfig_file(entry: os.DirEntry[str]) -> bool:
    return _DATA_FILE.fullmatch(entry.name) is not None and entry.is_file(follow_symlinks=False)


def _left_by_a_run(entry: os.DirEntry[str]) -> bool:
    if entry.name == CURVE and entry.is_dir(follow_symlinks=False):
        return {key.name for key in os.scandir(entry.path)} <= _KEYS
    if entry.name == LINK or _SOCKET.fullmatch(entry.name):
        return stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)
    return False


def _remove(path: Path) -> list[str]:
    """Remove ``path`` and what it holds; what could not be removed, and why."""
    failures: list[str] = []
    shutil.rmtree(path, onerror=lambda _f, where, e: failures.append(f"{where}: {e[1]}"))
    return failures


def _unlocked(path: Path) -> bool:
    """Nobody holds the lock of ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        return False
    finally:
        os.close(fd)
