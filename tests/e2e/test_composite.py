"""CompositeControllers run by real metashard processes, with hooks served by this test process.

One coordinator and two workers (built-in reconcilers) serve the whole module; every test
creates its own CompositeController, whose ``parentResource.labelSelector`` selects only that
test's parents, in its own namespace, and deletes it at the end. Hooks are answered by
``tests.e2e.hookserver`` as each test programs them. Nothing here depends on the embedded
cluster: with ``METASHARD_E2E_KUBECONFIG`` the same tests run against a real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from proto.api.names import LAST_APPLIED_ANNOTATION
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.e2e.conftest import BOTH_APPLY_STRATEGIES, KUBECONFIG_ENV
from tests.e2e.harness import Processes, eventually
from tests.e2e.hookserver import HookServer, Reply

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio, BOTH_APPLY_STRATEGIES]

THINGS = Resource(
    "e2e.metashard.io", "v1", "things", "Thing", namespaced=True, subresources=("status",)
)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
CCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", "CompositeController", False
)
SELECTED_BY = "e2e.metashard.io/controller"
FINALIZER = "metacontroller.io/compositecontroller-{}"

Answer = Callable[[str, dict[str, Any]], "Reply | dict[str, Any]"]


# --- fixtures ---------------------------------------------------------------------------------


MakeController = Callable[..., Awaitable[str]]
GC_WITHIN = 60.0 if os.environ.get(KUBECONFIG_ENV) else 30.0


async def make_controller(
    kube: Client,
    hooks: HookServer,
    answer: Answer,
    *,
    method: str = "InPlace",
    generate_selector: bool = True,
    finalize: bool = False,
    hook_timeout: str | None = None,
    resync: int | None = None,
    children: str = "configmaps",
    annotations: dict[str, str] | None = None,
    child: dict[str, Any] | None = None,
) -> str:
    """A new CompositeController for Things labelled with its name, ``children`` of one
    type (``v1``, updated by ``method``; or the ``childResources`` entry ``child``), hooks
    answered by ``answer``, with ``annotations``; its name."""
    name = f"e2e-{secrets.token_hex(3)}"
    hooks.program(name, answer)

    def webhook(hook: str) -> dict[str, Any]:
        found: dict[str, Any] = {"url": hooks.url(name, hook)}
        if hook_timeout is not None:
            found["timeout"] = hook_timeout
        return {"webhook": found}

    spec: dict[str, Any] = {
        "generateSelector": generate_selector,
        "parentResource": {
            "apiVersion": "e2e.metashard.io/v1",
            "resource": "things",
            "labelSelector": {"matchLabels": {SELECTED_BY: name}},
        },
        "childResources": [
            child
            or {"apiVersion": "v1", "resource": children, "updateStrategy": {"method": method}}
        ],
        "hooks": {
            "sync": webhook("sync"),
            **({"finalize": webhook("finalize")} if finalize else {}),
        },
    }
    if resync is not None:
        spec["resyncPeriodSeconds"] = resync
    await kube.create(
        CCS,
        {
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "CompositeController",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": spec,
        },
    )
    return name


@contextlib.asynccontextmanager
async def composite_controller(
    kube: Client, hooks: HookServer, answer: Answer, **options: Any
) -> AsyncIterator[str]:
    """``make_controller``, deleted on the way out; its name."""
    name = await make_controller(kube, hooks, answer, **options)
    try:
        yield name
    finally:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CCS, name)


@pytest_asyncio.fixture
async def controller(
    kube: Client, hooks: HookServer, stack: Processes
) -> AsyncIterator[MakeController]:
    """``await controller(answer, **options)``: ``make_controller`` for the module's stack;
    the controllers are deleted at the end of the test."""
    made: list[str] = []

    async def make(answer: Answer, **options: Any) -> str:
        name = await make_controller(kube, hooks, answer, **options)
        made.append(name)
        return name

    yield make
    for name in made:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CCS, name)


# --- helpers ----------------------------------------------------------------------------------


def fanout(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    """The fanout job: ``spec.children`` ConfigMaps ``<parent>-<i>`` holding ``spec.data``."""
    if request["finalizing"]:
        return {"children": [], "finalized": True}
    parent = request["parent"]
    spec = parent.get("spec") or {}
    count = int(spec.get("children") or 0)
    children = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{parent['metadata']['name']}-{i}"},
            "data": {"value": str(spec.get("data", "")), "index": str(i)},
        }
        for i in range(count)
    ]
    return {"status": {"children": count}, "children": children}


async def thing(
    kube: Client, namespace: str, name: str, controller: str, spec: dict[str, Any]
) -> dict[str, Any]:
    return await kube.create(
        THINGS,
        {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Thing",
            "metadata": {"name": name, "namespace": namespace, "labels": {SELECTED_BY: controller}},
            "spec": spec,
        },
    )


async def get(kube: Client, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return await kube.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return None


async def configmaps(kube: Client, namespace: str) -> dict[str, dict[str, Any]]:
    listed = await kube.list(CONFIGMAPS, namespace=namespace)
    return {
        o["metadata"]["name"]: o
        for o in listed.items
        if o["metadata"]["name"] != "kube-root-ca.crt"
    }


async def sync_errors(kube: Client, namespace: str) -> dict[str, list[str]]:
    """SyncError event messages per involved object name."""
    found: dict[str, list[str]] = {}
    for event in (await kube.list(EVENTS, namespace=namespace)).items:
        if event.get("reason") == "SyncError":
            assert event["type"] == "Warning"
            assert event["source"]["component"] == "metacontroller"
            assert event["involvedObject"]["kind"] == "Thing"
            found.setdefault(event["involvedObject"]["name"], []).append(event["message"])
    return found


async def api_writes(kube: Client) -> Counter[tuple[str, str]] | None:
    """Write requests the API server counted for Things and ConfigMaps, by (verb, resource;
    a server-side apply is verb ``APPLY``); None when ``/metrics`` cannot be read. Requests
    of the control plane's own components (a real cluster labels them ``system_client``, as
    kube-controller-manager's ``kube-root-ca.crt`` creates) are not counted."""
    try:
        text = (await kube.session.request("GET", "/metrics")).body.decode()
    except errors.KubeError:
        return None
    counts: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        head, _, value = line.rpartition(" ")
        labels = dict(
            part.split("=", 1) for part in head[len("apiserver_request_total{") : -1].split(",")
        )
        labels = {k: v.strip('"') for k, v in labels.items()}
        if labels.get("system_client"):
            continue
        if labels.get("verb") in ("POST", "PUT", "PATCH", "APPLY", "DELETE") and labels.get(
            "resource"
        ) in (
            "things",
            "configmaps",
        ):
            sub = labels.get("subresource", "")
            counts[(labels["verb"], labels["resource"] + (f"/{sub}" if sub else ""))] += int(
                float(value)
            )
    return counts


