"""The RBAC authorizer of kube-apiserver, as pure functions over plain role and binding dicts.

Contract (``plugin/pkg/auth/authorizer/rbac`` and ``pkg/apis/rbac/v1/evaluation_helpers``):

- A rule allows a resource request when its ``verbs``, ``apiGroups``, ``resources`` and
  ``resourceNames`` all match: ``*`` matches any verb, group or resource; a resource is
  matched as ``<resource>/<subresource>`` (``pods/status``), and ``*/<subresource>`` matches
  that subresource of any resource; empty ``resourceNames`` match any name (also none, e.g.
  ``list`` or ``create``), otherwise the request's name must be listed. A non-resource rule
  matches the verb and a ``nonResourceURLs`` entry: equal, ``*``, or a prefix ending in ``*``.
- A request is allowed when any rule of any role bound to the user allows it: first every
  ClusterRoleBinding (its ClusterRole applies everywhere), then, for a namespaced request,
  the RoleBindings of that namespace (to a Role of that namespace, or to a ClusterRole whose
  rules then apply in that namespace only). RBAC never denies: no match means "no opinion",
  answered as 403 by the caller.
- Members of ``system:masters`` are allowed everything without consulting RBAC (the real
  server's privileged-group authorizer runs first), so their decision has no reason.
- A subject applies to a user by name (User), by group membership (Group), or as
  ``system:serviceaccount:<ns>:<name>`` (ServiceAccount, namespace defaulting to the
  binding's).
- An allowed decision carries the real reason text: ``RBAC: allowed by RoleBinding
  "<name>/<ns>" of Role "<role>" to ServiceAccount "<sa>/<ns>"``.
- A binding to a missing role grants nothing (the real server logs a resolution error).
- ``aggregated_rules`` is the clusterrole-aggregation controller: for each label selector
  of the aggregation rule in turn, the rules of every other ClusterRole it selects (in name
  order), each rule once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from loadtest.apiserver.attributes import MASTERS, Attributes, UserInfo
from proto.api import selectors

ALL = "*"
Rule = Mapping[str, Any]
"""A ``rbacv1.PolicyRule`` as stored: verbs, apiGroups, resources, resourceNames,
nonResourceURLs (each an optional list of strings)."""


class PolicySource(Protocol):
    """Where the authorizer reads roles and bindings (the server's informer caches)."""

    def cluster_role_bindings(self) -> Iterable[Mapping[str, Any]]: ...

    def role_bindings(self, namespace: str) -> Iterable[Mapping[str, Any]]: ...

    def cluster_role(self, name: str) -> Mapping[str, Any] | None: ...

    def role(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


def strings(rule: Rule, key: str) -> list[str]:
    """A rule's list field (``verbs``, ``resources``...), its non-strings dropped."""
    value = rule.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


# --- one rule ----------------------------------------------------------------------------------


def verb_matches(rule: Rule, verb: str) -> bool:
    verbs = strings(rule, "verbs")
    return ALL in verbs or verb in verbs


def group_matches(rule: Rule, group: str) -> bool:
    groups = strings(rule, "apiGroups")
    return ALL in groups or group in groups


def resource_matches(rule: Rule, resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for allowed in strings(rule, "resources"):
        if allowed in (ALL, combined):
            return True
        if subresource and allowed == f"*/{subresource}":
            return True
    return False


def name_matches(rule: Rule, name: str) -> bool:
    names = strings(rule, "resourceNames")
    return not names or name in names


def url_matches(rule: Rule, path: str) -> bool:
    for allowed in strings(rule, "nonResourceURLs"):
        if allowed in (ALL, path):
            return True
        if allowed.endswith("*") and path.startswith(allowed.rstrip("*")):
            return True
    return False


def rule_allows(attrs: Attributes, rule: Rule) -> bool:
    """Whether one PolicyRule allows the request (``rbac.RuleAllows``)."""
    if not verb_matches(rule, attrs.verb):
        return False
    if not attrs.resource_request:
        return url_matches(rule, attrs.path)
    return (
        group_matches(rule, attrs.api_group)
        and resource_matches(rule, attrs.resource, attrs.subresource)
        and name_matches(rule, attrs.name)
    )


# --- bindings ----------------------------------------------------------------------------------


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def _applies(user: UserInfo, subject: Mapping[str, Any], namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        account_ns = subject.get("namespace") or namespace
        return bool(account_ns) and user.name == service_account_user(account_ns, str(name))
    return False


def _describe_subject(subject: Mapping[str, Any], namespace: str) -> str:
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or namespace}"'
    return f'{kind} "{name}"'


def role_rules(source: PolicySource, ref: Mapping[str, Any], namespace: str) -> list[Rule] | None:
    """The rules a binding's ``roleRef`` grants (None when the role does not exist)."""
    name = str(ref.get("name", ""))
    if ref.get("kind") == "ClusterRole":
        role = source.cluster_role(name)
    elif ref.get("kind") == "Role" and namespace:
        role = source.role(namespace, name)
    else:
        role = None
    if role is None:
        return None
    rules = role.get("rules")
    return [r for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []


@dataclass(frozen=True, slots=True)
class Grant:
    """Rules one binding grants to a user, with the real server's description of it."""

    rules: list[Rule]
    description: str


def grants(source: PolicySource, user: UserInfo, namespace: str) -> Iterator[Grant]:
    """Every binding that applies to ``user`` in ``namespace`` (cluster ones first)."""
    for binding in source.cluster_role_bindings():
        subject = _first_subject(binding, user, "")
        ref = binding.get("roleRef") or {}
        if subject is None or ref.get("kind") != "ClusterRole":
            continue
        rules = role_rules(source, ref, "")
        if rules is not None:
            name = binding.get("metadata", {}).get("name", "")
            yield Grant(
                rules,
                f'ClusterRoleBinding "{name}" of ClusterRole "{ref.get("name", "")}" to '
                + _describe_subject(subject, ""),
            )
    if not namespace:
        return
    for binding in source.role_bindings(namespace):
        subject = _first_subject(binding, user, namespace)
        if subject is None:
            continue
        ref = binding.get("roleRef") or {}
        rules = role_rules(source, ref, namespace)
        if rules is not None:
            name = binding.get("metadata", {}).get("name", "")
            yield Grant(
                rules,
                f'RoleBinding "{name}/{namespace}" of {ref.get("kind", "")} '
                f'"{ref.get("name", "")}" to ' + _describe_subject(subject, namespace),
            )


def _first_subject(
    binding: Mapping[str, Any], user: UserInfo, namespace: str
) -> Mapping[str, Any] | None:
    for subject in binding.get("subjects") or []:
        if isinstance(subject, Mapping) and _applies(user, subject, namespace):
            return subject
    return None


def authorize(source: PolicySource, attrs: Attributes) -> Decision:
    """The decision of the privileged-group and RBAC authorizers for one request."""
    if MASTERS in attrs.user.groups:
        return Decision(True)
    for grant in grants(source, attrs.user, attrs.namespace):
        if any(rule_allows(attrs, rule) for rule in grant.rules):
            return Decision(True, f"RBAC: allowed by {grant.description}")
    return Decision(False)


def rules_for(source: PolicySource, user: UserInfo, namespace: str) -> list[Rule]:
    """Every rule granted to ``user`` in ``namespace`` (``RulesFor``), in binding order."""
    return [rule for grant in grants(source, user, namespace) for rule in grant.rules]


# --- aggregation -------------------------------------------------------------------------------


def aggregated_rules(
    role: Mapping[str, Any], cluster_roles: Iterable[Mapping[str, Any]]
) -> list[Rule] | None:
    """The rules the aggregation controller writes into ``role`` (None: no aggregationRule).

    Selectors that cannot be parsed select nothing, as ``LabelSelectorAsSelector`` errors do.
    """
    rule = role.get("aggregationRule")
    if not isinstance(rule, Mapping):
        return None
    own = role.get("metadata", {}).get("name")
    roles = sorted(cluster_roles, key=lambda other: str(other.get("metadata", {}).get("name", "")))
    union: list[Rule] = []
    for struct in rule.get("clusterRoleSelectors") or []:
        try:
            selector = selectors.from_label_selector(struct)
        except selectors.SelectorError:
            continue
        for other in roles:
            meta = other.get("metadata", {})
            if meta.get("name") == own or not selector.matches(meta.get("labels") or {}):
                continue
            for policy in other.get("rules") or []:
                if isinstance(policy, Mapping) and policy not in union:
                    union.append(policy)
    return union
