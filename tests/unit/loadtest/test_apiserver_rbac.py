"""The pure RBAC authorizer: rule matching tables, binding resolution and aggregation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtest.apiserver.attributes import Attributes, UserInfo
from loadtest.apiserver.rbac import aggregated_rules, authorize, rule_allows, rules_for

SA = UserInfo(
    "system:serviceaccount:ns:app",
    ("system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"),
)
ADMIN = UserInfo("admin", ("system:masters",))


@dataclass
class Policy:
    """An in-memory ``PolicySource``."""

    cluster_roles: dict[str, dict[str, Any]] = field(default_factory=dict)
    roles: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    crbs: list[dict[str, Any]] = field(default_factory=list)
    rbs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def cluster_role_bindings(self) -> Iterable[Mapping[str, Any]]:
        return self.crbs

    def role_bindings(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return self.rbs.get(namespace, [])

    def cluster_role(self, name: str) -> Mapping[str, Any] | None:
        return self.cluster_roles.get(name)

    def role(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.roles.get((namespace, name))


def res(
    verb: str,
    resource: str,
    *,
    group: str = "",
    namespace: str = "ns",
    name: str = "",
    sub: str = "",
    user: UserInfo = SA,
) -> Attributes:
    return Attributes(
        user=user,
        verb=verb,
        resource_request=True,
        api_group=group,
        resource=resource,
        subresource=sub,
        namespace=namespace,
        name=name,
    )


def url(verb: str, path: str) -> Attributes:
    return Attributes(user=SA, verb=verb, resource_request=False, path=path)


PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}


@pytest.mark.parametrize(
    ("rule", "attrs", "allowed"),
    [
        (PODS, res("get", "pods"), True),
        (PODS, res("watch", "pods"), False),
        (PODS, res("get", "pods", group="apps"), False),
        (PODS, res("get", "pods", sub="status"), False),
        ({**PODS, "resources": ["pods/status"]}, res("get", "pods", sub="status"), True),
        ({**PODS, "resources": ["*/status"]}, res("get", "deployments", sub="status"), True),
        ({**PODS, "resources": ["*/status"]}, res("get", "deployments"), False),
        ({**PODS, "resources": ["*"]}, res("get", "pods", sub="log"), True),
        ({**PODS, "verbs": ["*"]}, res("deletecollection", "pods"), True),
        ({**PODS, "apiGroups": ["*"]}, res("get", "pods", group="x.io"), True),
        ({**PODS, "resourceNames": ["a"]}, res("get", "pods", name="a"), True),
        ({**PODS, "resourceNames": ["a"]}, res("get", "pods", name="b"), False),
        ({**PODS, "resourceNames": ["a"]}, res("list", "pods"), False),
        (PODS, url("get", "/api"), False),
        ({"verbs": ["get"], "nonResourceURLs": ["/api"]}, url("get", "/api"), True),
        ({"verbs": ["get"], "nonResourceURLs": ["/api"]}, url("get", "/api/v1"), False),
        ({"verbs": ["get"], "nonResourceURLs": ["/api/*"]}, url("get", "/api/v1"), True),
        ({"verbs": ["get"], "nonResourceURLs": ["*"]}, url("get", "/metrics"), True),
        ({"verbs": ["get"], "nonResourceURLs": ["*"]}, url("post", "/metrics"), False),
        ({"verbs": ["get"], "nonResourceURLs": ["/api"]}, res("get", "api"), False),
    ],
)
def test_rule_allows(rule: dict[str, Any], attrs: Attributes, allowed: bool) -> None:
    assert rule_allows(attrs, rule) is allowed


def _binding(
    kind: str, ref_kind: str, ref: str, subject: dict[str, str], **meta: str
) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {"name": f"{ref}-binding", **meta},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": ref_kind, "name": ref},
        "subjects": [subject],
    }


SA_SUBJECT = {"kind": "ServiceAccount", "name": "app", "namespace": "ns"}


def test_role_binding_reason_and_namespace_scope() -> None:
    policy = Policy(
        roles={("ns", "r"): {"rules": [PODS]}},
        rbs={
            "ns": [_binding("RoleBinding", "Role", "r", {"kind": "ServiceAccount", "name": "app"})]
        },
    )
    decision = authorize(policy, res("get", "pods"))
    assert decision.allowed
    assert decision.reason == (
        'RBAC: allowed by RoleBinding "r-binding/ns" of Role "r" to ServiceAccount "app/ns"'
    )
    assert not authorize(policy, res("get", "pods", namespace="other")).allowed
    assert not authorize(policy, res("get", "pods", namespace="")).allowed


def test_role_binding_to_a_cluster_role_grants_inside_its_namespace_only() -> None:
    policy = Policy(
        cluster_roles={"c": {"rules": [PODS]}},
        rbs={"ns": [_binding("RoleBinding", "ClusterRole", "c", SA_SUBJECT)]},
    )
    assert authorize(policy, res("list", "pods")).allowed
    assert not authorize(policy, res("list", "pods", namespace="")).allowed
    assert not authorize(policy, res("list", "pods", namespace="default")).allowed


def test_cluster_role_binding_by_group_applies_everywhere() -> None:
    policy = Policy(
        cluster_roles={"c": {"rules": [PODS]}},
        crbs=[
            _binding(
                "ClusterRoleBinding",
                "ClusterRole",
                "c",
                {"kind": "Group", "name": "system:serviceaccounts"},
            )
        ],
    )
    decision = authorize(policy, res("list", "pods", namespace=""))
    assert decision.reason == (
        'RBAC: allowed by ClusterRoleBinding "c-binding" of ClusterRole "c" to Group '
        '"system:serviceaccounts"'
    )
    assert authorize(policy, res("get", "pods", namespace="any")).allowed


def test_subjects_bindings_to_missing_roles_and_masters() -> None:
    other_user = {"kind": "User", "name": "someone"}
    policy = Policy(
        cluster_roles={"c": {"rules": [PODS]}},
        crbs=[
            _binding("ClusterRoleBinding", "ClusterRole", "c", other_user),
            _binding("ClusterRoleBinding", "ClusterRole", "missing", SA_SUBJECT),
            _binding("ClusterRoleBinding", "Role", "c", SA_SUBJECT),
        ],
    )
    assert not authorize(policy, res("get", "pods")).allowed
    someone = UserInfo("someone")
    assert authorize(policy, res("get", "pods", user=someone)).allowed
    admin = authorize(Policy(), res("delete", "anything", user=ADMIN))
    assert admin.allowed and admin.reason == ""


def test_service_account_subject_in_another_namespace_does_not_apply() -> None:
    policy = Policy(
        cluster_roles={"c": {"rules": [PODS]}},
        rbs={"ns": [_binding("RoleBinding", "ClusterRole", "c", {**SA_SUBJECT, "namespace": "x"})]},
    )
    assert not authorize(policy, res("get", "pods")).allowed


names = st.sampled_from(["", "a", "b"])
verbs = st.sampled_from(["get", "list", "watch", "create", "update", "patch", "delete"])
groups = st.sampled_from(["", "apps", "x.io"])
resources = st.sampled_from(["pods", "deployments", "configmaps"])
subresources = st.sampled_from(["", "status"])


def _list(values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.one_of(values, st.just("*")), min_size=1, max_size=3, unique=True)


resource_rules = st.fixed_dictionaries(
    {
        "verbs": _list(verbs),
        "apiGroups": _list(groups),
        "resources": _list(st.sampled_from(["pods", "deployments", "pods/status", "*/status"])),
    },
    optional={"resourceNames": st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2)},
)
requests = st.builds(
    lambda verb, group, resource, sub, name, ns: res(
        verb, resource, group=group, sub=sub, name=name, namespace=ns
    ),
    verbs,
    groups,
    resources,
    subresources,
    names,
    st.sampled_from(["ns", "", "other"]),
)


@given(st.lists(resource_rules, max_size=5), requests, st.integers(0, 4))
def test_a_rule_set_grants_a_request_iff_one_rule_allows_it(
    rules: list[dict[str, Any]], attrs: Attributes, split: int
) -> None:
    """However the rules are spread over cluster-wide roles, the decision is the rules' union."""
    first, second = rules[:split], rules[split:]
    policy = Policy(
        cluster_roles={"one": {"rules": first}, "two": {"rules": second}},
        crbs=[
            _binding("ClusterRoleBinding", "ClusterRole", "one", SA_SUBJECT),
            _binding(
                "ClusterRoleBinding",
                "ClusterRole",
                "two",
                {"kind": "Group", "name": "system:authenticated"},
            ),
        ],
    )
    expected = any(rule_allows(attrs, rule) for rule in rules)
    assert authorize(policy, attrs).allowed is expected
    assert rules_for(policy, SA, attrs.namespace) == [*first, *second]


