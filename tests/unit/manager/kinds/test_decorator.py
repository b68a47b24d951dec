"""manager.kinds.decorator: which keys a DecoratorController's events map to, and what its
snapshots hold."""

from __future__ import annotations

from typing import Any, TypedDict

import orjson
import pytest

from manager.informers.store import LONG_VALUE, Cached, Store
from manager.kinds.decorator import DecoratorView
from manager.routing.router import KeyIndex, Router
from manager.term.snapshots import parent_of, snapshot_of
from proto.api.decorator import parse_decorator_controller
from proto.api.names import DECORATOR_ANNOTATION
from proto.kube.resources import Resource
from proto.wire import ParentKey, Priority
from tests.unit.manager.informers.fakes import Stores

PODS = Resource("", "v1", "pods", "Pod", True, subresources=("status",))
ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
SERVICES = Resource("", "v1", "services", "Service", True)
BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True)
FINALIZER = "metacontroller.io/decoratorcontroller-dc"


def view(*rules: dict[str, Any]) -> DecoratorView:
    obj = {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "DecoratorController",
        "metadata": {"name": "dc", "uid": "dc-uid"},
        "spec": {
            "resources": list(rules),
            "attachments": [
                {"apiVersion": "v1", "resource": "services"},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "rolebindings"},
            ],
            "hooks": {"sync": {"webhook": {"url": "http://hook/sync"}}},
        },
    }
    targets = tuple(PODS if r["resource"] in ("pods", "po") else ROLES for r in rules)
    return DecoratorView(
        parse_decorator_controller(obj), orjson.dumps(obj), "1", targets, (SERVICES, BINDINGS)
    )


POD_RULE = {
    "apiVersion": "v1",
    "resource": "pods",
    "labelSelector": {"matchLabels": {"app": "web"}},
    "annotationSelector": {"matchAnnotations": {"service-per-pod": "true"}},
}
ROLE_RULE = {"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "clusterroles"}


def cached(
    name: str,
    *,
    ns: str = "ns",
    kind: str = "Pod",
    api_version: str = "v1",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: tuple[str, str, str] | None = None,  # (apiVersion, kind, name)
    **meta: Any,
) -> Cached:
    metadata: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": "1",
        "labels": labels or {},
        "annotations": annotations or {},
        **meta,
    }
    if ns:
        metadata["namespace"] = ns
    if owner is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": owner[0],
                "kind": owner[1],
                "name": owner[2],
                "uid": f"uid-{owner[2]}",
                "controller": True,
            }
        ]
    obj = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    return Cached.from_object(obj, orjson.dumps(obj))


class Selection(TypedDict):
    """Keywords of ``cached`` that make a pod match ``POD_RULE``."""

    labels: dict[str, str]
    annotations: dict[str, str]


SELECTED: Selection = {"labels": {"app": "web"}, "annotations": {"service-per-pod": "true"}}
OURS = {DECORATOR_ANNOTATION: "dc"}


class World:
    def __init__(self, v: DecoratorView) -> None:
        self.view = v
        self.stores = Stores({r.name: Store() for r in (PODS, ROLES, SERVICES, BINDINGS)})
        self.pushed: list[ParentKey] = []
        self.keys = KeyIndex()
        self.router = Router(sink=self, keys=self.keys, stores=self.stores)
        self.router.controllers_changed([v], [v])

    def push(self, key: ParentKey, priority: Priority) -> None:
        self.pushed.append(key)

    def event(self, resource: Resource, obj: Cached) -> None:
        old = self.stores[resource.name].upsert(obj)
        self.router.handler(resource)("MODIFIED", old, obj, False)


def pod_key(name: str) -> ParentKey:
    return ParentKey("DecoratorController", "dc", "pods", "ns", name)


def role_key(name: str) -> ParentKey:
    return ParentKey(
        "DecoratorController", "dc", "clusterroles.rbac.authorization.k8s.io", "", name
    )


