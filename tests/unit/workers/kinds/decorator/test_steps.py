"""workers.kinds.decorator.steps: whole syncs of a target against an in-memory cluster."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

import orjson
import pytest

from loadtest.apiserver.inprocess import MemoryCluster, ScriptedHooks
from proto.api.endpoints import Connection, encode_connections
from proto.api.names import DECORATOR_ANNOTATION
from proto.hooks.client import HookEndpoint
from proto.kube.resources import Resource
from proto.wire import ControllerDef, ControllerKind, ParentKey, ResourceInfo
from tests.unit.workers.composite_world import Events
from workers.kinds.decorator.steps import DecoratorSteps
from workers.reconcile import Outcome, ReconcileRequest
from workers.sync.errors import SyncFailure
from workers.sync.template import SyncTemplate

PODS = Resource("", "v1", "pods", "Pod", True, subresources=("status",))
SERVICES = Resource("", "v1", "services", "Service", True)
NS = "ns"
FINALIZER = "metacontroller.io/decoratorcontroller-dc"

pytestmark = pytest.mark.asyncio


def decorator(
    *,
    finalize: bool = False,
    method: str = "InPlace",
    rules: list[dict[str, Any]] | None = None,
    **rule: Any,
) -> dict[str, Any]:
    """One rule for pods (``rule`` its selectors), or ``rules``."""
    hooks: dict[str, Any] = {"sync": {"webhook": {"url": "http://hook/sync"}}}
    if finalize:
        hooks["finalize"] = {"webhook": {"url": "http://hook/finalize"}}
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "DecoratorController",
        "metadata": {"name": "dc", "uid": "dc-uid"},
        "spec": {
            "resources": rules or [{"apiVersion": "v1", "resource": "pods", **rule}],
            "attachments": [
                {"apiVersion": "v1", "resource": "services", "updateStrategy": {"method": method}}
            ],
            "hooks": hooks,
        },
    }


def service_per_pod(request: dict[str, Any]) -> dict[str, Any]:
    pod = request["object"]
    if request["finalizing"]:
        return {"labels": {"decorated": None}, "attachments": [], "finalized": True}
    name = pod["metadata"]["name"]
    return {
        "labels": {"decorated": "yes", "remove-me": None},
        "annotations": {"seen": name},
        "status": {"decorated": True},
        "attachments": [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": f"svc-{name}"},
                "spec": {"selector": {"pod": name}},
            }
        ],
    }


T = TypeVar("T")


class KeyedHooks:
    """``ScriptedHooks`` that also records each call's endpoint and ETag cache key."""

    def __init__(self, hooks: ScriptedHooks) -> None:
        self.hooks = hooks
        self.calls: list[tuple[HookEndpoint, Hashable | None]] = []

    async def call_decoded(
        self,
        endpoint: HookEndpoint,
        body: bytes,
        *,
        decode: Callable[[bytes], T],
        cache_key: Hashable | None = None,
        cache_variant: Hashable = None,
        headers: Mapping[str, str] | None = None,
        ttl_of: Callable[[T], float | None] | None = None,
    ) -> T:
        self.calls.append((endpoint, cache_key))
        return await self.hooks.call_decoded(
            endpoint,
            body,
            decode=decode,
            cache_key=cache_key,
            cache_variant=cache_variant,
            headers=headers,
        )


class World:
    def __init__(
        self,
        dc: dict[str, Any],
        *,
        subresources: tuple[str, ...] = ("status",),
        connections: bytes = b"",
        targets: tuple[ResourceInfo, ...] | None = None,
    ) -> None:
        """``targets``: the resolved resource of each rule; pods for every rule by default."""
        self.cluster = MemoryCluster()
        self.events = Events()
        self.answer: Callable[[dict[str, Any]], Any] = service_per_pod
        self.hooks = ScriptedHooks(lambda r: orjson.dumps(self.answer(r)))
        self.keyed = KeyedHooks(self.hooks)
        pods = ResourceInfo("v1", "pods", "Pod", True, subresources)
        definition = ControllerDef(
            ControllerKind.DECORATOR,
            "dc",
            "dc-uid",
            "1",
            orjson.dumps(dc),
            (
                *(targets or (pods,) * len(dc["spec"]["resources"])),
                ResourceInfo("v1", "services", "Service", True, ()),
            ),
            connections,
        )
        self.wall = 1_767_225_600.0  # 2026-01-01T00:00:00Z
        steps = DecoratorSteps(definition, writer=self.cluster, wall_clock=lambda: self.wall)
        self.reconciler = SyncTemplate(
            definition, steps, writer=self.cluster, hooks=self.keyed, events=self.events
        )

    async def pod(self, name: str = "p", **meta: Any) -> dict[str, Any]:
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta}}
        return await self.cluster.create(PODS, body, namespace=NS)

    async def sync(self, name: str = "p") -> Outcome:
        key = ParentKey("DecoratorController", "dc", "pods", NS, name)
        snapshot = self.cluster.snapshot(key, PODS, [SERVICES])
        self.cluster.calls.clear()
        return await self.reconciler.reconcile(ReconcileRequest(key, snapshot))

    def get(self, resource: Resource, name: str) -> dict[str, Any] | None:
        return self.cluster.get(resource, NS, name)


