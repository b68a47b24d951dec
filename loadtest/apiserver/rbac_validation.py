"""Defaults and validation of the ``rbac.authorization.k8s.io/v1`` kinds, as kube-apiserver.

After ``pkg/apis/rbac/validation`` and ``pkg/apis/rbac/v1/defaults.go``:

- ``rules`` is not ``omitempty``: a role written without rules shows ``rules: null``.
- a rule needs verbs; a non-resource rule may not name groups, resources or names, and is
  refused in a (namespaced) Role; a resource rule needs at least one group and resource.
- a binding's ``roleRef`` must name a role of ``rbac.authorization.k8s.io`` (a Role or
  ClusterRole from a RoleBinding, a ClusterRole from a ClusterRoleBinding) and may not
  change; subjects are ServiceAccounts (no apiGroup; a namespace in a ClusterRoleBinding),
  Users or Groups (apiGroup ``rbac.authorization.k8s.io``, defaulted when empty).
"""

from __future__ import annotations

from typing import Any

from proto.api.validation import ErrorType, FieldError, is_dns1123_subdomain, is_path_segment_name

GROUP = "rbac.authorization.k8s.io"


def default_role(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    obj.setdefault("rules", None)


def default_binding(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    for subject in obj.get("subjects") or []:
        user_or_group = isinstance(subject, dict) and subject.get("kind") in ("User", "Group")
        if user_or_group and not subject.get("apiGroup"):
            subject["apiGroup"] = GROUP


def _rules(obj: dict[str, Any], *, namespaced: bool) -> list[FieldError]:
    errors = []
    for i, rule in enumerate(obj.get("rules") or []):
        where = f"rules[{i}]"
        if not isinstance(rule, dict):
            continue
        if not rule.get("verbs"):
            errors.append(
                FieldError(
                    ErrorType.REQUIRED, f"{where}.verbs", "verbs must contain at least one value"
                )
            )
        urls = rule.get("nonResourceURLs")
        if urls:
            if namespaced:
                errors.append(
                    FieldError(
                        ErrorType.INVALID,
                        f"{where}.nonResourceURLs",
                        "namespaced rules cannot apply to non-resource URLs",
                        urls,
                    )
                )
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                errors.append(
                    FieldError(
                        ErrorType.INVALID,
                        f"{where}.nonResourceURLs",
                        "rules cannot apply to both regular resources and non-resource URLs",
                        urls,
                    )
                )
            continue
        if not rule.get("apiGroups"):
            errors.append(
                FieldError(
                    ErrorType.REQUIRED,
                    f"{where}.apiGroups",
                    "resource rules must supply at least one api group",
                )
            )
        if not rule.get("resources"):
            errors.append(
                FieldError(
                    ErrorType.REQUIRED,
                    f"{where}.resources",
                    "resource rules must supply at least one resource",
                )
            )
    return errors


def validate_role(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    return _rules(obj, namespaced=True)


def validate_cluster_role(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    return _rules(obj, namespaced=False)


def _quoted(values: tuple[str, ...]) -> str:
    return "supported values: " + ", ".join(f'"{v}"' for v in values)


def _binding(
    obj: dict[str, Any], old: dict[str, Any] | None, *, namespaced: bool
) -> list[FieldError]:
    ref = obj.get("roleRef") or {}
    errors = []
    if ref.get("apiGroup", "") != GROUP:
        errors.append(
            FieldError(
                ErrorType.NOT_SUPPORTED,
                "roleRef.apiGroup",
                _quoted((GROUP,)),
                ref.get("apiGroup", ""),
            )
        )
    kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)
    if ref.get("kind", "") not in kinds:
        errors.append(
            FieldError(ErrorType.NOT_SUPPORTED, "roleRef.kind", _quoted(kinds), ref.get("kind", ""))
        )
    name = ref.get("name") or ""
    if not name:
        errors.append(FieldError(ErrorType.REQUIRED, "roleRef.name", ""))
    else:
        errors.extend(
            FieldError(ErrorType.INVALID, "roleRef.name", msg, name)
            for msg in is_path_segment_name(name)
        )
    if old is not None and ref != old.get("roleRef"):
        errors.append(FieldError(ErrorType.INVALID, "roleRef", "cannot change roleRef", ref))
    for i, subject in enumerate(obj.get("subjects") or []):
        if isinstance(subject, dict):
            errors.extend(_subject(subject, f"subjects[{i}]", namespaced=namespaced))
    return errors


def _subject(subject: dict[str, Any], where: str, *, namespaced: bool) -> list[FieldError]:
    errors = []
    kind, name, group = (
        subject.get("kind", ""),
        subject.get("name") or "",
        subject.get("apiGroup", ""),
    )
    if not name:
        errors.append(FieldError(ErrorType.REQUIRED, f"{where}.name", ""))
    if kind == "ServiceAccount":
        if name:
            errors.extend(
                FieldError(ErrorType.INVALID, f"{where}.name", msg, name)
                for msg in is_dns1123_subdomain(name)
            )
        if group:
            errors.append(
                FieldError(ErrorType.NOT_SUPPORTED, f"{where}.apiGroup", _quoted(("",)), group)
            )
        if not namespaced and not subject.get("namespace"):
            errors.append(FieldError(ErrorType.REQUIRED, f"{where}.namespace", ""))
    elif kind in ("User", "Group"):
        if group != GROUP:
            errors.append(
                FieldError(ErrorType.NOT_SUPPORTED, f"{where}.apiGroup", _quoted((GROUP,)), group)
            )
    else:
        errors.append(
            FieldError(
                ErrorType.NOT_SUPPORTED,
                f"{where}.kind",
                _quoted(("ServiceAccount", "User", "Group")),
                kind,
            )
        )
    return errors


def validate_role_binding(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    return _binding(obj, old, namespaced=True)


def validate_cluster_role_binding(
    obj: dict[str, Any], old: dict[str, Any] | None
) -> list[FieldError]:
    return _binding(obj, old, namespaced=False)
