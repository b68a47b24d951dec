"""The review APIs: who am I, may I (or may they), and what may I do here.

Bodies as kube-apiserver answers them (transcript 16):

- ``SelfSubjectReview`` (``authentication.k8s.io/v1``): ``metadata.creationTimestamp`` and
  ``status.userInfo`` (username, uid, groups, extra) of the requester.
- ``SelfSubjectAccessReview``, ``SubjectAccessReview``, ``LocalSubjectAccessReview``
  (``authorization.k8s.io/v1``): the spec echoed, ``metadata: {}``, ``status.allowed`` and,
  when RBAC allowed it, ``status.reason``; a denial is just ``{allowed: false}``. Exactly one
  of ``resourceAttributes``/``nonResourceAttributes`` is required (422 with the real
  server's odd ``.authorization.k8s.io ""`` wording); a SubjectAccessReview needs a user or
  a group; a LocalSubjectAccessReview's namespace must be the URL's.
- ``SelfSubjectRulesReview``: every rule bound to the requester in ``spec.namespace`` (a
  namespace is required: 400 otherwise), resource and non-resource rules apart, ``spec: {}``
  in the answer, ``incomplete: false``.

The label and field selectors of ``resourceAttributes`` are not evaluated (RBAC ignores
them too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadtest.apiserver import errors, timefmt
from loadtest.apiserver.attributes import Attributes, UserInfo
from loadtest.apiserver.rbac import PolicySource, authorize, rules_for
from proto.api.validation import ErrorType, FieldError

AUTHORIZATION = "authorization.k8s.io"
AUTHENTICATION = "authentication.k8s.io"


def self_subject_review(user: UserInfo) -> dict[str, Any]:
    info: dict[str, Any] = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {k: list(v) for k, v in user.extra.items()}
    return {
        "kind": "SelfSubjectReview",
        "apiVersion": f"{AUTHENTICATION}/v1",
        "metadata": {"creationTimestamp": timefmt.now()},
        "status": {"userInfo": info},
    }


def _invalid(field: str, value: Any, message: str) -> errors.ApiError:
    problem = FieldError(ErrorType.INVALID, field, message, value)
    return errors.invalid("", AUTHORIZATION, "", [problem])


def _attributes(user: UserInfo, spec: Mapping[str, Any]) -> Attributes:
    resource, plain = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is not None and plain is not None:
        raise _invalid(
            "spec.nonResourceAttributes",
            plain,
            "cannot be specified in combination with resourceAttributes",
        )
    if isinstance(plain, Mapping):
        return Attributes(
            user=user,
            verb=str(plain.get("verb", "")),
            resource_request=False,
            path=str(plain.get("path", "")),
        )
    if not isinstance(resource, Mapping):
        raise _invalid(
            "spec.resourceAttributes",
            None,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )
    return Attributes(
        user=user,
        verb=str(resource.get("verb", "")),
        resource_request=True,
        api_group=str(resource.get("group", "")),
        api_version=str(resource.get("version", "")),
        resource=str(resource.get("resource", "")),
        subresource=str(resource.get("subresource", "")),
        namespace=str(resource.get("namespace", "")),
        name=str(resource.get("name", "")),
    )


def _spec(body: Mapping[str, Any]) -> dict[str, Any]:
    spec = body.get("spec")
    return dict(spec) if isinstance(spec, Mapping) else {}


def access_review(
    source: PolicySource,
    kind: str,
    requester: UserInfo,
    body: Mapping[str, Any],
    *,
    namespace: str = "",
) -> dict[str, Any]:
    """The answer to a (Self|Local)SubjectAccessReview ``body`` (``kind`` says which)."""
    spec = _spec(body)
    user = requester
    if kind != "SelfSubjectAccessReview":
        name, groups = spec.get("user") or "", spec.get("groups") or []
        if not name and not groups:
            raise _invalid("spec.user", name, "at least one of user or group must be specified")
        extra = spec.get("extra") or {}
        user = UserInfo(
            str(name),
            tuple(str(g) for g in groups),
            uid=str(spec.get("uid", "")),
            extra={str(k): tuple(str(x) for x in v) for k, v in extra.items()},
        )
    if kind == "LocalSubjectAccessReview" and spec.get("nonResourceAttributes") is not None:
        raise _invalid(
            "spec.nonResourceAttributes",
            spec["nonResourceAttributes"],
            "disallowed on this kind of request",
        )
    attrs = _attributes(user, spec)
    if kind == "LocalSubjectAccessReview" and attrs.namespace != namespace:
        raise errors.bad_request(
            f"spec.resourceAttributes.namespace must match namespace: {namespace}"
        )
    decision = authorize(source, attrs)
    status: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    meta: dict[str, Any] = {"namespace": namespace} if namespace else {}
    return {
        "kind": kind,
        "apiVersion": f"{AUTHORIZATION}/v1",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


def rules_review(
    source: PolicySource, requester: UserInfo, body: Mapping[str, Any]
) -> dict[str, Any]:
    """The answer to a SelfSubjectRulesReview ``body``."""
    namespace = _spec(body).get("namespace")
    if not namespace:
        raise errors.bad_request("no namespace on request")
    resource_rules: list[dict[str, Any]] = []
    plain_rules: list[dict[str, Any]] = []
    for rule in rules_for(source, requester, str(namespace)):
        verbs = list(rule.get("verbs") or [])
        if rule.get("resources"):
            shaped: dict[str, Any] = {"verbs": verbs}
            for key in ("apiGroups", "resources", "resourceNames"):
                if rule.get(key):
                    shaped[key] = list(rule[key])
            resource_rules.append(shaped)
        if rule.get("nonResourceURLs"):
            plain_rules.append({"verbs": verbs, "nonResourceURLs": list(rule["nonResourceURLs"])})
    return {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": f"{AUTHORIZATION}/v1",
        "metadata": {},
        "spec": {},
        "status": {
            "resourceRules": resource_rules,
            "nonResourceRules": plain_rules,
            "incomplete": False,
        },
    }