@pytest.mark.parametrize(
    ("labels", "annotations", "handled"),
    [
        ({"app": "web"}, {"service-per-pod": "true"}, True),
        ({"app": "web"}, {}, False),  # the annotation selector must match too
        ({}, {"service-per-pod": "true"}, False),
        ({"app": "web"}, {"service-per-pod": "false"}, False),
    ],
)
def test_targets_need_both_selectors(
    labels: dict[str, str], annotations: dict[str, str], handled: bool
) -> None:
    w = World(view(POD_RULE))
    w.event(PODS, cached("p", labels=labels, annotations=annotations))
    assert (w.pushed == [pod_key("p")]) is handled
    assert (w.keys.keys_of(range(1024)) == (pod_key("p"),)) is handled


def test_a_target_carrying_our_finalizer_stays_handled() -> None:
    w = World(view(POD_RULE))
    w.event(PODS, cached("p", finalizers=[FINALIZER]))
    assert w.keys.keys_of(range(1024)) == (pod_key("p"),)


def test_a_target_is_never_behind_whatever_its_status_says() -> None:
    """A DecoratorController writes no observedGeneration: a target's is its own controller's."""
    w = World(view(POD_RULE))
    selected = cached("p", labels={"app": "web"}, annotations={"service-per-pod": "true"})
    obj = orjson.loads(selected.raw)
    for status in (None, {"observedGeneration": 1}):
        obj["metadata"]["generation"] = 2
        obj["status"] = status
        w.event(PODS, Cached.from_object(obj, orjson.dumps(obj)))
        assert w.keys.keys_of(range(1024)) == (pod_key("p"),)
        assert w.keys.behind_of(range(1024)) == ()


def test_long_annotation_values_still_match_exists_but_never_equal() -> None:
    rule = {
        "apiVersion": "v1",
        "resource": "pods",
        "annotationSelector": {"matchExpressions": [{"key": "big", "operator": "Exists"}]},
    }
    w = World(view(rule))
    pod = cached("p", annotations={"big": "x" * 1000})
    assert pod.annotations["big"] == LONG_VALUE
    w.event(PODS, pod)
    assert w.pushed == [pod_key("p")]


def test_several_resources_any_scope_keys_by_resource() -> None:
    w = World(view(POD_RULE, ROLE_RULE))
    w.event(PODS, cached("p", **SELECTED))
    w.event(ROLES, cached("admin", ns="", kind="ClusterRole"))
    assert w.pushed == [pod_key("p"), role_key("admin")]
    assert w.keys.keys_of(range(1024)) == tuple(sorted([pod_key("p"), role_key("admin")]))


def test_rules_apply_to_the_resource_they_resolve_to() -> None:
    """A rule naming ``po`` is a rule of pods: any rule of pods selects, however named."""
    db = {"apiVersion": "v1", "resource": "pods", "labelSelector": {"matchLabels": {"app": "db"}}}
    w = World(view({**POD_RULE, "resource": "po"}, db))
    w.event(PODS, cached("p", **SELECTED))
    w.event(PODS, cached("q", labels={"app": "db"}))
    w.event(PODS, cached("r", labels={"app": "other"}))
    assert w.pushed == [pod_key("p"), pod_key("q")]
    assert w.view.parents == (PODS,)


def test_attachments_map_to_their_target_only_when_annotated() -> None:
    w = World(view(POD_RULE, ROLE_RULE))
    w.event(PODS, cached("p", **SELECTED))
    w.event(ROLES, cached("admin", ns="", kind="ClusterRole"))
    w.pushed.clear()
    w.event(SERVICES, cached("svc-p", annotations=OURS, owner=("v1", "Pod", "p")))
    w.event(SERVICES, cached("other", owner=("v1", "Pod", "p")))  # a pod owns it, not us
    w.event(
        BINDINGS,
        cached(
            "rb",
            ns="default",
            annotations=OURS,
            owner=("rbac.authorization.k8s.io/v1", "ClusterRole", "admin"),
        ),
    )
    assert w.pushed == [pod_key("p"), role_key("admin")]


def test_annotated_orphans_go_to_targets_in_scope_plain_orphans_nowhere() -> None:
    w = World(view(POD_RULE))
    w.event(PODS, cached("p", **SELECTED))
    w.event(PODS, cached("q", ns="other", **SELECTED))
    w.pushed.clear()
    w.event(SERVICES, cached("plain"))
    w.event(SERVICES, cached("orphan", annotations=OURS))
    assert w.pushed == [pod_key("p")]


