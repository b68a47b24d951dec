"""The bootstrap ClusterRoles and ClusterRoleBindings an RBAC cluster starts with.

A subset of kube-apiserver's ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy``: the
super-user role and the default grants to every authenticated user, which decide what a
fresh ServiceAccount may do before anyone binds it to anything:

- ``cluster-admin`` (everything) to the group ``system:masters``;
- ``system:discovery`` (GET of ``/api``, ``/apis``, ``/openapi``, ``/version``, health) and
  ``system:basic-user`` (self subject access, rules and user reviews) to
  ``system:authenticated``;
- ``system:public-info-viewer`` (GET of ``/version`` and health) to
  ``system:authenticated`` and ``system:unauthenticated``;
- ``system:service-account-issuer-discovery`` (the OIDC discovery documents) to
  ``system:serviceaccounts``;
- ``system:openshift:public-info-viewer`` (GET of ``/.well-known``): the transcripts were
  recorded on an OpenShift build of kube-apiserver, whose policy adds this to what every
  user may do; it is kept so that SelfSubjectRulesReview answers match them.

The aggregated ``admin``/``edit``/``view`` roles and the controllers' roles are not created.
"""

from __future__ import annotations

from typing import Any

BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
_RBAC = "rbac.authorization.k8s.io"


def _role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS), "annotations": AUTOUPDATE},
        "rules": rules,
    }


def _binding(name: str, groups: list[str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS), "annotations": AUTOUPDATE},
        "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": _RBAC, "kind": "Group", "name": g} for g in groups],
    }


def _get(*urls: str) -> dict[str, Any]:
    return {"verbs": ["get"], "nonResourceURLs": list(urls)}


HEALTH_AND_VERSION = ("/healthz", "/livez", "/readyz", "/version", "/version/")


def cluster_roles() -> list[dict[str, Any]]:
    return [
        _role(
            "cluster-admin",
            [
                {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                {"verbs": ["*"], "nonResourceURLs": ["*"]},
            ],
        ),
        _role(
            "system:basic-user",
            [
                {
                    "verbs": ["create"],
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                },
                {
                    "verbs": ["create"],
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"],
                },
            ],
        ),
        _role(
            "system:discovery",
            [
                _get(
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                )
            ],
        ),
        _role("system:public-info-viewer", [_get(*HEALTH_AND_VERSION)]),
        _role(
            "system:service-account-issuer-discovery",
            [
                _get(
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                )
            ],
        ),
        _role("system:openshift:public-info-viewer", [_get("/.well-known", "/.well-known/*")]),
    ]


def cluster_role_bindings() -> list[dict[str, Any]]:
    everyone = ["system:authenticated", "system:unauthenticated"]
    return [
        _binding("cluster-admin", ["system:masters"]),
        _binding("system:basic-user", ["system:authenticated"]),
        _binding("system:discovery", ["system:authenticated"]),
        _binding("system:public-info-viewer", everyone),
        _binding("system:service-account-issuer-discovery", ["system:serviceaccounts"]),
        _binding("system:openshift:public-info-viewer", everyone),
    ]
