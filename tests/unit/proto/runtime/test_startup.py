from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from proto.kube.errors import ConfigError
from proto.runtime.startup import EXIT_CONFIG, StartupError, guard


def _fail(error: Exception) -> int:
    raise error


@pytest.mark.parametrize("error", [StartupError("port 1 in use"), ConfigError("no kubeconfig")])
def test_a_configuration_failure_is_one_line_and_exit_2(
    error: Exception, capsys: pytest.CaptureFixture[str]
) -> None:
    assert guard("metashard x", lambda: _fail(error), debug=False) == EXIT_CONFIG == 2
    assert capsys.readouterr().err == f"metashard x: error: {error}\n"


def test_debug_adds_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert guard("p", lambda: _fail(StartupError("boom")), debug=True) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("p: error: boom\n")


def test_other_errors_are_bugs_and_propagate() -> None:
    with pytest.raises(KeyError):
        guard("p", lambda: _fail(KeyError("x")), debug=False)
    assert guard("p", lambda: 0, debug=False) == 0


STARTING = """
import os, signal, sys, time
from proto.runtime.startup import exit_cleanly_on_sigterm
if sys.argv[1] == "guarded":
    exit_cleanly_on_sigterm()
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(10)
"""


@pytest.mark.parametrize(("how", "code"), [("guarded", 0), ("plain", -signal.SIGTERM)])
def test_a_sigterm_before_the_loop_runs_exits_0(how: str, code: int) -> None:
    """A process stopped while it starts exits 0 (asked to stop, nothing to clean up); without
    the handler it would die by the signal."""
    done = subprocess.run(
        [sys.executable, "-c", STARTING, how], timeout=30, capture_output=True, check=False
    )
    assert done.returncode == code, done.stderr
    assert done.stderr == b""
