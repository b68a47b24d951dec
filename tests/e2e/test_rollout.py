"""Rolling updates end to end: a StatefulSet-like CompositeController rolls its Pods.

The module runs its own embedded cluster with the fake kubelet on (Pods turn Running and
Ready as soon as they exist), one coordinator and two workers. The controller's hook returns
Pods ``web-<i>`` highest ordinal first, each running ``spec.image``; the Pod child type uses
``RollingRecreate`` gated by a ``Ready=True`` status check. With ``METASHARD_E2E_KUBECONFIG``
the same tests run on a real cluster (its kubelet then decides when Pods are Ready).

The processes run with ``POD_NAMESPACE`` set to a namespace of this module's own, so the
ControllerRevisions of cluster-scoped parents (``Herd``) land there (the default of
``--cluster-revision-namespace``). The tests marked ``BOTH_APPLY_STRATEGIES`` run under
dynamic apply and under server-side apply (one stack per strategy).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import secrets
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from loadtest.apiserver.background import ClusterProcess
from loadtest.dev.crds import install, simple_crd
from loadtest.dev.processes import REPO, Processes
from manager.cli import rollout
from proto.api.crds import load_crds
from proto.api.names import LAST_APPLIED_ANNOTATION
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.kube.session import Session
from tests.e2e.conftest import BOTH_APPLY_STRATEGIES, KUBECONFIG_ENV, start_stack
from tests.e2e.harness import eventually
from tests.e2e.hookserver import HookServer, Reply
from tests.e2e.podwatch import PODS, pod_watch, ready

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

THINGS = Resource(
    "e2e.metashard.io", "v1", "things", "Thing", namespaced=True, subresources=("status",)
)
HERDS = Resource(
    "e2e.metashard.io", "v1", "herds", "Herd", namespaced=False, subresources=("status",)
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
REVISION_NAMESPACE = f"e2e-revisions-{secrets.token_hex(3)}"
MEMBERS = Resource(
    "e2e.metashard.io", "v1", "members", "Member", namespaced=True, subresources=("status",)
)
REVISIONS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "controllerrevisions", "ControllerRevision", True
)
CCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", "CompositeController", False
)
SELECTED_BY = "e2e.metashard.io/controller"
HASH = "controller-revision-hash"


async def _has_ready_node(kubeconfig: str) -> bool:
    async with Session(load_config(kubeconfig), qps=0) as session:
        nodes = await Client(session).list(NODES)
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for node in nodes.items
        for c in node.get("status", {}).get("conditions", [])
    )


@pytest.fixture(scope="module")
def kubelet(cluster: str) -> None:
    """For the tests whose Pods must turn Ready: the fake kubelet does it on the embedded
    cluster, a node's kubelet on a real one; a real cluster with no Ready node skips them."""
    if os.environ.get(KUBECONFIG_ENV) and not asyncio.run(_has_ready_node(cluster)):
        pytest.skip("the cluster has no Ready node: no kubelet will make the Pods Ready")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """This module's own cluster, with the fake kubelet (or the real one)."""
    real = os.environ.get(KUBECONFIG_ENV)
    process = None if real else ClusterProcess(kubelet=True).start()
    kubeconfig = real or str(process.kubeconfig)  # type: ignore[union-attr]

    async def setup() -> None:
        async with Session(load_config(kubeconfig), qps=0) as session:
            crds = [simple_crd("e2e.metashard.io", kind) for kind in ("Thing", "Member")]
            crds.append(simple_crd("e2e.metashard.io", "Herd", scope="Cluster"))
            kube = Client(session)
            await install(kube, [*load_crds(), *crds])
            await kube.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": REVISION_NAMESPACE}},
            )

    async def teardown() -> None:
        async with Session(load_config(kubeconfig), qps=0) as session:
            with contextlib.suppress(errors.NotFound):
                await Client(session).delete(NAMESPACES, REVISION_NAMESPACE)

    try:
        asyncio.run(setup())
        yield kubeconfig
    finally:
        if process is not None:
            process.stop()
        else:
            asyncio.run(teardown())


