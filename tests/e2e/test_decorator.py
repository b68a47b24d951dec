"""DecoratorControllers run by real metashard processes, with hooks served by this test process.

Metacontroller's own decorator examples, reshaped to run anywhere: service-per-pod (a Service
per Pod of a StatefulSet-like set, removed when the Pod opts out), clusteredparent (a
cluster-scoped ClusterRole decorated with a RoleBinding in a namespace), crd-roles (a
decorator over CustomResourceDefinitions creating ClusterRoles), the finalize hook, and a
controller deleted while its finalizer is on objects. One coordinator and two workers serve
the module; each test creates its own DecoratorController selecting only its own objects.
Nothing here depends on the embedded cluster or on the timing of asynchronous cluster
behaviour (garbage collection included): every check polls.
"""

from __future__ import annotations

import base64
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from loadtest.dev.crds import simple_crd
from proto.api.names import DECORATOR_ANNOTATION, LAST_APPLIED_ANNOTATION
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.e2e.conftest import BOTH_APPLY_STRATEGIES
from tests.e2e.harness import Processes, eventually
from tests.e2e.hookserver import HookServer

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio, BOTH_APPLY_STRATEGIES]

PODS = Resource("", "v1", "pods", "Pod", True, subresources=("status",))
SERVICES = Resource("", "v1", "services", "Service", True)
EVENTS = Resource("", "v1", "events", "Event", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
CLUSTERROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
ROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
DCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "decoratorcontrollers", "DecoratorController", False
)
SELECTED_BY = "e2e.metashard.io/decorator"
Answer = Callable[[str, dict[str, Any]], dict[str, Any]]
Make = Callable[..., Awaitable[str]]


@pytest_asyncio.fixture
async def decorator(kube: Client, hooks: HookServer, stack: Processes) -> AsyncIterator[Make]:
    """``await decorator(answer, resources=..., attachments=..., finalize=...)``: a new
    DecoratorController whose hooks ``answer``; ``resources`` may use the name it gets.
    ``webhook`` adds fields to the sync hook's webhook; with ``authorization`` the hook server
    refuses calls without exactly that header."""
    made: list[str] = []

    async def make(
        answer: Answer,
        *,
        resources: Callable[[str], list[dict[str, Any]]],
        attachments: list[dict[str, Any]],
        finalize: bool = False,
        labels: dict[str, str] | None = None,
        resync: int | None = None,
        webhook: dict[str, Any] | None = None,
        authorization: str | None = None,
    ) -> str:
        name = f"e2e-{secrets.token_hex(3)}"
        hooks.program(name, answer, authorization=authorization)
        spec: dict[str, Any] = {
            "resources": resources(name),
            "attachments": attachments,
            "hooks": {
                "sync": {"webhook": {"url": hooks.url(name, "sync"), **(webhook or {})}},
                **(
                    {"finalize": {"webhook": {"url": hooks.url(name, "finalize")}}}
                    if finalize
                    else {}
                ),
            },
        }
        if resync is not None:
            spec["resyncPeriodSeconds"] = resync
        await kube.create(
            DCS,
            {
                "apiVersion": "metacontroller.k8s.io/v1alpha1",
                "kind": "DecoratorController",
                "metadata": {"name": name, "labels": labels or {}},
                "spec": spec,
            },
        )
        made.append(name)
        return name

    yield make
    for name in made:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(DCS, name)


async def get(kube: Client, resource: Resource, name: str, namespace: str | None = None) -> Any:
    try:
        return await kube.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return None


async def pod(kube: Client, namespace: str, name: str, **meta: Any) -> dict[str, Any]:
    return await kube.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, **meta},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9"}],
            },
        },
    )


# --- service-per-pod --------------------------------------------------------------------------


def service_per_pod(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    """Metacontroller's service-per-pod, for Pods: a Service selecting each Pod by its
    ``pod-name`` label, which the decorator adds; finalize removes both."""
    obj = request["object"]
    name = obj["metadata"]["name"]
    if request["finalizing"]:
        return {"labels": {"pod-name": None}, "attachments": [], "finalized": True}
    return {
        "labels": {"pod-name": name},
        "annotations": {"e2e.metashard.io/remove-me": None},
        "attachments": [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name},
                "spec": {"selector": {"pod-name": name}, "ports": [{"port": 80}]},
            }
        ],
    }


def pods_of(name: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "resource": "pods",
            "labelSelector": {"matchLabels": {SELECTED_BY: name}},
            "annotationSelector": {"matchAnnotations": {"service-per-pod": "true"}},
        }
    ]


