"""``metashard cluster``: Metacontroller CRDs served at start, the kubeconfig printed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

import pytest
import yaml  # type: ignore[import-untyped]

METACONTROLLER = "/apis/metacontroller.k8s.io/v1alpha1"


def start(*flags: str) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "manager.cli", "cluster", "--port", "0", *flags],
        stdout=subprocess.PIPE,
        text=True,
    )
    stdout: IO[str] | None = process.stdout
    assert stdout is not None
    lines = [stdout.readline().rstrip("\n") for _ in range(4)]
    return process, lines


def stop(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=30)
    if process.stdout is not None:
        process.stdout.close()
    return code


def resources(url: str) -> list[str]:
    """The resource names of the Metacontroller group version, polled until served."""
    deadline = time.monotonic() + 10
    while True:
        try:
            with urllib.request.urlopen(url + METACONTROLLER, timeout=5) as response:
                return sorted(r["name"] for r in json.loads(response.read())["resources"])
        except urllib.error.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_cluster_installs_the_crds_and_prints_an_export_line() -> None:
    process, lines = start()
    try:
        url, served, where, export = lines
        assert url.startswith("http://127.0.0.1:")
        assert served == f"# embedded cluster serving at {url}; Metacontroller CRDs installed"
        assert export.startswith("export KUBECONFIG=")
        kubeconfig = Path(export.removeprefix("export KUBECONFIG="))
        assert str(kubeconfig) in where
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["server"] == url
        assert resources(url) == [
            "compositecontrollers",
            "compositecontrollers/status",
            "controllerrevisions",
            "controllerrevisions/status",
            "decoratorcontrollers",
            "decoratorcontrollers/status",
        ]
    finally:
        assert stop(process) == 0
    assert not kubeconfig.exists()  # the temporary kubeconfig goes with the cluster


def test_cluster_writes_the_kubeconfig_asked_for_and_can_leave_the_crds_out(
    tmp_path: Path,
) -> None:
    wanted = tmp_path / "kubeconfig"
    process, lines = start("--kubeconfig", str(wanted), "--no-metacontroller-crds")
    try:
        url = lines[0]
        assert lines[1] == f"# embedded cluster serving at {url}"
        assert lines[3] == f"export KUBECONFIG={wanted}"
        assert yaml.safe_load(wanted.read_text())["clusters"][0]["cluster"]["server"] == url
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url + METACONTROLLER, timeout=5)
        assert missing.value.code == 404
    finally:
        assert stop(process) == 0
