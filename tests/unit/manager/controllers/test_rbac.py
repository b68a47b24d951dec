"""``manager.controllers.rbac``: the rules for tables of controllers, and ``metashard rbac`` on
files."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from hypothesis import given
from hypothesis import strategies as st

from manager.cli.rbac import main
from manager.controllers.rbac import (
    CHILD_VERBS,
    DECORATOR_PARENT_VERBS,
    PARENT_VERBS,
    ControllerResources,
    GroupResource,
    RbacError,
    by_api_version,
    by_discovery,
    cluster_role_rules,
    controller_resources,
)
from proto.kube.resources import Resource

BASE = [
    {
        "apiGroups": ["metacontroller.k8s.io"],
        "resources": ["compositecontrollers", "decoratorcontrollers"],
        "verbs": ["list", "watch"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]
ALL_CHILD = ["list", "watch", "create", "update", "patch", "delete"]


def composite(name: str, parent: tuple[str, str], *children: tuple[str, str], **hooks: Any) -> Any:
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": name},
        "spec": {
            "parentResource": {"apiVersion": parent[0], "resource": parent[1]},
            "childResources": [{"apiVersion": a, "resource": r} for a, r in children],
            "hooks": {"sync": {"webhook": {"url": "http://h/sync"}}, **hooks},
        },
    }


def decorator(name: str, parents: list[tuple[str, str]], *attachments: tuple[str, str]) -> Any:
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "DecoratorController",
        "metadata": {"name": name},
        "spec": {
            "resources": [{"apiVersion": a, "resource": r} for a, r in parents],
            "attachments": [{"apiVersion": a, "resource": r} for a, r in attachments],
            "hooks": {"sync": {"webhook": {"url": "http://h/sync"}}},
        },
    }


def rolling(obj: Any, method: str = "RollingRecreate") -> Any:
    """``obj`` (a composite) with its first child type updated by ``method``."""
    obj["spec"]["childResources"][0]["updateStrategy"] = {"method": method}
    return obj


def rules_for(*objects: Any, related: tuple[str, ...] = ()) -> list[dict[str, list[str]]]:
    controllers = [controller_resources(obj, by_api_version) for obj in objects]
    extra = [GroupResource.parse(text) for text in related]
    return [rule.as_dict() for rule in cluster_role_rules(controllers, related=extra)]


GREETINGS_PARENT = [
    {"apiGroups": ["example.com"], "resources": ["greetings"], "verbs": ["list", "watch", "patch"]},
    {
        "apiGroups": ["example.com"],
        "resources": ["greetings/finalizers", "greetings/status"],
        "verbs": ["update"],
    },
]
"""The rules of a Composite parent ``greetings.example.com``."""

CASES = [
    pytest.param([], (), BASE, id="no controllers: the API and events only"),
    pytest.param(
        [composite("c", ("example.com/v1", "greetings"), ("v1", "configmaps"))],
        (),
        [
            BASE[0],
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ALL_CHILD},
            BASE[1],
            *GREETINGS_PARENT,
        ],
        id="composite: parent list/watch/patch, status and finalizers update, children all",
    ),
    pytest.param(
        [
            decorator(
                "d", [("apps/v1", "deployments"), ("apps/v1", "statefulsets")], ("v1", "services")
            )
        ],
        (),
        [
            BASE[0],
            {"apiGroups": [""], "resources": ["services"], "verbs": ALL_CHILD},
            BASE[1],
            {
                "apiGroups": ["apps"],
                "resources": ["deployments", "statefulsets"],
                "verbs": ["list", "watch", "update", "patch"],
            },
            {
                "apiGroups": ["apps"],
                "resources": [
                    "deployments/finalizers",
                    "deployments/status",
                    "statefulsets/finalizers",
                    "statefulsets/status",
                ],
                "verbs": ["update"],
            },
        ],
        id="decorator: every resource is a parent that may be updated, attachments all",
    ),
    pytest.param(
        [
            composite("a", ("apps/v1", "deployments"), ("v1", "pods")),
            decorator("b", [("v1", "pods")], ("apps/v1", "deployments")),
        ],
        ("namespaces", "secrets", "pods"),
        [
            BASE[0],
            {"apiGroups": [""], "resources": ["pods"], "verbs": ALL_CHILD},
            {"apiGroups": [""], "resources": ["namespaces", "secrets"], "verbs": ["list", "watch"]},
            BASE[1],
            {
                "apiGroups": [""],
                "resources": ["pods/finalizers", "pods/status"],
                "verbs": ["update"],
            },
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ALL_CHILD},
            {
                "apiGroups": ["apps"],
                "resources": ["deployments/finalizers", "deployments/status"],
                "verbs": ["update"],
            },
        ],
        id="a resource in several roles gets the union; related add list/watch",
    ),
    pytest.param(
        [
            rolling(composite("r", ("example.com/v1", "greetings"), ("v1", "pods"))),
            composite("c", ("example.com/v1", "greetings"), ("v1", "configmaps")),
        ],
        (),
        [
            {
                "apiGroups": ["metacontroller.k8s.io"],
                "resources": ["controllerrevisions"],
                "verbs": ALL_CHILD,
            },
            BASE[0],
            {"apiGroups": [""], "resources": ["configmaps", "pods"], "verbs": ALL_CHILD},
            BASE[1],
            *GREETINGS_PARENT,
        ],
        id="a rolling child type: ControllerRevisions watched, written and adopted",
    ),
]


@pytest.mark.parametrize(("objects", "related", "expected"), CASES)
def test_rules(objects: list[Any], related: tuple[str, ...], expected: list[Any]) -> None:
    assert rules_for(*objects, related=related) == expected


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
            "ConfigMap x: kind: not a metacontroller.k8s.io/v1alpha1",
        ),
        (
            {**decorator("d", [("v1", "pods")]), "kind": "OtherController"},
            "OtherController d: kind: not a metacontroller.k8s.io/v1alpha1 CompositeController "
            "or DecoratorController",
        ),
        (
            {**composite("c", ("v1", "pods")), "spec": {"hooks": {}}},
            "CompositeController c: spec.parentResource: required",
        ),
        (
            composite("c", ("v1", "pods"), ("a/b/c", "things")),
            "CompositeController c: not an apiVersion: 'a/b/c'",
        ),
        (decorator("d", []), "DecoratorController d: spec.resources: required"),
        (
            {**decorator("d", [("v1", "pods")]), "metadata": {}},
            "DecoratorController (unnamed): metadata.name",
        ),
    ],
)
def test_unusable_controllers_are_named_with_the_field(obj: Any, message: str) -> None:
    with pytest.raises(RbacError) as err:
        controller_resources(obj, by_api_version)
    assert message in str(err.value)


def test_customize_hooks_are_flagged() -> None:
    hook = {"webhook": {"url": "http://h/customize"}}
    assert controller_resources(
        composite("c", ("v1", "pods"), customize=hook), by_api_version
    ).customize
    assert not controller_resources(composite("c", ("v1", "pods")), by_api_version).customize


@pytest.mark.parametrize(
    ("method", "expected"),
    [("RollingRecreate", True), ("RollingInPlace", True), ("InPlace", False), ("Recreate", False)],
)
def test_rolling_child_types_are_flagged(method: str, expected: bool) -> None:
    obj = rolling(composite("c", ("v1", "pods"), ("v1", "configmaps")), method)
    found = controller_resources(obj, by_api_version)
    revisions = GroupResource("metacontroller.k8s.io", "controllerrevisions")
    assert (found.grants == ((revisions, CHILD_VERBS),)) is expected
    granted = {r for rule in cluster_role_rules([found]) for r in rule.resources}
    assert ("controllerrevisions" in granted) is expected


SERVED = [
    Resource("", "v1", "pods", "Pod", True, short_names=("po",)),
    Resource("example.com", "v1", "greetings", "Greeting", True, short_names=("gr",)),
]


@pytest.mark.parametrize(
    ("api_version", "resource", "expected"),
    [
        ("v1", "pods", GroupResource("", "pods")),
        ("v1", "po", GroupResource("", "pods")),
        ("example.com/v1", "gr", GroupResource("example.com", "greetings")),
        ("example.com/v2", "greetings", "the cluster does not serve example.com/v2"),
        ("v1", "pod", "v1 has no resource 'pod' (it serves: pods)"),
    ],
)
def test_discovery_resolves_short_names_and_refuses_unknown_resources(
    api_version: str, resource: str, expected: GroupResource | str
) -> None:
    resolve = by_discovery(SERVED)
    if isinstance(expected, GroupResource):
        assert resolve(api_version, resource) == expected
    else:
        with pytest.raises(RbacError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            resolve(api_version, resource)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("configmaps", GroupResource("", "configmaps")),
        ("deployments.apps", GroupResource("apps", "deployments")),
        ("widgets.example.co.uk", GroupResource("example.co.uk", "widgets")),
        ("Deployments", None),
        ("", None),
        (".apps", None),
    ],
)
def test_group_resource_parses_kubectl_notation(text: str, expected: GroupResource | None) -> None:
    if expected is None:
        with pytest.raises(RbacError):
            GroupResource.parse(text)
    else:
        assert GroupResource.parse(text) == expected
        assert str(expected) == text


_names = st.sampled_from(["pods", "configmaps", "things", "widgets"])
_groups = st.sampled_from(["", "apps", "example.com", "metacontroller.k8s.io"])
_resources = st.builds(GroupResource, _groups, _names)


@given(
    controllers=st.lists(
        st.builds(
            ControllerResources,
            kind=st.just("SomeController"),
            name=st.just("x"),
            parents=st.lists(_resources, min_size=1, max_size=2).map(tuple),
            children=st.lists(_resources, max_size=3).map(tuple),
            customize=st.booleans(),
            parent_verbs=st.sampled_from([PARENT_VERBS, DECORATOR_PARENT_VERBS]),
            grants=st.lists(st.tuples(_resources, st.just(CHILD_VERBS)), max_size=2).map(tuple),
        ),
        max_size=4,
    ),
    related=st.lists(_resources, max_size=3),
)
def test_rules_grant_exactly_the_union_of_what_each_use_needs(
    controllers: list[ControllerResources], related: list[GroupResource]
) -> None:
    granted = {
        (group, resource, verb)
        for rule in cluster_role_rules(controllers, related=related)
        for group in rule.api_groups
        for resource in rule.resources
        for verb in rule.verbs
    }
    needed: set[tuple[str, str, str]] = {
        ("metacontroller.k8s.io", "compositecontrollers", "list"),
        ("metacontroller.k8s.io", "compositecontrollers", "watch"),
        ("metacontroller.k8s.io", "decoratorcontrollers", "list"),
        ("metacontroller.k8s.io", "decoratorcontrollers", "watch"),
        ("", "events", "create"),
        ("", "events", "patch"),
    }
    for controller in controllers:
        for parent in controller.parents:
            needed |= {(parent.group, parent.resource, v) for v in controller.parent_verbs}
            needed |= {
                (parent.group, f"{parent.resource}/{s}", "update") for s in ("status", "finalizers")
            }
        needed |= {(c.group, c.resource, v) for c in controller.children for v in CHILD_VERBS}
        needed |= {(r.group, r.resource, v) for r, verbs in controller.grants for v in verbs}
    needed |= {(r.group, r.resource, v) for r in related for v in ("list", "watch")}
    assert granted == needed
    # one rule per (group, verb set): no group/verb-set pair repeats
    rules = cluster_role_rules(controllers, related=related)
    keys = [(rule.api_groups, rule.verbs) for rule in rules]
    assert len(keys) == len(set(keys))


# --- the command, on files ------------------------------------------------------------------


def write(tmp_path: Path, name: str, *documents: Any) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return path


def run(*argv: str) -> tuple[int, Any]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, list(yaml.safe_load_all(out.getvalue())) if code == 0 else out.getvalue()


def test_values_output_is_the_charts_rules_value(tmp_path: Path) -> None:
    write(
        tmp_path, "a/cc.yaml", composite("c", ("example.com/v1", "greetings"), ("v1", "configmaps"))
    )
    write(
        tmp_path,
        "b/list.yml",
        {"apiVersion": "v1", "kind": "List", "items": [decorator("d", [("v1", "pods")])]},
    )
    write(
        tmp_path,
        "b/other.yaml",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
    )
    code, documents = run(str(tmp_path), "--output", "values")
    assert code == 0
    (values,) = documents
    expected = rules_for(
        composite("c", ("example.com/v1", "greetings"), ("v1", "configmaps")),
        decorator("d", [("v1", "pods")]),
    )
    assert values == {"rbac": {"clusterRole": {"rules": expected}}}


def test_manifests_output_is_a_cluster_role_and_the_lease_role(tmp_path: Path) -> None:
    path = write(tmp_path, "cc.yaml", composite("c", ("v1", "pods")))
    code, documents = run(str(path), "--name", "ops", "--namespace", "infra")
    assert code == 0
    cluster_role, role = documents
    assert cluster_role["kind"] == "ClusterRole" and cluster_role["metadata"] == {"name": "ops"}
    assert cluster_role["rules"] == rules_for(composite("c", ("v1", "pods")))
    assert role["kind"] == "Role"
    assert role["metadata"] == {"name": "ops-leader-election", "namespace": "infra"}
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        }
    ]


def test_customize_hooks_need_related_or_no_related(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hook = {"webhook": {"url": "http://h/customize"}}
    path = write(tmp_path, "cc.yaml", composite("c", ("v1", "pods"), customize=hook))
    with pytest.raises(SystemExit) as err:  # a usage error: the flags must say
        run(str(path))
    assert err.value.code == 2
    assert "CompositeController c" in capsys.readouterr().err
    assert run(str(path), "--no-related")[0] == 0
    code, (cluster_role, _) = run(str(path), "--related", "secrets")
    assert code == 0
    assert {
        "apiGroups": [""],
        "resources": ["secrets"],
        "verbs": ["list", "watch"],
    } in cluster_role["rules"]


def test_files_without_controllers_are_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "cm.yaml", {"apiVersion": "v1", "kind": "ConfigMap"})
    assert run(str(path))[0] == 2  # the files given cannot be used
    error = capsys.readouterr().err
    assert error.startswith("metashard rbac: error: no CompositeController or DecoratorController")


def test_bad_related_and_conflicting_sources_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as err:
        main(["x.yaml", "--related", "Pods"])
    assert err.value.code == 2
    with pytest.raises(SystemExit) as err:
        main([str(tmp_path), "--kubeconfig", "k"])
    assert err.value.code == 2


def test_secrets_and_configmaps_named_by_webhooks_are_granted_get_by_name() -> None:
    tls = {
        "url": "https://h/sync",
        "caBundle": {"configMapRef": {"name": "hook-ca", "namespace": "hooks"}},
        "authorization": {"secretRef": {"name": "hook-token", "namespace": "hooks", "key": "t"}},
    }
    obj = composite("c", ("example.com/v1", "greetings"), ("v1", "configmaps"))
    obj["spec"]["hooks"]["sync"]["webhook"] = tls
    obj["spec"]["endpointConfigs"] = [
        {"host": "other", "clientTLS": {"secretRef": {"name": "client", "namespace": "hooks"}}}
    ]
    rules = rules_for(obj)
    assert {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["get"],
        "resourceNames": ["hook-ca"],
    } in rules
    assert {
        "apiGroups": [""],
        "resources": ["secrets"],
        "verbs": ["get"],
        "resourceNames": ["hook-token"],
    } in rules
    # The endpoint config applies to no webhook (this one sets its own credentials): its
    # Secret is not read, so not granted. Nothing else about Secrets, never a list or watch.
    assert all("secrets" not in r["resources"] or r.get("resourceNames") for r in rules)