SERVICE_ATTACHMENT = [{"apiVersion": "v1", "resource": "services"}]


async def test_service_per_pod_and_opt_out(
    kube: Client, namespace: str, decorator: Make, hooks: HookServer, apply_strategy: str
) -> None:
    name = await decorator(
        service_per_pod, resources=pods_of, attachments=SERVICE_ATTACHMENT, finalize=True
    )
    annotations = {"service-per-pod": "true", "e2e.metashard.io/remove-me": "x"}
    for i in range(3):  # the pods of a StatefulSet "web" with 3 replicas
        await pod(kube, namespace, f"web-{i}", labels={SELECTED_BY: name}, annotations=annotations)
    await pod(kube, namespace, "not-annotated", labels={SELECTED_BY: name})

    async def decorated() -> bool:
        for i in range(3):
            service = await get(kube, SERVICES, f"web-{i}", namespace)
            found = await get(kube, PODS, f"web-{i}", namespace)
            if service is None or found["metadata"].get("labels", {}).get("pod-name") != f"web-{i}":
                return False
        return True

    await eventually(decorated, within=60, message="a Service and a label per pod")
    service = await get(kube, SERVICES, "web-1", namespace)
    assert service["metadata"]["annotations"][DECORATOR_ANNOTATION] == name
    # the last-applied annotation is dynamic apply's alone (Metacontroller #1139 writes it
    # under server-side apply too)
    last_applied = LAST_APPLIED_ANNOTATION in service["metadata"]["annotations"]
    assert last_applied is (apply_strategy == "dynamic-apply")
    ref = service["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["controller"]) == ("Pod", "web-1", True)
    web1 = await get(kube, PODS, "web-1", namespace)
    assert "e2e.metashard.io/remove-me" not in web1["metadata"].get("annotations", {})
    assert f"metacontroller.io/decoratorcontroller-{name}" in web1["metadata"]["finalizers"]
    assert await get(kube, SERVICES, "not-annotated", namespace) is None
    assert {c[2]["object"]["metadata"]["name"] for c in hooks.calls(name)} <= {
        "web-0",
        "web-1",
        "web-2",
    }

    # web-1 opts out: its label goes away; finalize removes its Service, label and finalizer.
    await kube.patch(
        PODS, "web-1", {"metadata": {"labels": {SELECTED_BY: None}}}, namespace=namespace
    )

    async def opted_out() -> bool:
        found = await get(kube, PODS, "web-1", namespace)
        return (
            await get(kube, SERVICES, "web-1", namespace) is None
            and "pod-name" not in found["metadata"].get("labels", {})
            and not found["metadata"].get("finalizers")
        )

    await eventually(opted_out, within=60, message="web-1's Service, label and finalizer go")
    assert await get(kube, SERVICES, "web-0", namespace) is not None
    assert hooks.calls(name, "finalize")


# --- clusteredparent --------------------------------------------------------------------------


def role_binding(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    """Metacontroller's clusteredparent: a RoleBinding of each annotated ClusterRole to the
    ``default`` ServiceAccount, in the namespace the annotation names."""
    role = request["object"]
    namespace = role["metadata"]["annotations"]["e2e.metashard.io/bind-in"]
    return {
        "attachments": [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": role["metadata"]["name"], "namespace": namespace},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role["metadata"]["name"],
                },
                "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
            }
        ]
    }


async def test_cluster_scoped_target_with_namespaced_attachments(
    kube: Client, namespace: str, decorator: Make
) -> None:
    name = await decorator(
        role_binding,
        resources=lambda n: [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "resource": "clusterroles",
                "annotationSelector": {
                    "matchExpressions": [{"key": "e2e.metashard.io/bind-in", "operator": "Exists"}]
                },
                "labelSelector": {"matchLabels": {SELECTED_BY: n}},
            }
        ],
        attachments=[{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "rolebindings"}],
    )
    role = f"{name}-reader"
    await kube.create(
        CLUSTERROLES,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {
                "name": role,
                "labels": {SELECTED_BY: name},
                "annotations": {"e2e.metashard.io/bind-in": namespace},
            },
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        },
    )
    try:

        async def bound() -> bool:
            return await get(kube, ROLEBINDINGS, role, namespace) is not None

        await eventually(bound, within=60, message="the RoleBinding of the ClusterRole")
        binding = await get(kube, ROLEBINDINGS, role, namespace)
        ref = binding["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["name"]) == ("ClusterRole", role)
        assert binding["metadata"]["annotations"][DECORATOR_ANNOTATION] == name
    finally:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CLUSTERROLES, role)

    async def collected() -> bool:  # the garbage collector follows the ownerReference
        return await get(kube, ROLEBINDINGS, role, namespace) is None

    await eventually(collected, within=60, message="the RoleBinding is garbage-collected")