def converged(
    parent: dict[str, Any] | None, children: dict[str, dict[str, Any]], data: str, count: int
) -> bool:
    if parent is None:
        return False
    name = parent["metadata"]["name"]
    status = parent.get("status") or {}
    if status != {"children": count, "observedGeneration": parent["metadata"]["generation"]}:
        return False
    for i in range(count):
        child = children.get(f"{name}-{i}")
        if child is None or child.get("data", {}).get("value") != data:
            return False
        refs = child["metadata"].get("ownerReferences") or []
        if [r["uid"] for r in refs if r.get("controller")] != [parent["metadata"]["uid"]]:
            return False
    return not any(n.startswith(f"{name}-") and int(n.rsplit("-", 1)[1]) >= count for n in children)


async def all_converged(
    kube: Client, namespace: str, names: list[str], data: str | dict[str, str], count: int
) -> bool:
    children = await configmaps(kube, namespace)
    for name in names:
        want = data if isinstance(data, str) else data[name]
        if not converged(await get(kube, THINGS, namespace, name), children, want, count):
            return False
    return True


# --- tests ------------------------------------------------------------------------------------


async def test_fanout_writes_exactly_what_is_needed_and_updates_in_place(
    kube: Client,
    namespace: str,
    controller: MakeController,
    hooks: HookServer,
    stack: Processes,
    apply_strategy: str,
) -> None:
    server_side = apply_strategy == "server-side-apply"
    if os.environ.get(KUBECONFIG_ENV):  # a real cluster adds kube-root-ca.crt to new namespaces
        await eventually(lambda: _has_root_ca(kube, namespace), within=10)
    name = await controller(fanout, resync=1)
    names = [f"p{i}" for i in range(5)]
    before = await api_writes(kube)
    for parent in names:
        await thing(kube, namespace, parent, name, {"children": 3, "data": "one"})
    await eventually(
        lambda: all_converged(kube, namespace, names, "one", 3), within=30, message=stack.logs
    )
    # the children's own events and the 1 s resync sync every parent again: nothing to write
    settled: dict[str, str] = {}
    for parent in names:
        found = await get(kube, THINGS, namespace, parent)
        assert found is not None
        settled[parent] = found["metadata"]["resourceVersion"]
    calls = len(hooks.calls(name))
    await eventually(lambda: _more(hooks, name, calls + 2 * len(names)), within=15)
    for parent in names:
        current = await get(kube, THINGS, namespace, parent)
        assert current is not None and current["metadata"]["resourceVersion"] == settled[parent]
    after = await api_writes(kube)
    if not os.environ.get(KUBECONFIG_ENV):  # a real cluster may not let us read /metrics
        assert before is not None and after is not None
    if before is not None and after is not None:
        made = after - before
        if os.environ.get(KUBECONFIG_ENV):
            # The counts are cluster-wide: a real cluster's garbage collector and namespace
            # controller may be deleting what earlier tests left behind meanwhile.
            made = Counter({k: v for k, v in made.items() if k[0] != "DELETE"})
        create = ("APPLY", "configmaps") if server_side else ("POST", "configmaps")
        assert made == Counter({("POST", "things"): 5, create: 15, ("PUT", "things/status"): 5}), (
            "per parent: its own POST, 3 ConfigMap creates, 1 status PUT and nothing else"
        )

    child = (await configmaps(kube, namespace))["p0-1"]
    assert child["metadata"]["labels"] == {
        "controller-uid": child["metadata"]["ownerReferences"][0]["uid"]
    }
    assert child["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True
    annotations = child["metadata"].get("annotations") or {}
    assert (LAST_APPLIED_ANNOTATION in annotations) is not server_side

    # someone else adds a field; an InPlace update keeps it
    uid = child["metadata"]["uid"]
    await kube.patch(CONFIGMAPS, "p0-1", {"data": {"sidecar": "theirs"}}, namespace=namespace)
    for parent in names:
        await kube.patch(THINGS, parent, {"spec": {"data": "two"}}, namespace=namespace)
    await eventually(
        lambda: all_converged(kube, namespace, names, "two", 3), within=30, message=stack.logs
    )
    child = (await configmaps(kube, namespace))["p0-1"]
    assert child["data"] == {"value": "two", "index": "1", "sidecar": "theirs"}
    assert child["metadata"]["uid"] == uid  # updated, not recreated
    # A dynamic apply update leaves out managedFields, so the server keeps the live ones:
    # the field someone else set is still theirs.
    owned = [e.get("fieldsV1", {}).get("f:data", {}) for e in child["metadata"]["managedFields"]]
    assert any("f:sidecar" in fields for fields in owned), child["metadata"]["managedFields"]

    # fewer children: the extra ones go; deleting a parent takes its children with it
    await kube.patch(THINGS, "p1", {"spec": {"children": 1}}, namespace=namespace)
    await eventually(
        lambda: all_converged(kube, namespace, ["p1"], "two", 1), within=30, message=stack.logs
    )
    await kube.delete(THINGS, "p2", namespace=namespace)

    async def cascaded() -> bool:
        return not any(n.startswith("p2-") for n in await configmaps(kube, namespace))

    # A real cluster's garbage collector learns a CRD at its discovery resync (30 s): the
    # cascade from a Thing can take that long on a cluster whose test CRD is new.
    await eventually(cascaded, within=GC_WITHIN, message=stack.logs)
    assert await sync_errors(kube, namespace) == {}

    # the workers count hook calls under Metacontroller's metric names
    labels = {"controller_name": name, "controller_type": "CompositeController", "code": "200"}
    samples = [await p.metric("metacontroller_sync_requests_total", labels) for p in stack.procs]
    assert sum(s or 0 for s in samples) >= len(names)


async def _has_root_ca(kube: Client, namespace: str) -> bool:
    return await get(kube, CONFIGMAPS, namespace, "kube-root-ca.crt") is not None


async def _more(hooks: HookServer, name: str, count: int) -> bool:
    return len(hooks.calls(name)) >= count


@pytest.mark.parametrize("method", ["Recreate", "OnDelete"])
async def test_recreate_and_on_delete(
    kube: Client, namespace: str, controller: MakeController, stack: Processes, method: str
) -> None:
    name = await controller(fanout, method=method)
    await thing(kube, namespace, "p", name, {"children": 1, "data": "one"})
    await eventually(lambda: all_converged(kube, namespace, ["p"], "one", 1), message=stack.logs)
    first = (await configmaps(kube, namespace))["p-0"]
    await kube.patch(THINGS, "p", {"spec": {"data": "two"}}, namespace=namespace)
    if method == "OnDelete":
        await asyncio.sleep(1.0)  # time enough for a sync: the child stays as it was
        assert (await configmaps(kube, namespace))["p-0"] == first
        await kube.delete(CONFIGMAPS, "p-0", namespace=namespace)
    await eventually(lambda: all_converged(kube, namespace, ["p"], "two", 1), message=stack.logs)
    second = (await configmaps(kube, namespace))["p-0"]
    assert second["metadata"]["uid"] != first["metadata"]["uid"]


def pod_with_defaults(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    """One Pod ``<parent>-pod`` whose env ``valueFrom.fieldRef`` the server completes with
    ``apiVersion: v1``, and a container the server fills with defaults."""
    env = [{"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{request['parent']['metadata']['name']}-pod"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9", "env": env}]},
    }
    return {"children": [] if request["finalizing"] else [pod]}


async def test_server_defaults_cause_no_recreate_loop(
    kube: Client, namespace: str, controller: MakeController, hooks: HookServer, stack: Processes
) -> None:
    name = await controller(pod_with_defaults, method="Recreate", children="pods", resync=1)
    await thing(kube, namespace, "p", name, {})

    async def created() -> bool:
        return await get(kube, PODS, namespace, "p-pod") is not None

    await eventually(created, message=stack.logs)
    first = await get(kube, PODS, namespace, "p-pod")
    assert first is not None
    calls = len(hooks.calls(name))
    await eventually(lambda: _more(hooks, name, calls + 3), within=15, message=stack.logs)
    now = await get(kube, PODS, namespace, "p-pod")
    assert now is not None and now["metadata"]["uid"] == first["metadata"]["uid"]
    assert await sync_errors(kube, namespace) == {}


async def test_a_second_field_managers_field_survives(
    kube: Client, namespace: str, controller: MakeController, stack: Processes
) -> None:
    name = await controller(fanout)
    await thing(kube, namespace, "p", name, {"children": 1, "data": "one"})
    await eventually(lambda: all_converged(kube, namespace, ["p"], "one", 1), message=stack.logs)
    theirs = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "p-0", "namespace": namespace},
        "data": {"theirs": "kept"},
    }
    await kube.apply(CONFIGMAPS, theirs, field_manager="another-tool")
    await kube.patch(THINGS, "p", {"spec": {"data": "two"}}, namespace=namespace)
    await eventually(lambda: all_converged(kube, namespace, ["p"], "two", 1), message=stack.logs)
    child = (await configmaps(kube, namespace))["p-0"]
    assert child["data"] == {"value": "two", "index": "0", "theirs": "kept"}


async def test_without_force_another_managers_value_stays_and_is_reported(
    kube: Client, namespace: str, controller: MakeController, stack: Processes, apply_strategy: str
) -> None:
    name = await controller(fanout, annotations={"metashard.io/apply-force": "false"})
    await thing(kube, namespace, "p", name, {"children": 1, "data": "one"})
    await eventually(lambda: all_converged(kube, namespace, ["p"], "one", 1), message=stack.logs)
    taken = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "p-0", "namespace": namespace},
        "data": {"value": "theirs"},
    }
    await kube.apply(CONFIGMAPS, taken, field_manager="another-tool", force=True)
    if apply_strategy == "dynamic-apply":  # the annotation has no effect: ours again
        await eventually(
            lambda: all_converged(kube, namespace, ["p"], "one", 1), message=stack.logs
        )
        return

    async def reported() -> list[str]:
        return [
            e["message"]
            for e in (await kube.list(EVENTS, namespace=namespace)).items
            if e.get("reason") == "ApplyConflict" and e["involvedObject"]["name"] == "p"
        ]

    await eventually(lambda: _truthy(reported()), message=stack.logs)
    message = (await reported())[0]
    assert "ConfigMap" in message and ".data.value" in message and "another-tool" in message
    child = (await configmaps(kube, namespace))["p-0"]
    assert child["data"]["value"] == "theirs"
    assert await sync_errors(kube, namespace) == {}


