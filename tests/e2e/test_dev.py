"""``metashard dev``: the hello-world example from files to a reconciled parent, and Ctrl-C;
on a cluster it did not start, only the controllers it applied, in a namespace it may create.

On the embedded cluster, ``metashard dev`` starts its own (as a user runs it); given
``METASHARD_E2E_KUBECONFIG`` it runs against that cluster with ``--kubeconfig``, in a fresh
namespace, and the test deletes the controller it created. The tests of ``--kubeconfig``
give it the session's cluster, embedded or real.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import orjson
import pytest
import pytest_asyncio

from loadtest.dev.processes import REPO, free_port
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.session import Session
from tests.e2e.conftest import KUBECONFIG_ENV, NAMESPACES
from tests.e2e.hookserver import HookServer
from tests.e2e.test_composite import CCS, CONFIGMAPS, fanout, make_controller, thing
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


# --- on a cluster it did not start ----------------------------------------------------------------


class Dev:
    """``metashard dev`` as a subprocess; its output read line by line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self.lines)

    async def until(self, wanted: str, *, within: float = 60) -> None:
        """Read until a line holds ``wanted``; fails after ``within`` seconds or at its exit."""
        assert self.proc.stdout is not None
        deadline = asyncio.get_running_loop().time() + within
        while not any(wanted in line for line in self.lines):
            left = deadline - asyncio.get_running_loop().time()
            try:
                line = await asyncio.wait_for(self.proc.stdout.readline(), max(left, 0.01))
            except TimeoutError:
                raise AssertionError(f"no {wanted!r} within {within} s:\n{self.text}") from None
            if not line:
                raise AssertionError(f"exited {await self.proc.wait()}:\n{self.text}")
            self.lines.append(line.decode())

    async def stop(self) -> int:
        """Ctrl-C; its exit code once it has stopped, the rest of its output read."""
        assert self.proc.stdout is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
        self.lines.append((await asyncio.wait_for(self.proc.stdout.read(), 60)).decode())
        return await asyncio.wait_for(self.proc.wait(), 60)


async def start_dev(*argv: str) -> Dev:
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-u", "-m", "manager.cli", "dev", *argv),
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    return Dev(proc)


@pytest.fixture
def others() -> Iterator[HookServer]:
    server = HookServer().start()
    yield server
    server.stop()


@pytest_asyncio.fixture
async def fresh(kube: Client) -> AsyncIterator[str]:
    """The name of a namespace that does not exist yet; deleted afterwards if it came to."""
    name = f"e2e-dev-{secrets.token_hex(3)}"
    yield name
    with contextlib.suppress(errors.NotFound):
        await kube.delete(NAMESPACES, name)


@pytest.mark.asyncio
async def test_on_a_cluster_dev_runs_only_the_controllers_it_applied_in_a_fresh_namespace(
    cluster: str,
    kube: Client,
    namespace: str,
    fresh: str,
    others: HookServer,
    tmp_path: Path,
) -> None:
    # a controller dev did not apply, with a parent: another manager's business
    other = await make_controller(kube, others, fanout)
    await thing(kube, namespace, "theirs", other, {"children": 1, "data": "x"})
    port = free_port()
    controller = tmp_path / "controller.yaml"
    text = (EXAMPLES / "hello-world" / "controller.yaml").read_text()
    controller.write_text(LOCAL_HOOK.sub(f"http://127.0.0.1:{port}/", text))
    hello = EXAMPLES / "hello-world"
    log = tmp_path / "log"
    paths = [str(hello / "crd.yaml"), str(controller), str(hello / "parent.yaml")]
    try:
        with hook_process("hello-world", port):
            dev = await start_dev(
                *paths, "--kubeconfig", cluster, "--namespace", fresh, "--log", str(log)
            )
            try:
                await dev.until(WROTE.format(ns=fresh))
            finally:
                code = await dev.stop()
    finally:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CCS, other)
        await _delete_controller(cluster)
    text = dev.text
    assert code == 0, text
    # the namespace it was told to use is created before the objects that go there
    assert text.index(f"created Namespace {fresh}") < text.index(f"created HelloWorld {fresh}/")
    # it says what it runs, and runs only that
    shown = re.search(r"^runs only the controllers applied here, labelled (\S+)=(\S+) ", text, re.M)
    assert shown is not None, text
    assert shown.group(1) == "metashard.io/dev"
    assert f"--target-label-selector {shown.group(1)}={shown.group(2)}" in text
    lines = log.read_bytes().splitlines()
    records = [orjson.loads(line) for line in lines if line.startswith(b"{")]
    started = {r.get("controller") for r in records if r.get("event") == "controller started"}
    assert "hello-world" in started and other not in started, started
    assert others.calls(other) == []
    with pytest.raises(errors.NotFound):
        await kube.get(CONFIGMAPS, "theirs-0", namespace=namespace)


@pytest.mark.asyncio
async def test_a_manifest_of_an_unknown_kind_stops_dev_before_anything_is_written(
    cluster: str, kube: Client, fresh: str, tmp_path: Path
) -> None:
    manifest = tmp_path / "two.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first}\n---\n"
        "apiVersion: example.com/v1\nkind: NoSuchKind\nmetadata: {name: second}\n"
    )
    dev = await start_dev(str(manifest), "--kubeconfig", cluster, "--namespace", fresh)
    code = await asyncio.wait_for(dev.proc.wait(), 60)
    assert dev.proc.stdout is not None
    text = (await dev.proc.stdout.read()).decode()
    assert code == 1, text
    assert "metashard dev: " in text and "NoSuchKind" in text, text
    assert "metashard run" not in text
    with pytest.raises(errors.NotFound):
        await kube.get(NAMESPACES, fresh)  # nothing was written: not even the namespace