def test_snapshot_holds_our_attachments_and_annotated_orphans() -> None:
    w = World(view(POD_RULE))
    w.event(PODS, cached("p", **SELECTED))
    w.event(SERVICES, cached("ours", annotations=OURS, owner=("v1", "Pod", "p")))
    w.event(SERVICES, cached("not-annotated", owner=("v1", "Pod", "p")))
    w.event(SERVICES, cached("orphan", annotations=OURS))
    w.event(SERVICES, cached("plain"))
    w.event(SERVICES, cached("elsewhere", ns="other", annotations=OURS))
    parent, children, related = snapshot_of(
        w.view, parent_of(w.view, pod_key("p"), w.stores), stores=w.stores
    )
    assert parent is not None and orjson.loads(parent)["metadata"]["name"] == "p"
    names = [orjson.loads(r)["metadata"]["name"] for r in children["Service.v1"]]
    assert names == ["ours", "orphan"]
    assert children["RoleBinding.rbac.authorization.k8s.io/v1"] == ()
    assert related == {}
    # A key of a target that is no longer selected: no parent.
    w.event(PODS, cached("p", labels={"app": "db"}))
    assert (
        snapshot_of(w.view, parent_of(w.view, pod_key("p"), w.stores), stores=w.stores)[0] is None
    )


def test_cluster_scoped_target_sees_attachments_in_every_namespace() -> None:
    w = World(view(ROLE_RULE))
    w.event(ROLES, cached("admin", ns="", kind="ClusterRole"))
    owner = ("rbac.authorization.k8s.io/v1", "ClusterRole", "admin")
    w.event(BINDINGS, cached("a", ns="one", annotations=OURS, owner=owner))
    w.event(BINDINGS, cached("b", ns="two", annotations=OURS, owner=owner))
    _, children, _ = snapshot_of(
        w.view, parent_of(w.view, role_key("admin"), w.stores), stores=w.stores
    )
    names = [
        orjson.loads(r)["metadata"]["name"]
        for r in children["RoleBinding.rbac.authorization.k8s.io/v1"]
    ]
    assert names == ["a", "b"]


GONE = {"deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": [FINALIZER]}


@pytest.mark.parametrize(
    ("before", "after", "pushed"),
    [
        ({}, {}, False),  # status only
        ({}, {"generation": 2}, True),
        ({}, {"labels": {**SELECTED["labels"], "x": "y"}}, True),
        ({}, {"annotations": {**SELECTED["annotations"], "x": "y"}}, True),
        ({}, GONE, True),  # deletion starts
        # Every update of a target being deleted: its finalize hook may wait on its status.
        (GONE, GONE, True),
    ],
)
def test_ignore_status_changes_drops_what_metacontroller_drops(
    before: dict[str, Any], after: dict[str, Any], pushed: bool
) -> None:
    w = World(view({**POD_RULE, "ignoreStatusChanges": True}))
    w.event(PODS, cached("p", **{**SELECTED, **before}))
    w.pushed.clear()
    w.event(PODS, cached("p", **{**SELECTED, **after, "resourceVersion": "2"}))
    assert (w.pushed == [pod_key("p")]) is pushed


def test_ignore_status_changes_needs_every_rule_of_the_resource() -> None:
    rule = {**POD_RULE, "ignoreStatusChanges": True}
    w = World(view(rule))
    w.event(PODS, cached("p", **SELECTED))
    w.pushed.clear()
    w.event(PODS, cached("p", **SELECTED, resourceVersion="2"))  # status only
    assert w.pushed == []
    w.event(PODS, cached("p", labels={"app": "web", "x": "y"}, annotations=SELECTED["annotations"]))
    assert w.pushed == [pod_key("p")]
    both = World(view(rule, POD_RULE))
    both.event(PODS, cached("p", **SELECTED))
    both.pushed.clear()
    both.event(PODS, cached("p", **SELECTED, resourceVersion="2"))
    assert both.pushed == [pod_key("p")]