async def _truthy(value: Awaitable[Any]) -> bool:
    return bool(await value)


async def test_adoption_and_orphaning(
    kube: Client, namespace: str, controller: MakeController, stack: Processes, apply_strategy: str
) -> None:
    def answer(hook: str, request: dict[str, Any]) -> dict[str, Any]:
        wanted = request["parent"]["spec"]["names"]
        children = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": n, "labels": {"app": "adopt"}},
                "data": {"value": "mine"},
            }
            for n in wanted
        ]
        return {
            "status": {"seen": sorted(request["children"]["ConfigMap.v1"])},
            "children": children,
        }

    name = await controller(answer, generate_selector=False)
    for orphan, labels in (
        ("a", {"app": "adopt"}),
        ("stray", {"app": "adopt"}),
        ("other", {"app": "no"}),
    ):
        await kube.create(
            CONFIGMAPS,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "data": {"value": "found"},
                "metadata": {"name": orphan, "namespace": namespace, "labels": labels},
            },
        )
    parent = await thing(
        kube,
        namespace,
        "p",
        name,
        {"names": ["a", "b"], "selector": {"matchLabels": {"app": "adopt"}}},
    )
    uid = parent["metadata"]["uid"]

    async def adopted() -> bool:
        found = await configmaps(kube, namespace)
        owners = {
            n: [r["uid"] for r in o["metadata"].get("ownerReferences") or []]
            for n, o in found.items()
        }
        return (
            owners.get("a") == [uid]
            and owners.get("b") == [uid]
            and "stray" not in found
            and owners.get("other") == []
            and found["a"]["data"] == {"value": "mine"}
        )

    await eventually(adopted, message=stack.logs)
    # a child whose labels stop matching is released; the hook still wants it: dynamic apply
    # leaves it alone (its create finds the name taken), server-side apply's create is an
    # apply, which makes it what the hook wants again: labelled, and ours
    await kube.patch(
        CONFIGMAPS, "b", {"metadata": {"labels": {"app": "gone"}}}, namespace=namespace
    )

    async def released() -> bool:
        child = await get(kube, CONFIGMAPS, namespace, "b")
        return child is not None and not child["metadata"].get("ownerReferences")

    async def reapplied() -> bool:
        child = await get(kube, CONFIGMAPS, namespace, "b")
        meta = (child or {}).get("metadata") or {}
        owners = [r["uid"] for r in meta.get("ownerReferences") or []]
        return meta.get("labels") == {"app": "adopt"} and owners == [uid]

    if apply_strategy == "server-side-apply":
        await eventually(reapplied, message=stack.logs)
        return
    await eventually(released, message=stack.logs)
    await asyncio.sleep(0.5)
    assert (await get(kube, CONFIGMAPS, namespace, "b"))["data"] == {"value": "mine"}  # type: ignore[index]