@pytest.fixture(scope="module")
def stack(
    cluster: str, tmp_path_factory: pytest.TempPathFactory, apply_strategy: str
) -> Iterator[Processes]:
    """The conftest's stack (with the module's ``apply_strategy``), run as if in
    ``REVISION_NAMESPACE`` (see the module docstring)."""
    workdir = Path(tmp_path_factory.mktemp("stack"))
    env = {"POD_NAMESPACE": REVISION_NAMESPACE}
    processes = start_stack(cluster, workdir, apply_strategy, env)
    yield processes
    processes.close()


def statefulset(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    parent = request["parent"]
    spec = parent["spec"]
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"web-{i}", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": spec["image"]}]},
        }
        for i in reversed(range(int(spec["replicas"])))
    ]
    return {"status": {"replicas": len(pods)}, "children": pods}


MakeController = Callable[..., Awaitable[str]]


@pytest_asyncio.fixture
async def make_controller(
    kube: Client, hooks: HookServer, stack: Processes
) -> AsyncIterator[MakeController]:
    """``await make_controller(answer, child)``: a CompositeController for Things (or
    ``parent``) labelled with its name, one child resource ``child`` (apiVersion, resource,
    updateStrategy), a history limit of 1, a customize hook when ``customize``, the parents'
    ``spec.selector`` unless ``generate_selector``; deleted at the end."""
    made: list[str] = []

    async def make(
        answer: Any,
        child: dict[str, Any],
        parent: str = "things",
        customize: bool = False,
        generate_selector: bool = True,
    ) -> str:
        name = f"e2e-{secrets.token_hex(3)}"
        hooks.program(name, answer)
        hook_urls = {"sync": {"webhook": {"url": hooks.url(name, "sync")}}}
        if customize:
            hook_urls["customize"] = {"webhook": {"url": hooks.url(name, "customize")}}
        await kube.create(
            CCS,
            {
                "apiVersion": "metacontroller.k8s.io/v1alpha1",
                "kind": "CompositeController",
                "metadata": {
                    "name": name,
                    "annotations": {"metashard.io/revision-history-limit": "1"},
                },
                "spec": {
                    "generateSelector": generate_selector,
                    "parentResource": {
                        "apiVersion": "e2e.metashard.io/v1",
                        "resource": parent,
                        "labelSelector": {"matchLabels": {SELECTED_BY: name}},
                    },
                    "childResources": [child],
                    "hooks": hook_urls,
                },
            },
        )
        made.append(name)
        return name

    yield make
    for name in made:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CCS, name)


READY_PODS = {
    "apiVersion": "v1",
    "resource": "pods",
    "updateStrategy": {
        "method": "RollingRecreate",
        "statusChecks": {"conditions": [{"type": "Ready", "status": "True"}]},
    },
}
"""The child type of the StatefulSet-like controllers: Pods, RollingRecreate behind Ready."""


@pytest_asyncio.fixture
async def controller(make_controller: MakeController) -> str:
    """The StatefulSet-like controller: Pods, RollingRecreate behind ``Ready=True``."""
    return await make_controller(
        statefulset,
        READY_PODS,
    )


async def pods(kube: Client, namespace: str) -> dict[str, dict[str, Any]]:
    listed = await kube.list(PODS, namespace=namespace)
    return {p["metadata"]["name"]: p for p in listed.items}


def image(pod: dict[str, Any]) -> str:
    return str(pod["spec"]["containers"][0]["image"])


async def written_under(kube: Client, namespace: str, apply_strategy: str) -> None:
    """Every Pod was written by ``apply_strategy``: server-side apply leaves an ``Apply`` entry
    of the field manager ``metacontroller`` and no last-applied annotation, dynamic apply the
    annotation and no such entry."""
    server_side = apply_strategy == "server-side-apply"
    for name, pod in (await pods(kube, namespace)).items():
        metadata = pod["metadata"]
        applied = any(
            entry.get("manager") == "metacontroller" and entry.get("operation") == "Apply"
            for entry in metadata.get("managedFields") or ()
        )
        annotated = LAST_APPLIED_ANNOTATION in (metadata.get("annotations") or {})
        assert (applied, annotated) == (server_side, not server_side), name


