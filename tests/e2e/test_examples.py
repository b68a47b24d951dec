"""The examples in ``examples/`` work as their READMEs say, run by real metashard processes.

Each test applies an example's CRD and controller (``crd.yaml``, ``controller.yaml``) with
the hook URL's port replaced by a free one, starts its hook as ``python3 hook.py PORT``,
applies ``parent.yaml`` in a fresh namespace and checks what the README promises. One
coordinator and two workers serve the module (the ``stack`` fixture). The module runs its
own embedded cluster with the fake kubelet on, so that the rolling-update example's Pods
turn Ready. Nothing else depends on the embedded cluster: given ``METASHARD_E2E_KUBECONFIG``
the same tests run on a real cluster, except the rolling update (see its test).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from loadtest.dev import manifests
from loadtest.dev.processes import REPO, free_port
from manager.cli import rollout, sync
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.e2e.conftest import KUBECONFIG_ENV, cluster_kubeconfig
from tests.e2e.harness import Processes, eventually
from tests.e2e.podwatch import PODS, pod_watch, ready

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

EXAMPLES = REPO / "examples"
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
REVISIONS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "controllerrevisions", "ControllerRevision", True
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
EVENTS = Resource("", "v1", "events", "Event", True)
LOCAL_HOOK = re.compile(r"http://127\.0\.0\.1:\d+/")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """This module's own cluster: embedded with the fake kubelet (Pods turn Running and Ready
    as soon as they exist), or the real one."""
    with cluster_kubeconfig(kubelet=True) as kubeconfig:
        yield kubeconfig


def with_port(objects: list[dict[str, Any]], port: int) -> list[dict[str, Any]]:
    """``objects`` with every local hook URL pointing at ``port``."""
    text = LOCAL_HOOK.sub(f"http://127.0.0.1:{port}/", json.dumps(objects))
    return list(json.loads(text))


@contextlib.contextmanager
def hook_process(example: str, port: int, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """``python3 examples/<example>/hook.py PORT ARGS...``, once it accepts connections."""
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / example / "hook.py"), str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                _, stderr = proc.communicate(timeout=10)
                raise AssertionError(f"the {example} hook did not start: {stderr.decode()}")
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


Run = Callable[..., Awaitable[list[dict[str, Any]]]]


@pytest_asyncio.fixture
async def run_example(kube: Client, namespace: str, stack: Processes) -> AsyncIterator[Run]:
    """``await run_example(name, *hook_args)``: the example's controller and hook (given
    ``hook_args`` after its port) running, its parent objects applied in ``namespace``;
    returns the parent objects. Cleans up after the test."""
    started: list[contextlib.ExitStack] = []
    controllers: list[dict[str, Any]] = []

    async def run(example: str, *hook_args: str) -> list[dict[str, Any]]:
        port = free_port()
        exits = contextlib.ExitStack()
        started.append(exits)
        exits.enter_context(hook_process(example, port, *hook_args))
        directory = EXAMPLES / example
        setup = manifests.load(
            p for p in (directory / "crd.yaml", directory / "controller.yaml") if p.exists()
        )
        setup = with_port(setup, port)
        controllers.extend(o for o in setup if o["kind"].endswith("Controller"))
        await manifests.apply(kube, setup, namespace=namespace)
        parents = manifests.load([directory / "parent.yaml"])
        await manifests.apply(kube, parents, namespace=namespace)
        return parents

    yield run
    for controller in controllers:
        resource = await kube.resource(controller["apiVersion"], kind=controller["kind"])
        with contextlib.suppress(errors.NotFound):
            await kube.delete(resource, controller["metadata"]["name"])
    for exits in started:
        exits.close()


async def get(kube: Client, resource: Resource, name: str, namespace: str | None) -> Any:
    try:
        return await kube.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return None


async def test_hello_world(kube: Client, namespace: str, run_example: Run) -> None:
    await run_example("hello-world")
    hellos = await kube.resource("examples.metashard.io/v1", resource="helloworlds")

    async def greeted(text: str) -> bool:
        cm = await get(kube, CONFIGMAPS, "hello-greeting", namespace)
        parent = await get(kube, hellos, "hello", namespace)
        return (
            cm is not None
            and cm["data"] == {"greeting": text}
            and (parent.get("status") or {}).get("greeting") == text
        )

    await eventually(lambda: greeted("Hello, world!"), message="no greeting")
    await kube.patch(hellos, "hello", {"spec": {"who": "metashard"}}, namespace=namespace)
    await eventually(lambda: greeted("Hello, metashard!"), message="greeting not updated")


async def test_finalizer(kube: Client, namespace: str, run_example: Run) -> None:
    await run_example("finalizer")
    reservations = await kube.resource("examples.metashard.io/v1", resource="reservations")

    async def ticketed() -> bool:
        parent = await get(kube, reservations, "table-for-two", namespace)
        cm = await get(kube, CONFIGMAPS, "table-for-two-ticket", namespace)
        return cm is not None and "metacontroller.io/compositecontroller-reservations" in (
            parent["metadata"].get("finalizers") or ()
        )

    await eventually(ticketed, message="no ticket or no finalizer")
    await kube.delete(reservations, "table-for-two", namespace=namespace)

    async def released() -> bool:
        parent = await get(kube, reservations, "table-for-two", namespace)
        cm = await get(kube, CONFIGMAPS, "table-for-two-ticket", namespace)
        return parent is None and cm is None

    await eventually(released, message="the reservation was not finalized")


async def test_related_resources(kube: Client, namespace: str, run_example: Run) -> None:
    await run_example("related")

    async def mirrored(data: dict[str, str]) -> bool:
        copy = await get(kube, CONFIGMAPS, "settings-copy-mirror", namespace)
        return copy is not None and copy.get("data") == data

    await eventually(lambda: mirrored({"colour": "blue"}), message="no copy")
    # A change of the related source alone syncs the Mirror again.
    await kube.patch(CONFIGMAPS, "settings", {"data": {"colour": "green"}}, namespace=namespace)
    await eventually(lambda: mirrored({"colour": "green"}), message="the copy did not follow")


async def test_fencing(kube: Client, namespace: str, run_example: Run) -> None:
    """The hook publishes once per generation with the token of the attempt it acted on, and
    refuses an attempt older than that one."""
    await run_example("fencing")
    notices = await kube.resource("examples.metashard.io/v1", resource="notices")
    ccs = await kube.resource("metacontroller.k8s.io/v1alpha1", resource="compositecontrollers")
    controller = await kube.get(ccs, "fencing")
    base = controller["spec"]["hooks"]["sync"]["webhook"]["url"].removesuffix("/sync")

    def call(method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
        request = urllib.request.Request(
            base + path,
            method=method,
            headers=headers,
            data=None if body is None else (json.dumps(body).encode()),
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    async def published(generation: int) -> bool:
        notice = await get(kube, notices, "maintenance", namespace)
        receipt = await get(kube, CONFIGMAPS, "maintenance-receipt", namespace)
        return (
            (notice.get("status") or {}).get("publishedGeneration") == generation
            and receipt is not None
            and receipt["data"]["generation"] == str(generation)
        )

    await eventually(lambda: published(1), message="not published")
    _, outbox = await asyncio.to_thread(call, "GET", "/outbox")
    (first,) = outbox
    assert first["generation"] == 1 and first["attempt"].count("/") == 2
    epoch, generation = first["token"]

    parent = await kube.get(notices, "maintenance", namespace=namespace)
    stale = {"X-Metashard-Epoch": str(epoch), "X-Metashard-Slot-Generation": str(generation - 1)}
    status, answer = await asyncio.to_thread(call, "POST", "/sync", {"parent": parent}, **stale)
    assert status == 409 and "stale attempt" in answer["error"]
    current = {"X-Metashard-Epoch": str(epoch), "X-Metashard-Slot-Generation": str(generation)}
    status, _ = await asyncio.to_thread(call, "POST", "/sync", {"parent": parent}, **current)
    assert status == 200

    await kube.patch(
        notices, "maintenance", {"spec": {"message": "Postponed."}}, namespace=namespace
    )
    await eventually(lambda: published(2), message="the new message was not published")
    _, outbox = await asyncio.to_thread(call, "GET", "/outbox")
    assert [(o["generation"], o["message"]) for o in outbox] == [
        (1, "The cluster is upgraded on Sunday."),
        (2, "Postponed."),
    ]
    assert tuple(outbox[1]["token"]) >= (epoch, generation)


async def test_limits(kube: Client, namespace: str, run_example: Run) -> None:
    """At most two reconciles of the controller at once across both workers; once the Quotes
    are priced, resyncs reuse the answers (ttlSeconds) until a Quote changes."""
    parents = await run_example("limits")
    quotes = await kube.resource("examples.metashard.io/v1", resource="quotes")
    ccs = await kube.resource("metacontroller.k8s.io/v1alpha1", resource="compositecontrollers")
    controller = await kube.get(ccs, "quotes")
    stats_url = controller["spec"]["hooks"]["sync"]["webhook"]["url"].replace("/sync", "/stats")

    def stats() -> dict[str, Any]:
        with urllib.request.urlopen(stats_url, timeout=10) as answer:
            return dict(json.loads(answer.read()))

    async def priced() -> bool:
        items = (await kube.list(quotes, namespace=namespace)).items
        return len(items) == len(parents) and all(
            (q.get("status") or {}).get("price") for q in items
        )

    await eventually(priced, message="not every Quote priced")
    calls: dict[str, int] = {}

    async def settled() -> bool:
        nonlocal calls
        before = (await asyncio.to_thread(stats))["calls"]
        await asyncio.sleep(2.5)  # two resyncs and more
        calls = (await asyncio.to_thread(stats))["calls"]
        return bool(calls == before)

    await eventually(settled, message="resyncs keep calling the hook")
    assert (await asyncio.to_thread(stats))["peak"] <= 2
    await kube.patch(quotes, "pins", {"spec": {"quantity": 100}}, namespace=namespace)

    async def repriced() -> bool:
        pins = await kube.get(quotes, "pins", namespace=namespace)
        return (pins.get("status") or {}).get("price") == "1.00"

    await eventually(repriced, message="the changed Quote was not priced again")
    after = (await asyncio.to_thread(stats))["calls"]
    assert after["pins"] > calls["pins"]
    assert {k: v for k, v in after.items() if k != "pins"} == {
        k: v for k, v in calls.items() if k != "pins"
    }
    assert (await asyncio.to_thread(stats))["peak"] <= 2

    # A value metashard cannot read: a Warning on the controller, which keeps running.
    bad = {"metadata": {"annotations": {"metashard.io/max-concurrent-reconciles": "lots"}}}
    await kube.patch(ccs, "quotes", bad)

    async def warned() -> list[dict[str, Any]]:
        events = await kube.list(
            EVENTS, namespace="default", field_selector="involvedObject.name=quotes"
        )
        return [e for e in events.items if e.get("reason") == "InvalidAnnotation"]

    await eventually(lambda: _truthy(warned()), message="no InvalidAnnotation event")
    (event, *_) = await warned()
    assert "metashard.io/max-concurrent-reconciles: 'lots'" in event["message"]
    await kube.patch(quotes, "pins", {"spec": {"quantity": 200}}, namespace=namespace)

    async def repriced_again() -> bool:
        pins = await kube.get(quotes, "pins", namespace=namespace)
        return (pins.get("status") or {}).get("price") == "2.00"

    await eventually(repriced_again, message="the controller stopped after the bad value")


async def _truthy(found: Awaitable[list[dict[str, Any]]]) -> bool:
    return bool(await found)


async def test_decorator(kube: Client, namespace: str, run_example: Run) -> None:
    await run_example("decorator")

    async def digested() -> bool:
        cm = await get(kube, CONFIGMAPS, "app-config", namespace)
        want = hashlib.sha256(json.dumps(cm["data"], sort_keys=True).encode()).hexdigest()
        annotations = cm["metadata"].get("annotations") or {}
        return annotations.get("examples.metashard.io/sha256") == want

    await eventually(digested, message="no digest annotation")
    await kube.patch(CONFIGMAPS, "app-config", {"data": {"mode": "safe"}}, namespace=namespace)
    await eventually(digested, message="the digest did not follow the data")


async def test_conditions(kube: Client, namespace: str, run_example: Run) -> None:
    await run_example("conditions")
    bulletins = await kube.resource("examples.metashard.io/v1", resource="bulletins")

    async def published(status: str, reason: str) -> bool:
        parent = await get(kube, bulletins, "news", namespace)
        conditions = ((parent or {}).get("status") or {}).get("conditions") or []
        return [(c["type"], c["status"], c["reason"]) for c in conditions] == [
            ("Published", status, reason)
        ]

    await eventually(lambda: published("True", "OnBoard"), message="not published")
    events = (await kube.list(EVENTS, namespace=namespace)).items
    assert any(e["reason"] == "Publishing" and e["type"] == "Normal" for e in events)
    await kube.patch(bulletins, "news", {"spec": {"text": ""}}, namespace=namespace)
    await eventually(lambda: published("False", "NothingToPublish"), message="still published")

    async def warned() -> bool:
        events = (await kube.list(EVENTS, namespace=namespace)).items
        return any(e["reason"] == "EmptyText" and e["type"] == "Warning" for e in events)

    await eventually(warned, message="no EmptyText event")


def paused_parents(stack: Processes, controller: str) -> float | None:
    """The coordinator's ``metashard_coordinator_paused_parents`` of ``controller``."""
    (coordinator,) = [p for p in stack.procs if p.name == "coordinator"]
    url = f"http://127.0.0.1:{coordinator.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    series = f'metashard_coordinator_paused_parents{{controller="{controller}"}}'
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