async def test_finalize_hook(
    kube: Client, namespace: str, controller: MakeController, hooks: HookServer, stack: Processes
) -> None:
    done = {"finalized": False}

    def answer(hook: str, request: dict[str, Any]) -> dict[str, Any]:
        if hook == "finalize":
            assert request["finalizing"] is True
            # not done yet: ask to be called again, as finalize hooks do
            return {"children": [], "finalized": done["finalized"], "resyncAfterSeconds": 0.2}
        return fanout(hook, request)

    name = await controller(answer, finalize=True)
    await thing(kube, namespace, "p", name, {"children": 2, "data": "x"})
    await eventually(lambda: all_converged(kube, namespace, ["p"], "x", 2), message=stack.logs)
    parent = await get(kube, THINGS, namespace, "p")
    assert parent is not None and parent["metadata"]["finalizers"] == [FINALIZER.format(name)]

    await kube.delete(THINGS, "p", namespace=namespace)

    async def finalizing() -> bool:  # the finalize hook ran, and its empty answer was applied
        return bool(hooks.calls(name, "finalize")) and not await configmaps(kube, namespace)

    await eventually(finalizing, message=stack.logs)
    still = await get(kube, THINGS, namespace, "p")
    assert still is not None and still["metadata"].get("deletionTimestamp")
    done["finalized"] = True

    async def gone() -> bool:
        return await get(kube, THINGS, namespace, "p") is None

    await eventually(gone, message=stack.logs)