async def updated(
    kube: Client, namespace: str, parent_type: Resource = THINGS, name: str = "set"
) -> dict[str, Any] | None:
    """The ``Updated`` condition of the parent ``name`` (``namespace`` when namespaced)."""
    parent = await kube.get(
        parent_type, name, namespace=namespace if parent_type.namespaced else None
    )
    conditions = (parent.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Updated"), None)


async def rolled(
    kube: Client,
    namespace: str,
    want: str,
    replicas: int = 3,
    parent: tuple[Resource, str] = (THINGS, "set"),
) -> bool:
    found = await pods(kube, namespace)
    condition = await updated(kube, namespace, *parent)
    return (
        len(found) == replicas
        and all(image(p) == want and ready(p) for p in found.values())
        and condition is not None
        and condition["reason"] == "OnLatestRevision"
    )


async def roll_to(
    kube: Client,
    namespace: str,
    want: str,
    *,
    change: Awaitable[object] | None = None,
    replicas: int = 3,
    on_delete: Callable[[int], None] | None = None,
    parent: tuple[Resource, str] = (THINGS, "set"),
) -> list[str]:
    """Change the image and follow the rollout through a watch, event by event: never more
    than one Pod missing or not Ready at once. Returns the Pods in the order they were
    deleted. ``change`` makes the change instead of a patch of the image; ``on_delete(n)``
    runs on the n-th deletion."""
    async with pod_watch(kube, namespace, replicas, on_delete=on_delete) as watch:
        if change is None:
            await kube.patch(THINGS, "set", {"spec": {"image": want}}, namespace=namespace)
        else:
            await change
        await eventually(
            lambda: rolled(kube, namespace, want, replicas, parent),
            within=90,
            message=f"no rollout to {want}",
        )
    assert watch.worst == 1, f"{watch.worst} pods unavailable at once"
    return watch.deleted


async def make_set(
    kube: Client, namespace: str, controller: str, *, replicas: int, image: str = "nginx:1"
) -> None:
    await kube.create(
        THINGS,
        {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Thing",
            "metadata": {
                "name": "set",
                "namespace": namespace,
                "labels": {SELECTED_BY: controller},
            },
            "spec": {"replicas": replicas, "image": image},
        },
    )


@BOTH_APPLY_STRATEGIES
@pytest.mark.usefixtures("kubelet")
async def test_a_statefulset_rolls_one_pod_at_a_time_highest_ordinal_first(
    kube: Client, namespace: str, controller: str, cluster: str, apply_strategy: str
) -> None:
    await make_set(kube, namespace, controller, replicas=3)
    await eventually(lambda: rolled(kube, namespace, "nginx:1"), within=60, message="no pods")
    first = (await kube.list(REVISIONS, namespace=namespace)).items
    assert len(first) == 1
    assert first[0]["children"] == [
        {"apiGroup": "", "kind": "Pod", "names": ["web-2", "web-1", "web-0"]}
    ]
    one = first[0]["metadata"]["name"].rsplit("-", 1)[1]
    assert {p["metadata"]["labels"][HASH] for p in (await pods(kube, namespace)).values()} == {one}

    # metashard rollout status, started as the rollout begins, follows it to its end
    def cli(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        code = rollout.main([*argv, "things/set", "-n", namespace, "--kubeconfig", cluster], out)
        return code, out.getvalue()

    watching: list[asyncio.Future[tuple[int, str]]] = []

    async def patch_and_watch() -> None:
        await kube.patch(THINGS, "set", {"spec": {"image": "nginx:2"}}, namespace=namespace)
        watching.append(asyncio.ensure_future(asyncio.to_thread(cli, "status", "--timeout=90s")))

    assert await roll_to(kube, namespace, "nginx:2", change=patch_and_watch()) == [
        "web-2",
        "web-1",
        "web-0",
    ]
    code, text = await watching[0]
    print(f"metashard rollout status:\n{text}")
    lines = text.splitlines()
    assert code == 0, text
    assert len(lines) >= 2, text  # it waited: a line for each state it saw, then the end
    assert all(line.startswith("things/set: waiting for ") for line in lines[:-1]), text
    assert lines[-1].startswith("things/set: successfully rolled out revision 2 ("), text
    assert lines[-1].endswith("): 3 of 3 children"), text
    await written_under(kube, namespace, apply_strategy)
    listed = (await kube.list(REVISIONS, namespace=namespace)).items
    by_image = {r["parentPatch"]["spec"]["image"]: r for r in listed}
    assert set(by_image) == {"nginx:1", "nginx:2"}  # the old one is history now
    assert "children" not in by_image["nginx:1"]
    two = by_image["nginx:2"]["metadata"]["name"].rsplit("-", 1)[1]
    assert {p["metadata"]["labels"][HASH] for p in (await pods(kube, namespace)).values()} == {two}

    await roll_to(kube, namespace, "nginx:3")
    listed = (await kube.list(REVISIONS, namespace=namespace)).items
    # A history limit of 1: the revision of nginx:1 is pruned.
    assert sorted(r["parentPatch"]["spec"]["image"] for r in listed) == ["nginx:2", "nginx:3"]
    assert sorted(r["metadata"]["annotations"]["metashard.io/revision"] for r in listed) == [
        "2",
        "3",
    ]

    # metashard rollout: history, then undo to the revision before, rolled back one at a time.
    code, text = await asyncio.to_thread(cli, "history")
    assert code == 0
    lines = text.splitlines()
    assert lines[0].split() == ["REVISION", "HASH", "AGE", "CHILDREN", "CHANGE"]
    assert [line.split()[0] for line in lines[1:]] == ["2", "3"]
    assert lines[2].split()[3:] == ["3", "spec.image"]
    code, text = await asyncio.to_thread(cli, "status")
    assert code == 0 and text.startswith("things/set: successfully rolled out revision 3 ("), text

    undo = asyncio.ensure_future(asyncio.to_thread(cli, "undo"))
    order = await roll_to(kube, namespace, "nginx:2", change=undo)
    assert order == ["web-2", "web-1", "web-0"]
    assert (await undo) == (0, "things/set: rolled back to revision 2\n")
    listed = (await kube.list(REVISIONS, namespace=namespace)).items
    numbers = {
        r["parentPatch"]["spec"]["image"]: r["metadata"]["annotations"]["metashard.io/revision"]
        for r in listed
    }
    assert numbers == {"nginx:2": "4", "nginx:3": "3"}
    code, _ = await asyncio.to_thread(cli, "undo", "--to-revision", "9")
    assert code == 1


async def test_rollout_status_gives_up_at_its_timeout_with_exit_1(
    kube: Client, namespace: str, make_controller: MakeController, cluster: str
) -> None:
    """A hook that fails: the controller never observes the parent, the rollout never ends."""
    controller = await make_controller(
        lambda hook, request: Reply(status=500, body=b"broken"), READY_PODS
    )
    await make_set(kube, namespace, controller, replicas=1)
    status = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "manager.cli", "rollout", "status", "things/set"),
        *("-n", namespace, "--kubeconfig", cluster, "--timeout", "2s"),
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(status.communicate(), 60)
    waiting = "things/set: waiting for its controller to observe generation 1 (observed: none)"
    assert status.returncode == 1, err
    assert out.decode() == waiting + "\n"
    assert err.decode() == f"metashard rollout: error: timed out after 2s: {waiting}\n"


@pytest.mark.usefixtures("kubelet")
async def test_a_rollout_resumes_after_a_worker_and_the_coordinator_are_killed(
    kube: Client, namespace: str, controller: str, stack: Processes
) -> None:
    """The module's worker w-a is killed after the second move and the coordinator after the
    fourth; replacements start at once. The rollout still ends with every Pod moved once,
    highest ordinal first, never two unavailable at a time."""
    if os.environ.get(KUBECONFIG_ENV):
        pytest.skip("kills the module's own processes")
    await make_set(kube, namespace, controller, replicas=6)
    await eventually(lambda: rolled(kube, namespace, "nginx:1", 6), within=60, message="no pods")
    by_name = {proc.name: proc for proc in stack.procs if proc.alive}

    def disturb(count: int) -> None:
        if count == 2:
            stack.kill(by_name["worker-w-a"])
            stack.worker("w-c")
        elif count == 4:
            stack.kill(by_name["coordinator"])
            stack.coordinator("coordinator-2")

    order = await roll_to(kube, namespace, "nginx:2", replicas=6, on_delete=disturb)
    assert order == [f"web-{i}" for i in reversed(range(6))]
    assert not by_name["worker-w-a"].alive and not by_name["coordinator"].alive


def members(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    spec = request["parent"]["spec"]
    children = [
        {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Member",
            "metadata": {"name": f"m-{i}"},
            "spec": {"image": spec["image"]},
        }
        for i in reversed(range(int(spec["replicas"])))
    ]
    return {"status": {}, "children": children}


@BOTH_APPLY_STRATEGIES
async def test_rolling_in_place_waits_for_each_member_to_observe_its_generation(
    kube: Client, namespace: str, make_controller: MakeController
) -> None:
    """The test plays the members' own controller: it reports ``observedGeneration`` only
    when told, and the rollout updates the next member only after that."""
    name = await make_controller(
        members,
        {
            "apiVersion": "e2e.metashard.io/v1",
            "resource": "members",
            "updateStrategy": {"method": "RollingInPlace"},
        },
    )
    await make_set(kube, namespace, name, replicas=2, image="v1")

    async def member(i: int) -> dict[str, Any] | None:
        with contextlib.suppress(errors.NotFound):
            return await kube.get(MEMBERS, f"m-{i}", namespace=namespace)
        return None

    async def observe(i: int) -> None:
        found = await member(i)
        assert found is not None
        generation = found["metadata"]["generation"]
        await kube.replace(
            MEMBERS,
            {**found, "status": {"observedGeneration": generation}},
            namespace=namespace,
            subresource="status",
        )

    async def on(i: int, want: str) -> bool:
        found = await member(i)
        return found is not None and found["spec"]["image"] == want

    await eventually(lambda: on(0, "v1"), within=30, message="no members")
    await eventually(lambda: on(1, "v1"), within=30, message="no members")
    for i in (0, 1):
        await observe(i)
    await kube.patch(THINGS, "set", {"spec": {"image": "v2"}}, namespace=namespace)
    await eventually(lambda: on(1, "v2"), within=30, message="m-1 not updated")

    async def waiting() -> bool:
        condition = await updated(kube, namespace)
        return condition is not None and condition["reason"] == "RolloutWaiting"

    await eventually(waiting, within=30, message="the rollout does not wait")
    condition = await updated(kube, namespace)
    assert condition is not None
    assert condition["message"] == (
        "child Member m-1 with RollingInPlace update strategy hasn't observed latest spec"
    )
    assert await on(0, "v1")
    updated_m1 = await member(1)
    assert updated_m1 is not None and updated_m1["metadata"]["generation"] == 2

    await observe(1)
    await eventually(lambda: on(0, "v2"), within=30, message="m-0 not updated")
    await observe(0)

    async def done() -> bool:
        condition = await updated(kube, namespace)
        return condition is not None and condition["reason"] == "OnLatestRevision"

    await eventually(done, within=30, message="the rollout does not complete")

    # A Normal event on the parent for each step: started, waiting, progressing, complete.
    latest = next(
        r["metadata"]["name"]
        for r in (await kube.list(REVISIONS, namespace=namespace)).items
        if r["parentPatch"]["spec"]["image"] == "v2"
    )
    expected = {
        ("RolloutProgressing", "updating Member m-1"),
        (
            "RolloutWaiting",
            "child Member m-1 with RollingInPlace update strategy hasn't observed latest spec",
        ),
        ("RolloutProgressing", "updating Member m-0"),
        ("OnLatestRevision", f"latest ControllerRevision: {latest}"),
    }

    async def announced() -> bool:
        return expected <= await rollout_events(kube, namespace)

    await eventually(announced, within=30, message="no events for the rollout's steps")


EVENTS = Resource("", "v1", "events", "Event", namespaced=True)


async def rollout_events(kube: Client, namespace: str) -> set[tuple[str, str]]:
    """(reason, message) of the Normal events on the Thing ``set``."""
    found = set()
    for event in (await kube.list(EVENTS, namespace=namespace)).items:
        involved = event["involvedObject"]
        if (involved.get("kind"), involved.get("name"), event["type"]) == (
            "Thing",
            "set",
            "Normal",
        ):
            found.add((event["reason"], event["message"]))
    return found


def herd(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    """``statefulset`` for a cluster-scoped parent: the Pods go to ``spec.namespace``."""
    answer = statefulset(hook, request)
    for pod in answer["children"]:
        pod["metadata"]["namespace"] = request["parent"]["spec"]["namespace"]
    return answer


@BOTH_APPLY_STRATEGIES
@pytest.mark.usefixtures("kubelet")
async def test_a_cluster_scoped_parent_rolls_out_with_its_revisions_in_metashards_namespace(
    kube: Client,
    namespace: str,
    make_controller: MakeController,
    cluster: str,
    apply_strategy: str,
) -> None:
    """Revisions of a cluster-scoped Herd live in the namespace metashard runs in (the module's
    ``REVISION_NAMESPACE``), owned by the Herd: rolled like a namespaced parent's, listed by
    ``metashard rollout``, and deleted with the Herd by the garbage collector."""
    name = await make_controller(
        herd,
        READY_PODS,
        parent="herds",
    )
    herd_name = f"herd-{namespace}"
    created = await kube.create(
        HERDS,
        {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Herd",
            "metadata": {"name": herd_name, "labels": {SELECTED_BY: name}},
            "spec": {"replicas": 3, "image": "nginx:1", "namespace": namespace},
        },
    )
    uid = created["metadata"]["uid"]
    parent = (HERDS, herd_name)
    try:
        await eventually(
            lambda: rolled(kube, namespace, "nginx:1", 3, parent), within=60, message="no pods"
        )
        change = kube.patch(HERDS, herd_name, {"spec": {"image": "nginx:2"}})
        order = await roll_to(kube, namespace, "nginx:2", change=change, parent=parent)
        assert order == ["web-2", "web-1", "web-0"]
        await written_under(kube, namespace, apply_strategy)

        async def owned() -> list[dict[str, Any]]:
            listed = (await kube.list(REVISIONS, namespace=REVISION_NAMESPACE)).items
            return [
                r for r in listed if any(o["uid"] == uid for o in r["metadata"]["ownerReferences"])
            ]

        revisions = await owned()
        assert sorted(r["parentPatch"]["spec"]["image"] for r in revisions) == [
            "nginx:1",
            "nginx:2",
        ]
        latest = next(r for r in revisions if r["parentPatch"]["spec"]["image"] == "nginx:2")
        assert latest["metadata"]["ownerReferences"][0]["kind"] == "Herd"
        assert latest["children"] == [
            {
                "apiGroup": "",
                "kind": "Pod",
                "names": [f"{namespace}/web-2", f"{namespace}/web-1", f"{namespace}/web-0"],
            }
        ]
        assert {p["metadata"]["labels"][HASH] for p in (await pods(kube, namespace)).values()} == {
            latest["metadata"]["name"].rsplit("-", 1)[1]
        }

        def cli(*argv: str) -> tuple[int, str]:
            out = io.StringIO()
            code = rollout.main([*argv, f"herds/{herd_name}", "--kubeconfig", cluster], out)
            return code, out.getvalue()

        code, text = await asyncio.to_thread(cli, "history")
        assert code == 0 and [line.split()[0] for line in text.splitlines()[1:]] == ["1", "2"]
        code, text = await asyncio.to_thread(cli, "status")
        assert code == 0 and text.startswith(f"herds/{herd_name}: successfully rolled out"), text
        assert text.endswith("): 3 of 3 children\n"), text
    finally:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(HERDS, herd_name)

    async def collected() -> bool:
        return await owned() == []

    await eventually(collected, within=60, message="the Herd's revisions outlived it")


CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)


def configured(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    """``statefulset``, whose customize hook selects the ConfigMap ``config-<spec.config>``."""
    if hook == "customize":
        config = request["parent"]["spec"]["config"]
        rule = {"apiVersion": "v1", "resource": "configmaps", "names": [f"config-{config}"]}
        return {"relatedResources": [rule]}
    return statefulset(hook, request)


@BOTH_APPLY_STRATEGIES
@pytest.mark.usefixtures("kubelet")
async def test_each_revisions_sync_gets_the_related_objects_of_its_own_parent(
    kube: Client,
    namespace: str,
    make_controller: MakeController,
    hooks: HookServer,
    apply_strategy: str,
) -> None:
    """Customize is called once per revision: while the Pods move from config ``a`` to ``b``,
    the older revision's sync requests carry ``config-a`` and the latest's ``config-b``."""
    name = await make_controller(
        configured,
        READY_PODS,
        customize=True,
    )
    for config in ("a", "b"):
        await kube.create(
            CONFIGMAPS,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"config-{config}", "namespace": namespace},
                "data": {"config": config},
            },
        )
    await kube.create(
        THINGS,
        {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Thing",
            "metadata": {"name": "set", "namespace": namespace, "labels": {SELECTED_BY: name}},
            "spec": {"replicas": 3, "image": "nginx:1", "config": "a"},
        },
    )
    await eventually(lambda: rolled(kube, namespace, "nginx:1"), within=60, message="no pods")
    changed_at = time.monotonic()
    change = kube.patch(
        THINGS, "set", {"spec": {"image": "nginx:2", "config": "b"}}, namespace=namespace
    )
    await roll_to(kube, namespace, "nginx:2", change=change)
    await written_under(kube, namespace, apply_strategy)

    seen: dict[tuple[bool, str], set[frozenset[str]]] = {}
    for at, _, request in hooks.calls(name, "sync"):
        config = request["parent"]["spec"]["config"]
        related = frozenset((request.get("related") or {}).get("ConfigMap.v1") or {})
        seen.setdefault((at > changed_at, config), set()).add(related)
    # After the change, the older revision (config a) is synced with its own related objects.
    assert seen == {
        (False, "a"): {frozenset({"config-a"})},
        (True, "a"): {frozenset({"config-a"})},
        (True, "b"): {frozenset({"config-b"})},
    }
    customized = {
        request["parent"]["spec"]["config"]
        for _, _, request in hooks.calls(name, "customize")
        if request["parent"]["metadata"]["namespace"] == namespace
    }
    assert customized == {"a", "b"}


def selected(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    """``statefulset`` for a parent with ``spec.selector``: Pods labelled as its template."""
    answer = statefulset(hook, request)
    labels = request["parent"]["spec"]["template"]["metadata"]["labels"]
    for pod in answer["children"]:
        pod["metadata"]["labels"] = dict(labels)
    return answer


@BOTH_APPLY_STRATEGIES
@pytest.mark.usefixtures("kubelet")
async def test_revisions_orphaned_with_their_parent_are_adopted_by_a_new_one(
    kube: Client, namespace: str, make_controller: MakeController
) -> None:
    """``kubectl delete --cascade=orphan``: the revisions stay (without an owner), and a new
    parent with the same selector adopts them instead of starting a new history."""
    name = await make_controller(
        selected,
        READY_PODS,
        generate_selector=False,
    )
    labels = {"app": f"web-{secrets.token_hex(3)}"}
    thing = {
        "apiVersion": "e2e.metashard.io/v1",
        "kind": "Thing",
        "metadata": {"name": "set", "namespace": namespace, "labels": {SELECTED_BY: name}},
        "spec": {
            "replicas": 2,
            "image": "nginx:1",
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}},
        },
    }
    first = await kube.create(THINGS, thing)
    await eventually(lambda: rolled(kube, namespace, "nginx:1", 2), within=60, message="no pods")
    (revision,) = (await kube.list(REVISIONS, namespace=namespace)).items
    assert revision["metadata"]["ownerReferences"][0]["uid"] == first["metadata"]["uid"]

    await kube.delete(THINGS, "set", namespace=namespace, propagation_policy="Orphan")

    async def orphaned() -> bool:
        listed = (await kube.list(REVISIONS, namespace=namespace)).items
        with contextlib.suppress(errors.NotFound):
            await kube.get(THINGS, "set", namespace=namespace)
            return False
        return [r["metadata"]["name"] for r in listed] == [revision["metadata"]["name"]] and all(
            not r["metadata"].get("ownerReferences") for r in listed
        )

    await eventually(orphaned, within=60, message="the revision was not orphaned")
    second = await kube.create(THINGS, thing)
    uid = second["metadata"]["uid"]

    async def adopted() -> bool:
        listed = (await kube.list(REVISIONS, namespace=namespace)).items
        return [
            (r["metadata"]["name"], [o["uid"] for o in r["metadata"].get("ownerReferences") or ()])
            for r in listed
        ] == [(revision["metadata"]["name"], [uid])]

    await eventually(adopted, within=60, message="the new parent did not adopt the revision")
    assert await rolled(kube, namespace, "nginx:1", 2)
    found = await pods(kube, namespace)
    assert all(p["metadata"]["ownerReferences"][0]["uid"] == uid for p in found.values())
