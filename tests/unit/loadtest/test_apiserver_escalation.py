"""Escalation prevention: coverage of atomic rules and the refusal message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtest.apiserver.attributes import Attributes, UserInfo
from loadtest.apiserver.escalation import (
    breakdown,
    compact_string,
    covers,
    escalation_message,
    missing,
)
from loadtest.apiserver.rbac import rule_allows

SA = UserInfo(
    "system:serviceaccount:conf-rbac:reader",
    ("system:serviceaccounts", "system:serviceaccounts:conf-rbac", "system:authenticated"),
)


def test_the_transcripts_message() -> None:
    owned = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    requested = [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["delete"]},
    ]
    absent = missing(owned, requested)
    assert escalation_message(SA, absent) == (
        'user "system:serviceaccount:conf-rbac:reader" (groups=["system:serviceaccounts" '
        '"system:serviceaccounts:conf-rbac" "system:authenticated"]) is attempting to grant '
        "RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["delete"]}'
    )


def test_missing_verbs_of_one_resource_are_compacted_into_one_line() -> None:
    absent = missing(
        [], [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]}]
    )
    message = escalation_message(UserInfo("u"), absent)
    assert message.endswith(
        '\n{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}'
    )


@pytest.mark.parametrize(
    ("owner", "wanted", "covered"),
    [
        (
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"apiGroups": ["x"], "resources": ["y"], "verbs": ["z"]},
            True,
        ),
        (
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]},
            False,
        ),
        (
            {"apiGroups": [""], "resources": ["*/status"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]},
            True,
        ),
        (
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]},
            False,
        ),
        (
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            False,
        ),
        (
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]},
            True,
        ),
        (
            {"verbs": ["get"], "nonResourceURLs": ["/api/*"]},
            {"verbs": ["get"], "nonResourceURLs": ["/api/v1"]},
            True,
        ),
        (
            {"verbs": ["get"], "nonResourceURLs": ["/api"]},
            {"verbs": ["get"], "nonResourceURLs": ["/apis"]},
            False,
        ),
    ],
)
def test_covers(owner: dict[str, Any], wanted: dict[str, Any], covered: bool) -> None:
    assert all(covers(owner, atomic) is covered for atomic in breakdown(wanted))


def test_breakdown_and_compact_string() -> None:
    rule = {
        "apiGroups": ["", "apps"],
        "resources": ["x"],
        "verbs": ["get", "list"],
        "resourceNames": ["n"],
    }
    parts = breakdown(rule)
    assert len(parts) == 4
    assert (
        compact_string(parts[0])
        == '{APIGroups:[""], Resources:["x"], ResourceNames:["n"], Verbs:["get"]}'
    )
    assert breakdown({"verbs": ["get"], "nonResourceURLs": ["/a", "/b"]}) == [
        {"nonResourceURLs": ["/a"], "verbs": ["get"]},
        {"nonResourceURLs": ["/b"], "verbs": ["get"]},
    ]


concrete = st.fixed_dictionaries(
    {
        "apiGroups": st.lists(st.sampled_from(["", "apps"]), min_size=1, max_size=2, unique=True),
        "resources": st.lists(
            st.sampled_from(["pods", "pods/status", "deployments"]),
            min_size=1,
            max_size=2,
            unique=True,
        ),
        "verbs": st.lists(
            st.sampled_from(["get", "list", "delete"]), min_size=1, max_size=2, unique=True
        ),
        "resourceNames": st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2, unique=True),
    }
)
owners = st.fixed_dictionaries(
    {
        "apiGroups": st.lists(st.sampled_from(["", "apps", "*"]), min_size=1, max_size=2),
        "resources": st.lists(
            st.sampled_from(["pods", "pods/status", "*/status", "deployments", "*"]),
            min_size=1,
            max_size=2,
        ),
        "verbs": st.lists(st.sampled_from(["get", "list", "delete", "*"]), min_size=1, max_size=2),
    },
    optional={"resourceNames": st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2)},
)


def _request(atomic: dict[str, list[str]]) -> Attributes:
    resource, _, sub = atomic["resources"][0].partition("/")
    return Attributes(
        user=SA,
        verb=atomic["verbs"][0],
        resource_request=True,
        api_group=atomic["apiGroups"][0],
        resource=resource,
        subresource=sub,
        namespace="ns",
        name=atomic["resourceNames"][0],
    )


@given(owners, concrete)
def test_an_owner_covers_a_concrete_rule_iff_it_allows_every_request_of_it(
    owner: dict[str, Any], wanted: dict[str, Any]
) -> None:
    for atomic in breakdown(wanted):
        assert covers(owner, atomic) is rule_allows(_request(atomic), owner)


@given(st.lists(owners, max_size=3), st.lists(concrete, max_size=3))
def test_nothing_is_missing_iff_every_request_is_allowed(
    owned: list[dict[str, Any]], requested: list[dict[str, Any]]
) -> None:
    every = all(
        any(rule_allows(_request(atomic), o) for o in owned)
        for rule in requested
        for atomic in breakdown(rule)
    )
    assert (not missing(owned, requested)) is every
