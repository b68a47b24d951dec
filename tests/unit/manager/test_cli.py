from __future__ import annotations

import subprocess
import sys


def test_version_and_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "manager.cli", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0
    assert out.stdout.startswith("metashard ")
    usage = subprocess.run([sys.executable, "-m", "manager.cli"], capture_output=True, text=True)
    assert usage.returncode == 2
    assert "usage: metashard" in usage.stdout
