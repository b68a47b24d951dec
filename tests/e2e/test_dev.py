"""``metashard dev``: the hello-world example from files to a reconciled parent, and Ctrl-C.

On the embedded cluster, ``metashard dev`` starts its own (as a user runs it); given
``METASHARD_E2E_KUBECONFIG`` it runs against that cluster with ``--kubeconfig``, in a fresh
namespace, and the test deletes the controller it created.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from loadtest.dev.processes import REPO, free_port
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.session import Session
from tests.e2e.conftest import KUBECONFIG_ENV
from tests.e2e.test_examples import EXAMPLES, LOCAL_HOOK, hook_process

pytestmark = pytest.mark.e2e

WROTE = "hello-world {ns}/hello success: create configmaps {ns}/hello-greeting"


async def _delete_controller(kubeconfig: str) -> None:
    async with Session(load_config(kubeconfig), qps=0) as session:
        client = Client(session)
        ccs = await client.resource(
            "metacontroller.k8s.io/v1alpha1", resource="compositecontrollers"
        )
        with contextlib.suppress(errors.NotFound):
            await client.delete(ccs, "hello-world")


def test_metashard_dev_runs_hello_world_and_stops_on_ctrl_c(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    real = os.environ.get(KUBECONFIG_ENV)
    namespace = "default"
    extra: list[str] = []
    if real:
        namespace = request.getfixturevalue("namespace")
        extra = ["--kubeconfig", real, "--namespace", namespace]
    port = free_port()
    controller = tmp_path / "controller.yaml"
    text = (EXAMPLES / "hello-world" / "controller.yaml").read_text()
    controller.write_text(LOCAL_HOOK.sub(f"http://127.0.0.1:{port}/", text))
    hello = EXAMPLES / "hello-world"
    command = [sys.executable, "-u", "-m", "manager.cli", "dev", str(hello / "crd.yaml")]
    command += [str(controller), str(hello / "parent.yaml"), "--log", str(tmp_path / "log")]
    with hook_process("hello-world", port):
        dev = subprocess.Popen(
            command + extra,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        output: list[str] = []
        try:
            assert dev.stdout is not None
            deadline = time.monotonic() + 60
            want = WROTE.format(ns=namespace)
            for line in dev.stdout:
                output.append(line)
                if want in line or time.monotonic() > deadline:
                    break
            text = "".join(output)
            assert want in text, text
            dev.send_signal(signal.SIGINT)
            rest = dev.stdout.read()
            assert dev.wait(timeout=60) == 0, text + rest
        finally:
            if dev.poll() is None:
                dev.kill()
                dev.wait()
            if real:
                asyncio.run(_delete_controller(real))
    assert re.search(r"^export KUBECONFIG=\S+$", text, re.MULTILINE), text
    assert "created CompositeController hello-world" in text
    assert f"created HelloWorld {namespace}/hello" in text
    assert re.search(r"\(hook \d+ ms\)", text), text
    assert "stopped. metashard's log is kept in" in rest
    assert '"event":"reconciled"' in (tmp_path / "log").read_text()
    if not real:  # the embedded cluster it started is gone
        url = re.search(r"^cluster: (\S+)$", text, re.MULTILINE)
        assert url is not None, text
        with pytest.raises(OSError):
            urllib.request.urlopen(url.group(1) + "/version", timeout=2)