async def test_labels_annotations_status_and_an_attachment() -> None:
    world = World(decorator())
    await world.pod(labels={"remove-me": "x", "keep": "k"})
    await world.sync()
    pod = world.get(PODS, "p")
    assert pod is not None
    assert pod["metadata"]["labels"] == {"keep": "k", "decorated": "yes"}
    assert pod["metadata"]["annotations"] == {"seen": "p"}
    assert pod["status"] == {"decorated": True}  # no observedGeneration for decorators
    service = world.get(SERVICES, "svc-p")
    assert service is not None
    assert service["metadata"]["annotations"][DECORATOR_ANNOTATION] == "dc"
    ref = service["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["controller"]) == ("Pod", "p", True)
    request = world.hooks.requests[0][1]
    assert set(request) == {"controller", "object", "attachments", "related", "finalizing"}
    assert request["attachments"] == {"Service.v1": {}}
    # A second pass finds nothing to do.
    await world.sync()
    assert world.cluster.writes() == []
    assert world.hooks.requests[-1][1]["attachments"]["Service.v1"].keys() == {"svc-p"}


async def test_hook_calls_carry_the_resolved_connections_and_the_target_key() -> None:
    token = Connection(authorization="Bearer t")
    broken = Connection(error="Secret ns/absent not found")
    connections = encode_connections({"sync": token, "finalize": broken})
    world = World(decorator(finalize=True), connections=connections)
    await world.pod(finalizers=[FINALIZER])
    await world.sync()
    ((endpoint, key),) = world.keyed.calls
    assert endpoint.connection == token and endpoint.controller_type == "DecoratorController"
    assert key == ParentKey("DecoratorController", "dc", "pods", NS, "p")  # the ETag cache key
    await world.cluster.delete(PODS, "p", namespace=NS)
    await world.sync()
    endpoint, key = world.keyed.calls[-1]
    assert endpoint.hook.value == "finalize" and endpoint.connection == broken
    assert key == ParentKey("DecoratorController", "dc", "pods", NS, "p")


async def test_null_status_leaves_the_status_alone() -> None:
    world = World(decorator())
    world.answer = lambda r: {"labels": {"a": "b"}}
    await world.pod()
    await world.sync()
    assert [(c[0], c[2]) for c in world.cluster.writes()] == [("PATCH", "")]
    pod = world.get(PODS, "p")
    assert pod is not None and "status" not in pod


async def test_an_attachment_no_longer_wanted_is_deleted_others_are_not_ours() -> None:
    world = World(decorator())
    pod = await world.pod()
    await world.sync()
    owner = world.get(SERVICES, "svc-p")["metadata"]["ownerReferences"]  # type: ignore[index]
    # owned by the pod but not annotated: someone else's, never touched
    await world.cluster.create(
        SERVICES, {"metadata": {"name": "foreign", "ownerReferences": owner}}, namespace=NS
    )
    world.answer = lambda r: {"attachments": []}
    await world.sync()
    assert world.get(SERVICES, "svc-p") is None
    assert world.get(SERVICES, "foreign") is not None
    assert pod["metadata"]["uid"] == owner[0]["uid"]


async def test_an_annotated_orphan_the_hook_wants_is_adopted() -> None:
    world = World(decorator())
    await world.pod()
    await world.cluster.create(
        SERVICES,
        {"metadata": {"name": "svc-p", "annotations": {DECORATOR_ANNOTATION: "dc"}}},
        namespace=NS,
    )
    await world.sync()
    service = world.get(SERVICES, "svc-p")
    assert service is not None
    assert service["metadata"]["ownerReferences"][0]["name"] == "p"
    assert service["spec"] == {"selector": {"pod": "p"}}  # then updated in place


async def test_a_target_being_deleted_adopts_nothing() -> None:
    """As Kubernetes' ControllerRefManager: adopted under a dying target, the orphan would go
    to the garbage collector once our finalizer is removed."""
    world = World(decorator(finalize=True))
    world.answer = lambda r: {
        "attachments": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "keep"}}],
        "finalized": False,
    }
    await world.pod(finalizers=[FINALIZER])
    await world.cluster.delete(PODS, "p", namespace=NS)  # held by our finalizer
    await world.cluster.create(
        SERVICES,
        {"metadata": {"name": "keep", "annotations": {DECORATOR_ANNOTATION: "dc"}}},
        namespace=NS,
    )
    await world.sync()  # the create finds the name taken: let go, as in Metacontroller
    assert world.hooks.requests[-1][1]["finalizing"] is True
    service = world.get(SERVICES, "keep")
    assert service is not None and "ownerReferences" not in service["metadata"]
    pod = world.get(PODS, "p")
    assert pod is not None and pod["metadata"]["finalizers"] == [FINALIZER]


