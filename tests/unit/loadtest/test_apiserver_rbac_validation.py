"""Validation of Roles and bindings: the messages kube-apiserver gives."""

from __future__ import annotations

from typing import Any

import pytest

from loadtest.apiserver.rbac_validation import (
    default_binding,
    validate_cluster_role,
    validate_cluster_role_binding,
    validate_role,
    validate_role_binding,
)

REF = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"}
SA = {"kind": "ServiceAccount", "name": "app", "namespace": "ns"}


def _messages(errors: list[Any]) -> list[str]:
    return [str(e) for e in errors]


@pytest.mark.parametrize(
    ("rule", "namespaced", "messages"),
    [
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, True, []),
        (
            {"apiGroups": [""], "resources": ["pods"]},
            True,
            ["rules[0].verbs: Required value: verbs must contain at least one value"],
        ),
        (
            {"resources": ["pods"], "verbs": ["get"]},
            False,
            [
                "rules[0].apiGroups: Required value: resource rules must supply at least one "
                "api group"
            ],
        ),
        ({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, False, []),
        (
            {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
            True,
            [
                'rules[0].nonResourceURLs: Invalid value: ["/metrics"]: namespaced rules cannot '
                "apply to non-resource URLs"
            ],
        ),
        (
            {"nonResourceURLs": ["/m"], "resources": ["pods"], "verbs": ["get"]},
            False,
            [
                'rules[0].nonResourceURLs: Invalid value: ["/m"]: rules cannot apply to both '
                "regular resources and non-resource URLs"
            ],
        ),
    ],
)
def test_role_rules(rule: dict[str, Any], namespaced: bool, messages: list[str]) -> None:
    validate = validate_role if namespaced else validate_cluster_role
    assert _messages(validate({"rules": [rule]}, None)) == messages


def test_bindings() -> None:
    assert validate_role_binding({"roleRef": REF, "subjects": [SA]}, None) == []
    crb = {"roleRef": {**REF, "kind": "Role"}, "subjects": [{**SA, "namespace": ""}]}
    assert _messages(validate_cluster_role_binding(crb, None)) == [
        'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"',
        "subjects[0].namespace: Required value",
    ]
    no_group = {"roleRef": {**REF, "apiGroup": ""}, "subjects": [{"kind": "Robot", "name": "x"}]}
    assert _messages(validate_role_binding(no_group, None)) == [
        'roleRef.apiGroup: Unsupported value: "": supported values: "rbac.authorization.k8s.io"',
        'subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", '
        '"User", "Group"',
    ]
    changed = validate_role_binding({"roleRef": {**REF, "name": "other"}}, {"roleRef": REF})
    assert [e.field for e in changed] == ["roleRef"]


def test_user_and_group_subjects_default_their_api_group() -> None:
    binding = {"subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}]}
    default_binding(binding, None)
    assert binding["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"
    assert "apiGroup" not in binding["subjects"][1]
    assert validate_role_binding({"roleRef": REF, **binding}, None) == []
