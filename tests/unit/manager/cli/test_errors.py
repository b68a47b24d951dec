"""Every ``metashard`` command reports a failure the same way: one line on stderr,
``metashard <command>: error: <message>``, no usage dump, no traceback; exit code 2 for what
the command line names (a flag, an argument, a file, the kubeconfig), 1 for a failure once
it ran (the cluster refused or did not answer, an object is missing or broken, a timeout)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
CONTROLLER = {
    "apiVersion": "metacontroller.k8s.io/v1alpha1",
    "kind": "CompositeController",
    "metadata": {"name": "good"},
    "spec": {
        "parentResource": {"apiVersion": "example.com/v1", "resource": "things"},
        "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
        "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:1/sync"}}},
    },
}


def metashard(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "manager.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "PYTHONPATH": str(REPO)},
    )


def error_lines(out: subprocess.CompletedProcess[str], command: str) -> list[str]:
    """The stderr lines, each of which must be an error line of ``command``."""
    assert "Traceback" not in out.stderr, out.stderr
    assert "usage:" not in out.stderr, out.stderr
    lines = out.stderr.splitlines()
    prefix = f"metashard {command}: error: " if command else "metashard: error: "
    assert lines and all(line.startswith(prefix) for line in lines), out.stderr
    return [line.removeprefix(prefix) for line in lines]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "--processes", "abc"], "argument --processes: invalid int value: 'abc'"),
        (["dev", "--processes", "abc"], "argument --processes: invalid int value: 'abc'"),
        (["run", "--processes", "0"], "argument --processes: must be at least 1, got 0"),
        (["rollout", "status"], "the following arguments are required: RESOURCE/NAME"),
        (["rollout", "bogus", "things/x"], "argument action: invalid choice: 'bogus'"),
        (["rollout", "status", "things"], "name the parent as RESOURCE/NAME, not 'things'"),
        (["rollout", "undo", "things/x", "--to-revision", "x"], "invalid int value: 'x'"),
        (["rbac", "--output", "bogus"], "argument --output: invalid choice: 'bogus'"),
        (["rbac", "/nonexistent/controllers.yaml"], "/nonexistent/controllers.yaml: no such file"),
        (["curve-keys"], "the following arguments are required: directory"),
        (["cluster", "--port", "abc"], "argument --port: invalid int value: 'abc'"),
        (["dev", "/nonexistent/x.yaml"], "/nonexistent/x.yaml: no such file or directory"),
        (["sync"], "name a parent (RESOURCE/NAME) or --controller NAME"),
        (["sync", "things"], "name the parent as RESOURCE/NAME, not 'things'"),
        (["sync", "--controller", "x", "-n", "ns"], "controller objects have no namespace"),
    ],
)
def test_a_bad_command_line_is_one_error_line_and_exit_2(argv: list[str], says: str) -> None:
    out = metashard(*argv)
    assert out.returncode == 2, out.stderr
    (line,) = error_lines(out, argv[0])
    assert says in line


def test_an_unknown_command_is_the_same_shape() -> None:
    out = metashard("bogus")
    assert out.returncode == 2
    (line,) = error_lines(out, "")
    assert "invalid choice: 'bogus'" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["rollout", "status", "things/x"],
        ["rbac"],
        ["sync", "things/x"],
    ],
)
def test_no_usable_kubeconfig_is_a_configuration_failure(argv: list[str], tmp_path: Path) -> None:
    for flags, says in (
        ([], "no cluster configuration found"),
        (["--kubeconfig", str(tmp_path / "missing")], "no such file"),
    ):
        out = metashard(*argv, *flags)
        assert out.returncode == 2, out.stderr
        (line,) = error_lines(out, argv[0])
        assert says in line


@pytest.mark.parametrize(
    "argv", [["rollout", "status", "things/x"], ["rbac"], ["sync", "--controller", "x"]]
)
def test_a_cluster_that_does_not_answer_is_a_runtime_failure(
    argv: list[str], offline_kubeconfig: str
) -> None:
    out = metashard(*argv, "--kubeconfig", offline_kubeconfig)
    assert out.returncode == 1, out.stderr
    (line,) = error_lines(out, argv[0])
    assert "127.0.0.1" in line


def test_rbac_reports_every_broken_controller(tmp_path: Path) -> None:
    broken = json.loads(json.dumps(CONTROLLER))
    broken["metadata"]["name"] = "no-parent"
    del broken["spec"]["parentResource"]
    other = json.loads(json.dumps(CONTROLLER))
    other["metadata"]["name"] = "no-resource"
    del other["spec"]["childResources"][0]["resource"]
    path = tmp_path / "controllers.json"
    path.write_text(json.dumps({"kind": "List", "items": [broken, CONTROLLER, other]}))
    out = metashard("rbac", str(path), "--no-related")
    assert out.returncode == 1, out.stderr
    assert out.stdout == ""
    lines = error_lines(out, "rbac")
    assert len(lines) == 2, lines
    assert lines[0].startswith("CompositeController no-parent: spec.parentResource")
    assert lines[1].startswith("CompositeController no-resource: spec.childResources[0].resource")


def test_cluster_help_names_the_command_and_reads_as_plain_text() -> None:
    out = metashard("cluster", "--help")
    assert out.returncode == 0
    assert out.stdout.startswith("usage: metashard cluster ")
    assert "loadtest" not in out.stdout and "``" not in out.stdout
