"""The emulator against the recorded transcripts of a real kube-apiserver v1.36.2.

One test per recorded step of every top-level transcript, of the server-side apply
transcripts still under ``pending/`` and of the transcripts recorded for this repository
(``tests/integration/conformance/``); a scenario's steps run in order against one fresh
emulator (``apiserver_replay.Replay``). Differences the emulator does not (yet) reproduce are listed
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
LOCAL = Path(__file__).with_name("conformance")
"""Transcripts recorded for this repository, in the same format."""
PENDING = (
    "pending/14-ssa-builtins.json",
    "pending/15-ssa-upgrade.json",
    "pending/16-rbac-tokens.json",
)
"""Transcripts under ``pending/`` the emulator reproduces (16 in RBAC mode, see ``access.py``)."""

KNOWN: dict[tuple[str, int], str] = {
    ("17-apply-yaml-text", 19): "the emulator writes a float64 as orjson does "
    "(1.2345678901234567e+19) where Go writes 12345678901234567000",
}


def _scenarios() -> list[Path]:
    """The top-level transcripts, then ``PENDING`` (unless one was promoted to the top level;
    a missing one is kept so that its test fails), then ``LOCAL``'s."""
    top = sorted(CONFORMANCE.glob("[0-9][0-9]-*.json"))
    names = {p.name for p in top}
    pending = [CONFORMANCE / p for p in PENDING if Path(p).name not in names]
    return [*top, *pending, *sorted(LOCAL.glob("[0-9][0-9]-*.json"))]


def _params() -> Iterator[object]:
    for path in _scenarios():
        doc = json.loads(path.read_text())
        for index in range(len(doc["steps"])):
            label = f"{path.stem}[{index}]"
            reason = KNOWN.get((path.stem, index))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(path, index, id=label, marks=marks)


_replays: dict[Path, Replay] = {}


@pytest.fixture(scope="module", autouse=True)
def _close_replays() -> Iterator[None]:
    yield
    for replay in _replays.values():
        replay.close()
    _replays.clear()


@pytest.mark.parametrize(("scenario", "index"), list(_params()))
def test_step(scenario: Path, index: int) -> None:
    replay = _replays.get(scenario)
    if replay is None:
        replay = _replays[scenario] = Replay(scenario)
    problems = replay.result(index)
    step = replay.steps[index]
    request = step.get("request") or {}
    assert not problems, f"{request.get('method', '')} {request.get('path', '')}: " + "\n".join(
        problems
    )


def test_rbac_mode_changes_nothing_for_the_admin(shared_dir: Path) -> None:
    """Every scenario recorded with the cluster-admin token replays the same in RBAC mode."""
    problems: list[str] = []
    shared = sorted((shared_dir / "conformance").glob("[0-9][0-9]-*.json"))
    for path in [*shared, *sorted(LOCAL.glob("[0-9][0-9]-*.json"))]:
        replay = Replay(path, rbac=True)
        try:
            for index in range(len(replay.steps)):
                if (path.stem, index) not in KNOWN:
                    problems.extend(f"{path.stem}[{index}]: {p}" for p in replay.result(index))
        finally:
            replay.close()
    assert not problems, "\n".join(problems)