async def test_resync_after_seconds(
    kube: Client, namespace: str, controller: MakeController, hooks: HookServer, stack: Processes
) -> None:
    def answer(hook: str, request: dict[str, Any]) -> dict[str, Any]:
        return {"status": {"ok": True}, "children": [], "resyncAfterSeconds": 0.3}

    name = await controller(answer)
    await thing(kube, namespace, "p", name, {})
    await eventually(lambda: _more(hooks, name, 5), within=15, message=stack.logs)
    parent = await get(kube, THINGS, namespace, "p")
    assert parent is not None and parent["status"] == {"ok": True, "observedGeneration": 1}


MALFORMED: dict[str, Reply | dict[str, Any]] = {
    "not-json": Reply(body=b"<html>not json</html>"),
    "wrong-types": {"status": "ready", "children": {"a": 1}},
    "null-child": {"children": [None]},
    "no-api-version": {"children": [{"kind": "ConfigMap", "metadata": {"name": "x"}}]},
    "no-kind": {"children": [{"apiVersion": "v1", "metadata": {"name": "x"}}]},
    "no-name": {"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}]},
    "other-namespace": {
        "children": [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "x", "namespace": "kube-system"},
            }
        ]
    },
    "undeclared-type": {
        "children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}]
    },
    "foreign-labels": {
        "children": [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "x", "labels": {"controller-uid": "not-the-parent"}},
            }
        ]
    },
    "status-500": Reply(status=500, body=b"internal error"),
    "timeout": Reply(delay=3.0, body=b"{}"),
}


