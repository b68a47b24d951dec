"""loadtest.dev.command: what a log record of metashard's processes becomes on the dev loop's
screen, and the label that keeps it to the controllers it applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadtest.dev.command import DEV_LABEL, labelled, main, render, scope_line

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
    assert out.err.startswith(f"metashard dev: error: {bad}: an object without apiVersion")
    assert "starting the embedded cluster" not in out.out


def test_only_the_controllers_among_the_manifests_get_the_label() -> None:
    cc: dict[str, Any] = {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": "cc", "labels": {"team": "a"}},
    }
    dc = {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "DecoratorController",
        "metadata": {"name": "dc"},
    }
    lookalike = {
        "apiVersion": "example.com/v1",
        "kind": "CompositeController",
        "metadata": {"name": "x"},
    }
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}
    objects, names = labelled([cc, cm, dc, lookalike], "ab12cd")
    assert names == ["CompositeController cc", "DecoratorController dc"]
    assert objects[0]["metadata"]["labels"] == {"team": "a", DEV_LABEL: "ab12cd"}
    assert objects[2]["metadata"]["labels"] == {DEV_LABEL: "ab12cd"}
    assert objects[1] is cm and objects[3] is lookalike
    assert cc["metadata"]["labels"] == {"team": "a"}  # the manifests are not changed


def test_the_scope_line_names_the_selector_and_the_controllers() -> None:
    line = scope_line(f"{DEV_LABEL}=ab12cd", ["CompositeController cc"])
    assert line.startswith(f"runs only the controllers applied here, labelled {DEV_LABEL}=ab12cd")
    assert f"--target-label-selector {DEV_LABEL}=ab12cd" in line
    assert "CompositeController cc" in line and "other controllers are left alone" in line
    assert scope_line(f"{DEV_LABEL}=ab12cd", []).startswith("runs no controller")
