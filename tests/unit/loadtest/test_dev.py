"""loadtest.dev.command: what a log record of metashard's processes becomes on the dev loop's
screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadtest.dev.command import main, render

T = "2026-01-02T03:04:05.678Z"


@pytest.mark.parametrize(
    ("record", "line"),
    [
        (
            {
                "event": "reconciled",
                "level": "info",
                "timestamp": T,
                "controller": "CompositeController-hello-world",
                "key": "default/hello",
                "result": "success",
                "wrote": ["create configmaps default/hello-greeting", "update status of x"],
                "hook_seconds": 0.0042,
                "worker": "w0",
            },
            "03:04:05 hello-world default/hello success: "
            "create configmaps default/hello-greeting; update status of x (hook 4 ms)",
        ),
        (  # nothing written: not shown
            {"event": "reconciled", "level": "debug", "timestamp": T, "wrote": []},
            None,
        ),
        (
            {
                "event": "reconcile failed",
                "level": "warning",
                "timestamp": T,
                "controller": "DecoratorController-digest",
                "error": "boom",
            },
            "03:04:05 WARNING reconcile failed controller=DecoratorController-digest error=boom",
        ),
        (  # the coordinator's life cycle is shown, the workers' echo of it is not
            {"event": "controller started", "level": "info", "timestamp": T, "controller": "c"},
            "03:04:05 controller started controller=c",
        ),
        (
            {"event": "controller started", "level": "info", "timestamp": T, "worker": "w0"},
            None,
        ),
        (
            {"event": "waiting 1 s for workers", "level": "info", "timestamp": T, "epoch": 7},
            "03:04:05 waiting 1 s for workers epoch=7",
        ),
        ({"event": "worker joined", "level": "info", "timestamp": T}, None),
    ],
)
def test_render(record: dict[str, Any], line: str | None) -> None:
    assert render(record) == line


def test_unreadable_manifests_stop_it_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: ConfigMap\n")
    assert main([str(bad)]) == 2
    out = capsys.readouterr()
    assert f"metashard dev: {bad}: an object without apiVersion" in out.err
    assert "starting the embedded cluster" not in out.out