async def test_bad_hook_answers_fail_their_parent_only(
    kube: Client, namespace: str, controller: MakeController, stack: Processes
) -> None:
    def answer(hook: str, request: dict[str, Any]) -> Reply | dict[str, Any]:
        return MALFORMED.get(request["parent"]["metadata"]["name"]) or fanout(hook, request)

    name = await controller(answer, hook_timeout="1s")
    created = {}
    for bad in MALFORMED:
        created[bad] = await thing(kube, namespace, bad, name, {"children": 1, "data": "x"})
    await thing(kube, namespace, "healthy", name, {"children": 1, "data": "x"})
    await eventually(
        lambda: all_converged(kube, namespace, ["healthy"], "x", 1), message=stack.logs
    )

    async def all_reported() -> bool:
        return set(MALFORMED) <= set(await sync_errors(kube, namespace))

    await eventually(all_reported, within=30, message=lambda: stack.logs())
    reported = await sync_errors(kube, namespace)
    assert "not valid JSON" in reported["not-json"][0]
    assert "children[0]" in reported["null-child"][0]
    assert "don't match parent selector" in reported["foreign-labels"][0]
    assert "500" in reported["status-500"][0]
    assert "within 1s" in reported["timeout"][0]
    assert all(m.startswith("Sync error: ") for messages in reported.values() for m in messages)
    assert set(await configmaps(kube, namespace)) == {"healthy-0"}
    for bad, obj in created.items():
        now = await get(kube, THINGS, namespace, bad)
        assert (
            now is not None
            and now["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
        )
        assert "status" not in now


async def test_too_many_requests_retries_after_the_delay_without_an_error(
    kube: Client, namespace: str, controller: MakeController, hooks: HookServer, stack: Processes
) -> None:
    """For 2 s the hook answers 429 with ``Retry-After: 2``. Honouring it, the key is called
    again only after the delay (or once more for a change event); exponential backoff from an
    error would have called it about ten times in those 2 s, with a SyncError event."""
    window: list[float] = []

    def answer(hook: str, request: dict[str, Any]) -> Reply | dict[str, Any]:
        now = time.monotonic()
        if not window:
            window.append(now + 2.0)
        if now < window[0]:
            return Reply(status=429, headers={"Retry-After": "2"})
        return fanout(hook, request)

    name = await controller(answer)
    await thing(kube, namespace, "p", name, {"children": 1, "data": "x"})
    await eventually(lambda: all_converged(kube, namespace, ["p"], "x", 1), message=stack.logs)
    refused = [t for t, _, _ in hooks.calls(name) if t < window[0]]
    assert 1 <= len(refused) <= 3
    assert await sync_errors(kube, namespace) == {}