@pytest.mark.parametrize(
    ("rule", "labels", "annotations", "selected"),
    [
        ({}, {}, {}, True),
        ({"labelSelector": {"matchLabels": {"app": "web"}}}, {"app": "web"}, {}, True),
        ({"labelSelector": {"matchLabels": {"app": "web"}}}, {"app": "db"}, {}, False),
        ({"annotationSelector": {"matchAnnotations": {"svc": "true"}}}, {}, {"svc": "true"}, True),
        ({"annotationSelector": {"matchAnnotations": {"svc": "true"}}}, {"svc": "true"}, {}, False),
        (
            {
                "labelSelector": {"matchLabels": {"app": "web"}},
                "annotationSelector": {"matchExpressions": [{"key": "svc", "operator": "Exists"}]},
            },
            {"app": "web"},
            {"svc": "anything"},
            True,
        ),
        (
            {
                "labelSelector": {"matchLabels": {"app": "web"}},
                "annotationSelector": {"matchExpressions": [{"key": "svc", "operator": "Exists"}]},
            },
            {"app": "web"},
            {},
            False,
        ),
    ],
)
async def test_targets_are_selected_by_labels_and_annotations(
    rule: dict[str, Any], labels: dict[str, str], annotations: dict[str, str], selected: bool
) -> None:
    world = World(decorator(**rule))
    await world.pod(labels=labels, annotations=annotations)
    await world.sync()
    assert bool(world.hooks.requests) is selected
    assert (world.get(SERVICES, "svc-p") is not None) is selected


CONFIGMAPS = ResourceInfo("v1", "configmaps", "ConfigMap", True, ())


def pod_rule(resource: str, app: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"apiVersion": "v1", "resource": resource}
    if app is not None:
        rule["labelSelector"] = {"matchLabels": {"app": app}}
    return rule


@pytest.mark.parametrize(
    ("rules", "configmaps_at", "selected"),
    [
        ([pod_rule("po")], None, True),  # a short name, resolved to pods
        ([pod_rule("po", app="db")], None, False),
        ([pod_rule("pods", app="db"), pod_rule("po", app="web")], None, True),  # any rule
        ([pod_rule("pods", app="db"), pod_rule("po", app="db")], None, False),
        # a rule of another resource never applies, however much it would select
        ([pod_rule("configmaps"), pod_rule("po", app="db")], 0, False),
        ([pod_rule("po", app="web"), pod_rule("cm")], 1, True),
    ],
)
async def test_rules_apply_to_the_resource_they_resolve_to(
    rules: list[dict[str, Any]], configmaps_at: int | None, selected: bool
) -> None:
    """Rules are matched by their resolved resource (``ControllerDef.resources``), not by the
    text naming it: the coordinator routes targets named by a short name too."""
    pods = ResourceInfo("v1", "pods", "Pod", True, ("status",))
    targets = tuple(CONFIGMAPS if i == configmaps_at else pods for i in range(len(rules)))
    world = World(decorator(rules=rules), targets=targets)
    await world.pod(labels={"app": "web"})
    await world.sync()
    assert bool(world.hooks.requests) is selected
    assert (world.get(SERVICES, "svc-p") is not None) is selected