# --- crd-roles --------------------------------------------------------------------------------


def crd_reader(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    """Metacontroller's crd-roles: a ClusterRole that may read each annotated CRD's objects."""
    crd = request["object"]
    spec = crd["spec"]
    return {
        "attachments": [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": f"{crd['metadata']['name']}-reader"},
                "rules": [
                    {
                        "apiGroups": [spec["group"]],
                        "resources": [spec["names"]["plural"]],
                        "verbs": ["get", "list", "watch"],
                    }
                ],
            }
        ]
    }


async def test_decorator_over_crds_creates_cluster_roles(kube: Client, decorator: Make) -> None:
    name = await decorator(
        crd_reader,
        resources=lambda n: [
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "resource": "customresourcedefinitions",
                "labelSelector": {"matchLabels": {SELECTED_BY: n}},
                "annotationSelector": {"matchAnnotations": {"enable-default-roles": "yes"}},
            }
        ],
        attachments=[{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "clusterroles"}],
    )
    crd = simple_crd("e2e.metashard.io", f"Widget{name[4:]}".capitalize())
    crd["metadata"]["labels"] = {SELECTED_BY: name}
    crd["metadata"]["annotations"] = {"enable-default-roles": "yes"}
    crd_name = crd["metadata"]["name"]
    await kube.create(CRDS, crd)
    role = f"{crd_name}-reader"
    try:

        async def created() -> bool:
            return await get(kube, CLUSTERROLES, role) is not None

        await eventually(created, within=60, message="the ClusterRole of the CRD")
        found = await get(kube, CLUSTERROLES, role)
        assert found["rules"][0]["resources"] == [crd["spec"]["names"]["plural"]]
        ref = found["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["name"]) == ("CustomResourceDefinition", crd_name)
    finally:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CRDS, crd_name)

        async def gone() -> bool:
            return await get(kube, CLUSTERROLES, role) is None

        await eventually(gone, within=60, message="the ClusterRole is garbage-collected")


# --- finalize and deleted controllers ---------------------------------------------------------


async def test_finalize_runs_before_a_decorated_object_goes(
    kube: Client, namespace: str, decorator: Make, hooks: HookServer
) -> None:
    name = await decorator(
        service_per_pod, resources=pods_of, attachments=SERVICE_ATTACHMENT, finalize=True
    )
    await pod(
        kube,
        namespace,
        "solo",
        labels={SELECTED_BY: name},
        annotations={"service-per-pod": "true"},
    )

    async def decorated() -> bool:
        return await get(kube, SERVICES, "solo", namespace) is not None

    await eventually(decorated, within=60, message="the Service of the pod")
    await kube.delete(PODS, "solo", namespace=namespace)

    async def gone() -> bool:
        return await get(kube, PODS, "solo", namespace) is None

    await eventually(gone, within=60, message="the pod goes once finalized")
    finalizing = [c for c in hooks.calls(name, "finalize") if c[2]["finalizing"]]
    assert finalizing and finalizing[-1][2]["object"]["metadata"]["deletionTimestamp"]


async def test_deleting_a_controller_removes_its_finalizers(
    kube: Client, namespace: str, decorator: Make
) -> None:
    name = await decorator(
        service_per_pod, resources=pods_of, attachments=SERVICE_ATTACHMENT, finalize=True
    )
    finalizer = f"metacontroller.io/decoratorcontroller-{name}"
    for i in range(2):
        await pod(
            kube,
            namespace,
            f"held-{i}",
            labels={SELECTED_BY: name},
            annotations={"service-per-pod": "true"},
        )

    async def held() -> bool:
        for i in range(2):
            found = await get(kube, PODS, f"held-{i}", namespace)
            if finalizer not in (found["metadata"].get("finalizers") or []):
                return False
        return True

    await eventually(held, within=60, message="both pods carry the decorator's finalizer")
    await kube.delete(DCS, name)

    async def released() -> bool:
        for i in range(2):
            found = await get(kube, PODS, f"held-{i}", namespace)
            if found is not None and finalizer in (found["metadata"].get("finalizers") or []):
                return False
        return True

    await eventually(released, within=60, message="the finalizers of the deleted controller")
    await kube.delete(PODS, "held-0", namespace=namespace)

    async def deleted() -> bool:
        return await get(kube, PODS, "held-0", namespace) is None

    await eventually(deleted, within=60, message="a pod without the finalizer can be deleted")