@given(st.lists(resource_rules, max_size=4), requests)
def test_a_role_binding_grants_only_in_its_namespace(
    rules: list[dict[str, Any]], attrs: Attributes
) -> None:
    policy = Policy(
        roles={("ns", "r"): {"rules": rules}},
        rbs={"ns": [_binding("RoleBinding", "Role", "r", SA_SUBJECT)]},
    )
    expected = attrs.namespace == "ns" and any(rule_allows(attrs, rule) for rule in rules)
    assert authorize(policy, attrs).allowed is expected


# --- aggregation -------------------------------------------------------------------------------

labels = st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"]), max_size=2)


def _cluster_role(
    name: str, role_labels: dict[str, str], rules: list[dict[str, Any]]
) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": role_labels}, "rules": rules}


@given(
    st.lists(st.tuples(labels, st.lists(resource_rules, max_size=3)), max_size=5),
    st.lists(labels, min_size=1, max_size=2),
)
def test_aggregation_is_the_union_of_the_selected_roles(
    others: list[tuple[dict[str, str], list[dict[str, Any]]]],
    selectors: list[dict[str, str]],
) -> None:
    roles = [_cluster_role(f"r{i}", lab, rules) for i, (lab, rules) in enumerate(others)]
    aggregate = {
        "metadata": {"name": "agg", "labels": selectors[0]},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": s} for s in selectors]},
        "rules": [{"verbs": ["hand-edited"]}],
    }
    result = aggregated_rules(aggregate, [*roles, aggregate])
    assert result is not None
    selected = [
        r
        for r in roles
        if any(all(r["metadata"]["labels"].get(k) == v for k, v in s.items()) for s in selectors)
    ]
    wanted = [rule for r in selected for rule in r["rules"]]
    assert all(rule in result for rule in wanted)
    assert all(rule in wanted for rule in result)
    assert len(result) == len({repr(sorted(r.items())) for r in result})
    assert {"verbs": ["hand-edited"]} not in result


def test_aggregation_table() -> None:
    deploy = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}
    pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
    selector = {"clusterRoleSelectors": [{"matchLabels": {"agg": "true"}}]}
    agg = {"metadata": {"name": "agg"}, "aggregationRule": selector, "rules": None}
    roles = [
        _cluster_role("z", {"agg": "true"}, [pods, deploy]),
        _cluster_role("a", {"agg": "true"}, [deploy]),
        _cluster_role("m", {"agg": "false"}, [{"verbs": ["*"]}]),
        agg,
    ]
    assert aggregated_rules(agg, roles) == [deploy, pods]
    assert aggregated_rules(roles[0], roles) is None
    expressions = {
        "clusterRoleSelectors": [{"matchExpressions": [{"key": "agg", "operator": "Exists"}]}]
    }
    assert aggregated_rules({**agg, "aggregationRule": expressions}, roles) == [
        deploy,
        {"verbs": ["*"]},
        pods,
    ]