async def test_finalizer_then_finalize_on_deletion_and_when_no_longer_selected() -> None:
    world = World(decorator(finalize=True, labelSelector={"matchLabels": {"app": "web"}}))
    await world.pod(labels={"app": "web"})
    await world.sync()
    pod = world.get(PODS, "p")
    assert pod is not None and pod["metadata"]["finalizers"] == [FINALIZER]
    assert world.get(SERVICES, "svc-p") is not None
    # The label goes away: opt-out, the finalize hook cleans up and lets go.
    await world.cluster.patch(PODS, "p", {"metadata": {"labels": {"app": None}}}, namespace=NS)
    await world.sync()
    endpoint, request = world.hooks.requests[-1]
    assert endpoint.hook.value == "finalize" and request["finalizing"] is True
    pod = world.get(PODS, "p")
    assert pod is not None and not pod["metadata"].get("finalizers")
    assert "decorated" not in pod["metadata"].get("labels", {})
    assert world.get(SERVICES, "svc-p") is None
    # Not selected and no finalizer: nothing happens.
    before = len(world.hooks.requests)
    await world.sync()
    assert len(world.hooks.requests) == before


async def test_deleting_target_is_finalized_and_released() -> None:
    world = World(decorator(finalize=True))
    await world.pod()
    await world.sync()
    await world.cluster.delete(PODS, "p", namespace=NS)  # held by our finalizer
    await world.sync()
    assert world.get(PODS, "p") is None  # finalized: the finalizer went, the pod with it


async def test_a_bad_attachment_fails_the_sync_with_a_sync_error_event() -> None:
    world = World(decorator())
    world.answer = lambda r: {
        "attachments": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}]
    }
    await world.pod()
    with pytest.raises(SyncFailure, match="not one of the controller's attachments"):
        await world.sync()
    assert [e[2] for e in world.events.emitted] == ["SyncError"]
    assert world.cluster.writes() == []


async def test_without_a_status_subresource_one_update_carries_everything() -> None:
    world = World(decorator(), subresources=())
    await world.pod(labels={"remove-me": "x"})
    await world.sync()
    writes = world.cluster.writes()
    assert [(c[0], c[1], c[2]) for c in writes[:1]] == [("PUT", "pods", "")]
    pod = world.get(PODS, "p")
    assert pod is not None and pod["metadata"]["labels"] == {"decorated": "yes"}
    assert pod["metadata"]["annotations"] == {"seen": "p"}


async def test_conditions_merge_into_the_targets_own_status_when_the_answer_has_none() -> None:
    world = World(decorator())
    ready = {"type": "Decorated", "status": "True", "reason": "Done"}
    world.answer = lambda r: {
        "conditions": [ready],
        "events": [{"type": "Normal", "reason": "Decorated", "message": "ok"}],
    }
    created = await world.pod()
    world.cluster.objects[("pods", NS, "p")] = {**created, "status": {"phase": "Running"}}
    await world.sync()
    written = {**ready, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    pod = world.get(PODS, "p")
    assert pod is not None and pod["status"] == {"phase": "Running", "conditions": [written]}
    assert world.events.emitted == [("p", "Normal", "Decorated", "ok")]
    world.wall += 30
    await world.sync()
    assert world.cluster.writes() == []
    # With a status of its own, the answer's conditions go into that one.
    world.answer = lambda r: {"status": {"decorated": True}, "conditions": [ready]}
    await world.sync()
    pod = world.get(PODS, "p")
    assert pod is not None and pod["status"] == {"decorated": True, "conditions": [written]}


async def test_a_paused_target_is_not_decorated_until_resumed_but_is_finalized() -> None:
    world = World(decorator(finalize=True))
    await world.pod(annotations={"metashard.io/paused": "true"})
    await world.sync()
    assert world.hooks.requests == [] and world.cluster.writes() == []
    assert [event[2] for event in world.events.emitted] == ["Paused"]
    await world.cluster.patch(
        PODS, "p", {"metadata": {"annotations": {"metashard.io/paused": None}}}, namespace=NS
    )
    await world.sync()
    assert world.get(SERVICES, "svc-p") is not None
    await world.cluster.patch(
        PODS, "p", {"metadata": {"annotations": {"metashard.io/paused": "true"}}}, namespace=NS
    )
    await world.cluster.delete(PODS, "p", namespace=NS)  # held by our finalizer
    await world.sync()
    assert world.hooks.requests[-1][0].hook.value == "finalize"
    assert world.get(PODS, "p") is None


async def test_a_paused_decorator_leaves_every_target_alone() -> None:
    dc = decorator()
    dc["metadata"]["annotations"] = {"metashard.io/paused": "true"}
    world = World(dc)
    await world.pod()
    await world.sync()
    assert world.hooks.requests == [] and world.cluster.writes() == []
    assert world.events.emitted == []