# --- what is not acted on is loud -------------------------------------------------------------


async def warnings_about(kube: Client, name: str) -> list[dict[str, Any]]:
    events = await kube.list(
        EVENTS, namespace="default", field_selector=f"involvedObject.name={name}"
    )
    return [e for e in events.items if e.get("type") == "Warning"]


async def test_unsupported_fields_and_invalid_decorators_are_reported(
    kube: Client, namespace: str, decorator: Make
) -> None:
    rolling = await decorator(
        service_per_pod,
        resources=pods_of,
        attachments=[
            {
                "apiVersion": "v1",
                "resource": "services",
                "updateStrategy": {"method": "RollingInPlace"},
            }
        ],
    )
    invalid = await decorator(
        service_per_pod,
        resources=lambda n: [
            {
                "apiVersion": "v1",
                "resource": "pods",
                "annotationSelector": {"matchAnnotations": {"bad": "not a label value!"}},
            }
        ],
        attachments=SERVICE_ATTACHMENT,
    )

    async def reported() -> bool:
        return bool(await warnings_about(kube, rolling)) and bool(
            await warnings_about(kube, invalid)
        )

    await eventually(reported, within=30, message="Warning events on both controllers")
    (unsupported, *_) = await warnings_about(kube, rolling)
    assert unsupported["reason"] == "UnsupportedField"
    assert "spec.attachments[0].updateStrategy.method" in unsupported["message"]
    (create_error, *_) = await warnings_about(kube, invalid)
    assert create_error["reason"] == "CreateError"
    assert "annotationSelector" in create_error["message"]
    # The controller with an unsupported field still runs.
    await pod(
        kube,
        namespace,
        "rolled",
        labels={SELECTED_BY: rolling},
        annotations={"service-per-pod": "true"},
    )

    async def decorated() -> bool:
        return await get(kube, SERVICES, "rolled", namespace) is not None

    await eventually(decorated, within=60, message="the Service of the pod")


async def test_a_hook_token_from_a_secret_missing_then_created(
    kube: Client, namespace: str, decorator: Make
) -> None:
    token = f"t-{secrets.token_hex(8)}"
    auth = {"secretRef": {"name": "dc-token", "namespace": namespace, "key": "token"}}
    name = await decorator(
        service_per_pod,
        resources=pods_of,
        attachments=SERVICE_ATTACHMENT,
        webhook={"authorization": auth},
        authorization=f"Bearer {token}",
    )
    await pod(
        kube, namespace, "p", labels={SELECTED_BY: name}, annotations={"service-per-pod": "true"}
    )
    missing = f"Secret {namespace}/dc-token not found"

    async def reported() -> bool:
        return any(missing in e.get("message", "") for e in await warnings_about(kube, name))

    await eventually(reported, within=30, message="a Warning on the controller naming the Secret")
    assert await get(kube, SERVICES, "p", namespace) is None
    # The Secret appears: its token is used, without an edit of the controller.
    data = {"token": base64.b64encode(token.encode()).decode()}
    await kube.create(
        SECRETS,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "dc-token"}, "data": data},
        namespace=namespace,
    )

    async def decorated() -> bool:
        return await get(kube, SERVICES, "p", namespace) is not None

    await eventually(decorated, within=60, message="the Service of the pod, with the token")


# --- customize --------------------------------------------------------------------------------


