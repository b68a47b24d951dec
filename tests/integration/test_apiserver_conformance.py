"""The emulator against the recorded transcripts of a real kube-apiserver v1.36.2.

One test per recorded step; a scenario's steps run in order against one fresh emulator
(``apiserver_replay.Replay``). Differences the emulator does not (yet) reproduce are listed
in ``KNOWN`` with the reason (and in ``loadtest/apiserver/README.md``) and marked
``xfail(strict=True)``, so fixing one makes its test fail until the entry is removed.
``pending/16-rbac-tokens.json`` runs in RBAC mode; one more test replays the admin's
scenarios in RBAC mode too, which must change nothing for the admin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SHARED
from tests.integration.apiserver_replay import Replay

CONFORMANCE = SHARED / "conformance"
SSA = "server-side apply is not implemented: the emulator answers 415 to apply patches"
SSA_CASCADE = "the object was to be created by a server-side apply, which the emulator refuses"

KNOWN: dict[tuple[str, int], str] = {
    **{("09-server-side-apply", i): SSA for i in (*range(3, 11), *range(12, 14), 15, 16, 17)},
    **{("09-server-side-apply", i): SSA for i in range(19, 26)},
    ("09-server-side-apply", 11): SSA_CASCADE,
    ("09-server-side-apply", 14): SSA_CASCADE,
    ("09-server-side-apply", 26): SSA_CASCADE,
}


PENDING_ADDED = ("16-rbac-tokens.json",)
"""Transcripts under ``pending/`` whose support exists (16: RBAC mode, see ``access.py``)."""


def _scenarios() -> list[Path]:
    pending = [CONFORMANCE / "pending" / name for name in PENDING_ADDED]
    return sorted(CONFORMANCE.glob("[0-9][0-9]-*.json")) + pending


def _params() -> Iterator[object]:
    for path in _scenarios():
        doc = json.loads(path.read_text())
        for index in range(len(doc["steps"])):
            label = f"{path.stem}[{index}]"
            reason = KNOWN.get((path.stem, index))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(str(path.relative_to(CONFORMANCE)), index, id=label, marks=marks)


_replays: dict[str, Replay] = {}


@pytest.fixture(scope="module", autouse=True)
def _close_replays() -> Iterator[None]:
    yield
    for replay in _replays.values():
        replay.close()
    _replays.clear()


@pytest.mark.parametrize(("scenario", "index"), list(_params()))
def test_step(shared_dir: Path, scenario: str, index: int) -> None:
    replay = _replays.get(scenario)
    if replay is None:
        replay = _replays[scenario] = Replay(shared_dir / "conformance" / scenario)
    problems = replay.result(index)
    step = replay.steps[index]
    request = step.get("request") or {}
    assert not problems, f"{request.get('method', '')} {request.get('path', '')}: " + "\n".join(
        problems
    )


def test_rbac_mode_changes_nothing_for_the_admin(shared_dir: Path) -> None:
    """Every scenario recorded with the cluster-admin token replays the same in RBAC mode."""
    problems = []
    for path in sorted((shared_dir / "conformance").glob("[0-9][0-9]-*.json")):
        replay = Replay(path, rbac=True)
        try:
            for index in range(len(replay.steps)):
                if (path.stem, index) not in KNOWN:
                    problems.extend(f"{path.stem}[{index}]: {p}" for p in replay.result(index))
        finally:
            replay.close()
    assert not problems, "\n".join(problems)
