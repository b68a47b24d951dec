from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from manager.cli.main import PROCESS_ROLES, _worker_flags, run_parser
from manager.settings import from_namespace

ROOT = Path(__file__).resolve().parents[4]


def test_version_and_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "manager.cli", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0
    assert out.stdout.startswith("metashard ")
    usage = subprocess.run([sys.executable, "-m", "manager.cli"], capture_output=True, text=True)
    assert usage.returncode == 2
    assert "usage: metashard" in usage.stdout


def test_the_command_line_imports_no_coordinator_client_or_aiohttp() -> None:
    """``metashard run`` starts its workers before it imports the coordinator: this keeps the
    part before that (parsing and checking the configuration) cheap."""
    heavy = (
        "aiohttp",
        "manager.coordinator",
        "manager.election.elector",
        "proto.kube.client",
        "kubernetes",
    )
    script = (
        "import sys\nimport manager.cli.main\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def _refused(argv: list[str], env: dict[str, str] | None = None) -> str:
    """``metashard ARGV`` must exit 2 with one ``error:`` line and no traceback."""
    out = subprocess.run(
        [sys.executable, "-m", "manager.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, out.stderr
    return errors[0]


@pytest.mark.parametrize(
    "command", ["coordinator --insecure-worker-link", "worker --coordinator tcp://127.0.0.1:1"]
)
def test_configuration_failures_are_one_line_and_exit_2(
    command: str, tmp_path: Path, busy_port: int, offline_kubeconfig: str
) -> None:
    argv = command.split()
    ports = ["--metrics-address", "127.0.0.1:0", "--health-probe-bind-address", "0"]
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("clusters: [unclosed\n")
    good = offline_kubeconfig
    cases = [
        (["--kubeconfig", str(tmp_path / "missing")], "no such file"),
        (["--kubeconfig", str(bad_yaml)], f"kubeconfig {bad_yaml}:"),
        (["--kubeconfig", good, "--metrics-address", ":99999"], "port from 0 to 65535"),
        (["--kubeconfig", good, "--log-level", "loud"], "unknown log level"),
        (["--kubeconfig", good, "--metrics-address", f"127.0.0.1:{busy_port}"], "cannot listen"),
        (["--kubeconfig", good, "--health-probe-bind-address", f":{busy_port}"], "cannot listen"),
    ]
    cases += [
        (["--kubeconfig", good, "--apply-strategy", "patch"], "'patch' is not one of"),
        (["--kubeconfig", good, "--apply-strategy-ssa-field-manager="], "must not be empty"),
    ]
    for flags, says in cases:
        assert says in _refused([*argv, *ports, *flags]), flags
    home = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    assert "no cluster configuration found" in _refused([*argv, *ports], env=home)


def test_a_coordinator_refuses_a_worker_socket_in_use(
    busy_port: int, offline_kubeconfig: str
) -> None:
    line = _refused(
        [
            "coordinator",
            "--kubeconfig",
            offline_kubeconfig,
            "--health-probe-bind-address",
            "0",
            "--metrics-address",
            "0",
            "--insecure-worker-link",
            "--bind",
            f"tcp://127.0.0.1:{busy_port}",
        ]
    )
    assert f"--bind tcp://127.0.0.1:{busy_port}: Address already in use" in line


def test_the_traceback_is_printed_at_debug_level(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "manager.cli",
            "coordinator",
            "--insecure-worker-link",
            "--log-level",
            "debug",
            "--kubeconfig",
            str(tmp_path / "missing"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "Traceback" in out.stderr and "ConfigError" in out.stderr
    assert out.stderr.rstrip().endswith("no such file")


def test_metacontrollers_chart_arguments_are_accepted_by_both_roles(tmp_path: Path) -> None:
    chart = [
        "--zap-log-level=4",
        "--log-level=info",  # ours wins; alone, level 4 is debug: tracebacks too
        "--discovery-interval=20s",
        "--cache-flush-interval=30m",
        "--metrics-address=0",
        "--health-probe-bind-address=0",
    ]
    missing = ["--kubeconfig", str(tmp_path / "missing")]
    for command in (
        ["coordinator", "--insecure-worker-link"],
        ["worker", "--coordinator", "tcp://c:7070"],
        ["run"],
    ):
        # They parse: what fails is the kubeconfig, after them.
        assert "no such file" in _refused([*command, *chart, *missing])
    assert "unrecognized arguments: --no-such-flag" in _refused(["run", "--no-such-flag"])


def test_run_checks_the_timings_too() -> None:
    line = _refused(["run", "--heartbeat-interval", "1s", "--worker-timeout", "2s"])
    assert "--worker-timeout must be at least 3 x --heartbeat-interval" in line


def test_an_open_worker_socket_is_refused_before_anything_starts(tmp_path: Path) -> None:
    line = _refused(["coordinator", "--kubeconfig", str(tmp_path / "missing")])
    assert "--bind tcp://0.0.0.0:7070 is reachable from other hosts" in line
    line = _refused(["coordinator", "--bind", "tcp://127.0.0.1:7070"])
    assert line == (
        "metashard coordinator: error: --bind tcp://127.0.0.1:7070 without --curve-keys would "
        "let every account on this host join the worker link: give --curve-keys DIR "
        "(metashard curve-keys DIR writes a set), bind ipc://PATH, or pass "
        "--insecure-worker-link (see --help)"
    )
    line = _refused(["coordinator", "--curve-keys", str(tmp_path / "none")])
    assert "--curve-keys" in line


def test_run_checks_the_leader_election_timings_too() -> None:
    line = _refused(["run", "--leader-election", "--leader-election-renew-deadline", "20s"])
    assert "renew" in line.lower()


def test_rollout_is_a_subcommand(tmp_path: Path) -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "manager.cli", "--help"], capture_output=True, text=True
    )
    assert "rollout" in listed.stdout
    missing = tmp_path / "missing"
    argv = ["rollout", "status", "things/x", "--kubeconfig", str(missing)]
    out = subprocess.run(
        [sys.executable, "-m", "manager.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr == f"metashard rollout: error: kubeconfig {missing}: no such file\n"


def test_run_gives_its_workers_the_revision_flags() -> None:
    def flags(*argv: str) -> list[str]:
        args = run_parser().parse_args(["--bind", "ipc:///tmp/x.sock", *argv])
        return _worker_flags(from_namespace(args, role="run"), args)

    given = flags("--revision-history-limit", "2", "--cluster-revision-namespace", "revs")
    assert given[given.index("--revision-history-limit") + 1] == "2"
    assert given[given.index("--cluster-revision-namespace") + 1] == "revs"
    assert "--revision-history-limit" not in flags()


@pytest.mark.parametrize(
    "flags",
    [[], ["--apply-strategy=server-side-apply", "--apply-strategy-ssa-field-manager", "me"]],
)
def test_run_passes_the_apply_strategy_to_its_workers(flags: list[str]) -> None:
    from workers.settings import from_args as worker_settings

    args = run_parser().parse_args(["--bind", "ipc:///x", *flags])
    settings = from_namespace(args, role="run")
    worker = worker_settings(["--coordinator=ipc:///x", *_worker_flags(settings, args)], {})
    assert worker.common.apply.strategy == args.apply_strategy
    assert worker.common.apply.field_manager == (
        args.apply_strategy_ssa_field_manager or "metacontroller"
    )


def test_every_process_role_is_kept_apart_from_the_coordinator_by_a_contract() -> None:
    """``metashard worker|cluster|dev`` exec ``python -m MODULE``: import-linter cannot see that
    dependency, so each module must be the source of a contract that forbids the coordinator
    (or be one side of an independence contract with it)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]

    def covered(module: str) -> bool:
        for contract in contracts:
            if contract["type"] == "forbidden":
                if (
                    module in contract["source_modules"]
                    and "manager" in contract["forbidden_modules"]
                ):
                    return True
            elif contract["type"] == "independence" and {module, "manager"} <= set(
                contract["modules"]
            ):
                return True
        return False

    assert PROCESS_ROLES, "no process roles"
    for module in PROCESS_ROLES.values():
        assert importlib.util.find_spec(f"{module}.__main__") is not None, module
        assert covered(module), f"no import contract keeps {module} apart from manager"