async def test_customize_brings_related_objects_to_a_decorator(
    kube: Client, namespace: str, decorator: Make, hooks: HookServer
) -> None:
    group = secrets.token_hex(3)

    def answer(hook: str, request: dict[str, Any]) -> dict[str, Any]:
        if hook == "customize":
            rule = {
                "apiVersion": "v1",
                "resource": "secrets",
                "labelSelector": {"matchLabels": {"group": group}},
            }
            return {"relatedResources": [rule]}
        related = sorted(request["related"].get("Secret.v1", {}))
        return {"annotations": {"e2e.metashard.io/related": ",".join(related)}}

    name = await decorator(answer, resources=pods_of, attachments=SERVICE_ATTACHMENT)
    body = await kube.get(DCS, name)
    body["spec"]["hooks"]["customize"] = {"webhook": {"url": hooks.url(name, "customize")}}
    await kube.replace(DCS, body)
    for secret in ("one", "two"):
        await kube.create(
            Resource("", "v1", "secrets", "Secret", True),
            {"metadata": {"name": secret, "labels": {"group": group}}},
            namespace=namespace,
        )
    await pod(
        kube,
        namespace,
        "p",
        labels={SELECTED_BY: name},
        annotations={"service-per-pod": "true"},
    )

    async def related() -> bool:
        found = await get(kube, PODS, "p", namespace)
        annotations: dict[str, str] = found["metadata"].get("annotations", {})
        return annotations.get("e2e.metashard.io/related") == "one,two"

    await eventually(related, within=60, message="the related Secrets reach the sync hook")
    customize = hooks.calls(name, "customize")
    assert customize and customize[-1][2]["parent"]["metadata"]["name"] == "p"


async def test_resync_period_calls_the_hook_again_without_changes(
    kube: Client, namespace: str, decorator: Make, hooks: HookServer
) -> None:
    name = await decorator(
        service_per_pod, resources=pods_of, attachments=SERVICE_ATTACHMENT, resync=1
    )
    await pod(
        kube,
        namespace,
        "steady",
        labels={SELECTED_BY: name},
        annotations={"service-per-pod": "true"},
    )

    async def converged() -> bool:
        found = await get(kube, PODS, "steady", namespace)
        return (
            await get(kube, SERVICES, "steady", namespace) is not None
            and found["metadata"]["labels"].get("pod-name") == "steady"
        )

    await eventually(converged, within=60, message="the pod decorated")
    settled = len(hooks.calls(name, "sync"))

    async def resynced() -> bool:  # nothing changes any more: only the resync calls the hook
        return len(hooks.calls(name, "sync")) >= settled + 3

    await eventually(resynced, within=60, message="resyncPeriodSeconds: 1 syncs again and again")


# --- server-side narrowing ----------------------------------------------------------------------

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)


def secret_per_configmap(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    name = request["object"]["metadata"]["name"]
    return {
        "attachments": [
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque"}
        ]
    }


async def test_configmaps_no_controller_selects_never_reach_the_coordinator(
    kube: Client, namespace: str, decorator: Make, hooks: HookServer, stack: Processes
) -> None:
    """Metacontroller #1033: a decorator of ConfigMaps with a label selector caches only the
    ConfigMaps it selects; one that starts or stops matching comes or goes."""

    async def configmap(name: str, labels: dict[str, str]) -> None:
        body = {"metadata": {"name": name, "namespace": namespace, "labels": labels}}
        await kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", **body})

    def selecting(n: str) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": "v1",
                "resource": "configmaps",
                "labelSelector": {"matchLabels": {SELECTED_BY: n}},
            }
        ]

    name = await decorator(
        secret_per_configmap,
        resources=selecting,
        attachments=[{"apiVersion": "v1", "resource": "secrets"}],
    )
    for i in range(30):
        await configmap(f"other-{i}", {"e2e.metashard.io/other": "yes"})
    for i in range(2):
        await configmap(f"selected-{i}", {SELECTED_BY: name})
    coordinator = stack.procs[0]

    async def cached(count: int) -> bool:
        objects = await coordinator.metric(
            "metashard_informer_objects", {"resource": "configmaps.v1"}
        )
        return objects == count

    async def attached(*names: str) -> bool:
        return all([await get(kube, SECRETS, n, namespace) is not None for n in names])

    await eventually(lambda: attached("selected-0", "selected-1"), within=60, message="secrets")
    await eventually(lambda: cached(2), within=30, message="only the 2 selected are cached")

    # one starts matching: it is listed, cached and decorated
    await kube.patch(
        CONFIGMAPS, "other-5", {"metadata": {"labels": {SELECTED_BY: name}}}, namespace=namespace
    )
    await eventually(lambda: attached("other-5"), within=60, message="other-5's secret")
    await eventually(lambda: cached(3), within=30, message="other-5 cached")
    # one stops matching: the server's DELETED takes it out of the cache
    await kube.patch(
        CONFIGMAPS, "selected-0", {"metadata": {"labels": {SELECTED_BY: None}}}, namespace=namespace
    )
    await eventually(lambda: cached(2), within=30, message="selected-0 no longer cached")
    called = {c[2]["object"]["metadata"]["name"] for c in hooks.calls(name)}
    assert called == {"selected-0", "selected-1", "other-5"}