async def test_sync_and_pause(
    kube: Client,
    namespace: str,
    cluster: str,
    run_example: Run,
    tmp_path: Path,
    stack: Processes,
) -> None:
    """``metashard sync`` brings a controller's parents, or one parent, up to a changed hook
    without changing their specs; ``metashard.io/paused`` holds a parent's syncs back and
    says so in an event and in the coordinator's gauge, and the parent syncs once it is
    removed; a paused controller says so on its own object; an unreadable value is a Warning
    and the parent syncs."""
    motto = tmp_path / "motto.txt"
    motto.write_text("open")
    await run_example("sync-and-pause", str(motto))
    signs = await kube.resource("examples.metashard.io/v1", resource="signs")

    async def shows(text: str) -> bool:
        board = await get(kube, CONFIGMAPS, "front-door-sign", namespace)
        return board is not None and board["data"]["text"] == text

    async def event(reason: str, name: str, everywhere: bool = False) -> bool:
        listed = (await kube.list(EVENTS, namespace=None if everywhere else namespace)).items
        return any(e["reason"] == reason and e["involvedObject"]["name"] == name for e in listed)

    def cli(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        code = sync.main([*argv, "--kubeconfig", cluster], out)
        return code, out.getvalue()

    await eventually(lambda: shows("Welcome (open)"), message="the sign was not written")
    before = await get(kube, signs, "front-door", namespace)

    motto.write_text("closed")  # the hook changed; no Sign did
    code, said = await asyncio.to_thread(cli, "--controller", "signs")
    assert code == 0 and said.startswith("compositecontrollers/signs: a sync of every parent"), said
    await eventually(lambda: shows("Welcome (closed)"), message="--controller synced nothing")
    motto.write_text("hours")
    code, said = await asyncio.to_thread(cli, "sign/front-door", "-n", namespace)
    assert code == 0 and said.startswith("signs/front-door: a sync requested ("), said
    await eventually(lambda: shows("Welcome (hours)"), message="the parent was not synced")
    after = await get(kube, signs, "front-door", namespace)
    assert after["spec"] == before["spec"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]

    paused = {"metashard.io/paused": "true"}
    await kube.patch(
        signs,
        "front-door",
        {"metadata": {"annotations": paused}, "spec": {"text": "Goodbye"}},
        namespace=namespace,
    )
    await eventually(lambda: event("Paused", "front-door"), message="no Paused event")
    assert await shows("Welcome (hours)")  # the edit's sync was the one skipped
    held = await get(kube, signs, "front-door", namespace)
    assert held["status"]["observedGeneration"] < held["metadata"]["generation"]

    async def gauge(value: float) -> bool:
        found = await asyncio.to_thread(paused_parents, stack, "CompositeController-signs")
        return found == value

    await eventually(lambda: gauge(1), message="the paused Sign is not counted")

    await kube.patch(
        signs,
        "front-door",
        {"metadata": {"annotations": {"metashard.io/paused": "yes"}}},
        namespace=namespace,
    )
    await eventually(lambda: shows("Goodbye (hours)"), message="not synced with a bad value")
    assert await event("InvalidAnnotation", "front-door")
    await eventually(lambda: gauge(0), message="a bad value is counted as paused")

    controllers = await kube.resource(
        "metacontroller.k8s.io/v1alpha1", resource="compositecontrollers"
    )
    await kube.patch(controllers, "signs", {"metadata": {"annotations": paused}})
    await eventually(
        lambda: event("Paused", "signs", everywhere=True), message="no Paused controller event"
    )
    await eventually(lambda: gauge(1), message="the paused controller's Sign is not counted")
    await kube.patch(
        controllers, "signs", {"metadata": {"annotations": {"metashard.io/paused": None}}}
    )
    await kube.patch(
        signs,
        "front-door",
        {"metadata": {"annotations": {"metashard.io/paused": None}}},
        namespace=namespace,
    )
    motto.write_text("open")
    code, _ = await asyncio.to_thread(cli, "--controller", "cc/signs")
    assert code == 0
    await eventually(lambda: shows("Goodbye (open)"), message="not synced after the pause")
    assert await gauge(0)


async def test_cluster_scoped_parent(kube: Client, run_example: Run) -> None:
    await run_example("cluster-parent")
    teams = await kube.resource("examples.metashard.io/v1", resource="teams")
    try:

        async def provisioned() -> bool:
            cm = await get(kube, CONFIGMAPS, "members", "team-platform")
            team = await get(kube, teams, "platform", None)
            status = team.get("status") or {}
            return (
                cm is not None
                and cm["data"] == {"members": "ada,grace"}
                and status
                == {
                    "namespace": "team-platform",
                    "members": 2,
                    "observedGeneration": team["metadata"]["generation"],
                }
            )

        await eventually(provisioned, message="the team's namespace and ConfigMap are missing")
    finally:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(teams, "platform")


async def test_rolling_update(kube: Client, namespace: str, cluster: str, run_example: Run) -> None:
    """A changed template moves the Pods to the new revision one at a time, highest ordinal
    first, never two missing or not Ready at once; ``metashard rollout`` reports it and
    ``undo`` rolls back the same way."""
    if os.environ.get(KUBECONFIG_ENV):
        pytest.skip(
            "needs Pods that turn Ready at once (the embedded cluster's fake kubelet); a real "
            "cluster would have to pull and start nginx for every step"
        )
    await run_example("rolling-update")
    podsets = await kube.resource("examples.metashard.io/v1", resource="podsets")

    async def on(image: str) -> set[str] | None:
        """The Pods' revision hashes once all three run ``image``, are Ready and the PodSet
        says so (``OnLatestRevision``); else None."""
        listed = (await kube.list(PODS, namespace=namespace)).items
        parent = await get(kube, podsets, "web", namespace)
        status = parent.get("status") or {}
        reasons = {c.get("type"): c.get("reason") for c in status.get("conditions") or []}
        if (
            sorted(p["metadata"]["name"] for p in listed) != ["web-0", "web-1", "web-2"]
            or any(p["spec"]["containers"][0]["image"] != image or not ready(p) for p in listed)
            or reasons.get("Updated") != "OnLatestRevision"
            or status.get("readyReplicas") != 3
        ):
            return None
        return {p["metadata"]["labels"]["controller-revision-hash"] for p in listed}

    async def settled(image: str) -> bool:
        return await on(image) is not None

    async def revision_of(image: str) -> str:
        """The hash (name suffix) of the ControllerRevision whose parent runs ``image``."""
        for revision in (await kube.list(REVISIONS, namespace=namespace)).items:
            containers = revision["parentPatch"]["spec"]["template"]["spec"]["containers"]
            if containers[0]["image"] == image:
                return str(revision["metadata"]["name"].rsplit("-", 1)[1])
        raise AssertionError(f"no revision runs {image}")

    async def roll(image: str, change: Awaitable[object]) -> list[str]:
        """Make ``change`` and follow the Pods through a watch until all run ``image``;
        returns the Pods in the order they were deleted."""
        async with pod_watch(kube, namespace, 3) as watch:
            await change
            await eventually(lambda: settled(image), within=90, message=f"no rollout to {image}")
        assert watch.worst == 1, f"{watch.worst} pods missing or not Ready at once"
        return watch.deleted

    def cli(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        code = rollout.main([*argv, "podsets/web", "-n", namespace, "--kubeconfig", cluster], out)
        return code, out.getvalue()

    await eventually(lambda: settled("nginx:1.27"), within=60, message="no Ready pods")
    first = await on("nginx:1.27")
    assert first == {await revision_of("nginx:1.27")}

    template = {"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}
    change = kube.patch(podsets, "web", {"spec": {"template": template}}, namespace=namespace)
    assert await roll("nginx:1.28", change) == ["web-2", "web-1", "web-0"]
    second = await on("nginx:1.28")
    assert second == {await revision_of("nginx:1.28")} and second != first

    code, text = await asyncio.to_thread(cli, "status")
    assert code == 0 and text.startswith("podsets/web: successfully rolled out revision 2 ("), text
    assert text.endswith("): 3 of 3 children\n"), text
    code, text = await asyncio.to_thread(cli, "history")
    assert code == 0
    lines = text.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["1", "2"]
    assert lines[2].split()[3:] == ["3", "spec.template.spec.containers"]

    undo = asyncio.ensure_future(asyncio.to_thread(cli, "undo"))
    assert await roll("nginx:1.27", undo) == ["web-2", "web-1", "web-0"]
    assert (await undo) == (0, "podsets/web: rolled back to revision 1\n")
    assert await on("nginx:1.27") == first  # the same template, the same revision
