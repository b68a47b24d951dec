from __future__ import annotations

import socket
from pathlib import Path

import pytest

from manager import preflight
from proto.kube.errors import ConfigError
from proto.runtime.startup import StartupError


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("tests.e2e.recorder", "expected MODULE:CALLABLE"),
        (":factory", "expected MODULE:CALLABLE"),
        ("no_such_module:factory", "no module named 'no_such_module'"),
        ("tests.no_such_module:factory", "no module named 'tests.no_such_module'"),
        ("no_such_package.sub:factory", "no module named 'no_such_package.sub'"),
    ],
)
def test_a_reconciler_the_workers_cannot_import_is_refused(spec: str, says: str) -> None:
    with pytest.raises(StartupError, match=says):
        preflight.check_reconciler(spec)


def test_a_reconciler_module_is_found_without_importing_the_workers() -> None:
    preflight.check_reconciler("tests.e2e.recorder:factory")  # the callable is the worker's


def test_a_reconciler_module_is_found_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_reconciler_here.py").write_text("def factory(ctx): ...\n")
    monkeypatch.chdir(tmp_path)
    preflight.check_reconciler("my_reconciler_here:factory")


def test_the_worker_socket_is_bound_and_released(busy_port: int, tmp_path: Path) -> None:
    with pytest.raises(StartupError, match="Address already in use"):
        preflight.check_bind(f"tcp://127.0.0.1:{busy_port}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    preflight.check_bind(f"tcp://127.0.0.1:{free}")
    preflight.check_bind(f"tcp://127.0.0.1:{free}")  # released: binds again
    preflight.check_bind(f"ipc://{tmp_path}/link.sock")
    with pytest.raises(StartupError, match="--bind ipc://"):
        preflight.check_bind(f"ipc://{tmp_path}/no/such/dir/link.sock")


def test_endpoints_and_cluster_configuration(busy_port: int, tmp_path: Path) -> None:
    preflight.check_endpoints(metrics="127.0.0.1:0", health="0")
    with pytest.raises(StartupError, match="--health-probe-bind-address"):
        preflight.check_endpoints(metrics="0", health=f"127.0.0.1:{busy_port}")
    with pytest.raises(ConfigError, match="no such file"):
        preflight.check_cluster_config(str(tmp_path / "missing"))
