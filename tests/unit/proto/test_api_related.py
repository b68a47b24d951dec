"""Related-resource rule matching, v1 and v2, for namespaced and cluster-scoped parents."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.api.controllers import HookVersion
from proto.api.related import RelatedRule, matches, namespace_scope
from proto.api.selectors import Selector, parse

V1, V2 = HookVersion.V1, HookVersion.V2

BY_LABELS = RelatedRule("v1", "configmaps", label_selector=parse("app=web"))
EVERYTHING = RelatedRule("v1", "configmaps", label_selector=Selector.everything())
NO_CONDITION = RelatedRule("v1", "configmaps")
IN_GLOBAL = RelatedRule("v1", "configmaps", namespace="global")
IN_GLOBAL_NAMED = RelatedRule("v1", "configmaps", namespace="global", names=frozenset({"cfg"}))
NAMED = RelatedRule("v1", "configmaps", names=frozenset({"cfg"}))
ANYWHERE = RelatedRule("v1", "configmaps", namespace="*")
IN_GLOBAL_LABELLED = RelatedRule(
    "v1", "configmaps", namespace="global", label_selector=parse("app")
)
TEAM_A = RelatedRule("v1", "configmaps", namespace_selector=parse("team=a"))

WEB = {"app": "web"}
TEAM_A_LABELS = {"team": "a"}


def found(
    rule: RelatedRule,
    version: HookVersion,
    parent_ns: str,
    ns: str,
    name: str,
    labels: dict[str, str] | None,
) -> bool:
    return matches(
        rule, version=version, parent_namespace=parent_ns, namespace=ns, name=name, labels=labels
    )


# (rule, version, parent namespace, object namespace, object name, labels, expected)
MATRIX = [
    # label rules: own namespace for namespaced parents, everything for cluster-scoped ones
    (BY_LABELS, V1, "ns", "ns", "x", WEB, True),
    (BY_LABELS, V1, "ns", "ns", "x", {"app": "db"}, False),
    (BY_LABELS, V1, "ns", "other", "x", WEB, False),
    (BY_LABELS, V2, "ns", "other", "x", WEB, False),
    (BY_LABELS, V1, "", "other", "x", WEB, True),
    (BY_LABELS, V2, "", "other", "x", WEB, True),
    (EVERYTHING, V2, "ns", "ns", "x", None, True),
    (NO_CONDITION, V2, "ns", "ns", "x", None, True),
    # cluster-scoped objects: hidden from namespaced parents in v1 only
    (EVERYTHING, V1, "ns", "", "node-1", None, False),
    (EVERYTHING, V2, "ns", "", "node-1", None, True),
    (EVERYTHING, V1, "", "", "node-1", None, True),
    # namespace + names
    (IN_GLOBAL_NAMED, V1, "", "global", "cfg", None, True),
    (IN_GLOBAL_NAMED, V1, "", "global", "other", None, False),
    (IN_GLOBAL_NAMED, V1, "", "ns", "cfg", None, False),
    (IN_GLOBAL_NAMED, V2, "ns", "global", "cfg", None, True),
    (IN_GLOBAL_NAMED, V1, "ns", "global", "cfg", None, False),
    (IN_GLOBAL, V2, "ns", "global", "anything", None, True),
    (IN_GLOBAL, V2, "ns", "ns", "anything", None, False),
    (IN_GLOBAL, V2, "ns", "", "cluster-thing", None, False),
    (NAMED, V2, "ns", "ns", "cfg", None, True),
    (NAMED, V2, "ns", "other", "cfg", None, False),
    (NAMED, V2, "", "other", "cfg", None, True),
    # namespace + labels
    (IN_GLOBAL_LABELLED, V2, "ns", "global", "x", WEB, True),
    (IN_GLOBAL_LABELLED, V2, "ns", "global", "x", {}, False),
    # every namespace
    (ANYWHERE, V2, "ns", "far", "x", None, True),
    (ANYWHERE, V1, "ns", "far", "x", None, False),
    (ANYWHERE, V1, "ns", "ns", "x", None, True),
    (ANYWHERE, V1, "", "far", "x", None, True),
]


@pytest.mark.parametrize("case", MATRIX)
def test_matrix(case: tuple[Any, ...]) -> None:
    *arguments, expected = case
    assert found(*arguments) is expected


@pytest.mark.parametrize(
    ("version", "parent_ns", "ns", "namespace_labels", "expected"),
    [
        (V2, "ns", "a-ns", TEAM_A_LABELS, True),
        (V2, "ns", "b-ns", {"team": "b"}, False),
        (V2, "ns", "a-ns", None, False),  # namespace labels unknown
        (V2, "ns", "", TEAM_A_LABELS, False),  # cluster-scoped objects have no namespace
        (V1, "", "a-ns", TEAM_A_LABELS, True),
        (V1, "ns", "a-ns", TEAM_A_LABELS, False),
    ],
)
def test_namespace_selector(
    version: HookVersion,
    parent_ns: str,
    ns: str,
    namespace_labels: dict[str, str] | None,
    expected: bool,
) -> None:
    found = matches(
        TEAM_A,
        version=version,
        parent_namespace=parent_ns,
        namespace=ns,
        name="x",
        labels={},
        namespace_labels=namespace_labels,
    )
    assert found is expected


@pytest.mark.parametrize(
    ("rule", "version", "parent_ns", "scope"),
    [
        (BY_LABELS, V1, "ns", "ns"),
        (BY_LABELS, V2, "ns", "ns"),
        (BY_LABELS, V2, "", None),
        (IN_GLOBAL, V2, "ns", "global"),
        (IN_GLOBAL, V1, "", "global"),
        (IN_GLOBAL, V1, "ns", "ns"),
        (ANYWHERE, V2, "ns", None),
        (TEAM_A, V2, "ns", None),
    ],
)
def test_namespace_scope(
    rule: RelatedRule, version: HookVersion, parent_ns: str, scope: str | None
) -> None:
    assert namespace_scope(rule, version=version, parent_namespace=parent_ns) == scope


rules = st.builds(
    RelatedRule,
    api_version=st.just("v1"),
    resource=st.just("configmaps"),
    label_selector=st.sampled_from([None, Selector.everything(), parse("app=web")]),
    namespace=st.sampled_from([None, "*", "ns", "other"]),
    names=st.sampled_from([frozenset(), frozenset({"a"})]),
)
namespaces = st.sampled_from(["", "ns", "other", "third"])


@given(
    rule=rules,
    parent_ns=namespaces,
    ns=namespaces,
    name=st.sampled_from(["a", "b"]),
    labels=st.sampled_from([None, {}, WEB]),
)
def test_properties(
    rule: RelatedRule, parent_ns: str, ns: str, name: str, labels: dict[str, str] | None
) -> None:
    in_v1 = found(rule, V1, parent_ns, ns, name, labels)
    in_v2 = found(rule, V2, parent_ns, ns, name, labels)
    # v1 only ever narrows what v2 selects
    assert not in_v1 or in_v2
    # v1 never shows a namespaced parent anything outside its namespace
    if parent_ns and in_v1:
        assert ns == parent_ns
    # no namespaced match outside the announced scope
    for version, selected in ((V1, in_v1), (V2, in_v2)):
        scope = namespace_scope(rule, version=version, parent_namespace=parent_ns)
        if selected and ns and scope is not None:
            assert ns == scope
