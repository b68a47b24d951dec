"""RBAC mode of the embedded cluster: the handler-chain steps that decide who may do what.

``Access`` is wired in only with ``EmbeddedCluster(rbac=True)``; without it the emulator
keeps its single-token check. With it, every request except the health checks goes
through, in kube-apiserver's order:

1. authentication (``authn.Authenticator``): 401 ``Unauthorized``;
2. authorization (``rbac.authorize`` on ``attributes.request_attributes``) against the
   Roles, ClusterRoles and bindings in storage: 403 ``Forbidden`` worded as the real server
   (``configmaps "cm1" is forbidden: User "..." cannot get resource "configmaps" in API
   group "" in the namespace "ns"``, ``forbidden: User "..." cannot get path "/metrics"``);
3. the endpoints RBAC mode adds (``serve``): ``serviceaccounts/<name>/token`` and the review
   resources of ``authentication.k8s.io`` and ``authorization.k8s.io`` (the answers that
   echo the request carry the managedFields of its create, ``fieldManager`` validated);
4. escalation prevention on writes of Roles, ClusterRoles and their bindings (``admit``,
   called by the handlers with the decoded object): the requester must hold every rule
   granted, unless allowed to ``escalate`` the role or ``bind`` the referenced role;
   ``system:masters`` is exempt; an ``aggregationRule`` needs full authority.

Roles and bindings are read from storage on each check (no cache), so a new binding takes
effect with the next request, where the real server's informers lag a moment.

Every 403 of step 2 is also recorded in ``denials`` (the last ``DENIALS_KEPT``, oldest first;
``GET /_emulator/rbac/denials`` over HTTP), so a test can assert that a component's RBAC was
sufficient even when the component retried and got there in the end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web

from loadtest.apiserver import bootstrap_policy, errors, rbac, reviews
from loadtest.apiserver.attributes import MASTERS, Attributes, UserInfo, request_attributes
from loadtest.apiserver.authn import Authenticator
from loadtest.apiserver.escalation import escalation_message, missing
from loadtest.apiserver.handlers import Handlers, json_response
from loadtest.apiserver.kinds import Builtin
from loadtest.apiserver.lifecycle import Objects
from loadtest.apiserver.registry import Registry, ResourceType
from loadtest.apiserver.schema import spec_status, top
from loadtest.apiserver.storage import Storage
from loadtest.apiserver.tokens import TokenIssuer, token_request, with_defaults

RBAC_GROUP = "rbac.authorization.k8s.io"
USER_KEY = web.RequestKey("metashard.user", UserInfo)
"""Where the authenticated ``UserInfo`` is kept on the aiohttp request."""
DENIALS_KEPT = 1000
REVIEW_GROUPS = (reviews.AUTHENTICATION, reviews.AUTHORIZATION)
FULL_AUTHORITY: list[rbac.Rule] = [
    {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
    {"verbs": ["*"], "nonResourceURLs": ["*"]},
]


class StoragePolicy:
    """``rbac.PolicySource`` over the emulator's storage tables."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def _objects(self, plural: str, namespace: str = "") -> Iterable[Mapping[str, Any]]:
        return [e.obj for e in self.storage.table(f"{RBAC_GROUP}/{plural}").entries(namespace)]

    def cluster_role_bindings(self) -> Iterable[Mapping[str, Any]]:
        return self._objects("clusterrolebindings")

    def role_bindings(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return self._objects("rolebindings", namespace)

    def cluster_role(self, name: str) -> Mapping[str, Any] | None:
        entry = self.storage.table(f"{RBAC_GROUP}/clusterroles").get("", name)
        return None if entry is None else entry.obj

    def role(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        entry = self.storage.table(f"{RBAC_GROUP}/roles").get(namespace, name)
        return None if entry is None else entry.obj


def review_types() -> list[ResourceType]:
    """The create-only review resources RBAC mode serves (listed in discovery)."""

    def review(group: str, plural: str, kind: str, *, namespaced: bool = False) -> ResourceType:
        return ResourceType(
            group,
            "v1",
            plural,
            kind.lower(),
            kind,
            namespaced,
            Builtin(top(kind, spec_status(kind, group))),
            verbs=("create",),
        )

    return [
        review(reviews.AUTHENTICATION, "selfsubjectreviews", "SelfSubjectReview"),
        review(
            reviews.AUTHORIZATION,
            "localsubjectaccessreviews",
            "LocalSubjectAccessReview",
            namespaced=True,
        ),
        review(reviews.AUTHORIZATION, "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
        review(reviews.AUTHORIZATION, "selfsubjectrulesreviews", "SelfSubjectRulesReview"),
        review(reviews.AUTHORIZATION, "subjectaccessreviews", "SubjectAccessReview"),
    ]


def forbidden(attrs: Attributes) -> errors.ApiError:
    """The 403 of a denied request, worded as kube-apiserver's ``forbiddenMessage``.

    RBAC gives no reason for a denial, so nothing follows the message.
    """
    user = attrs.user.name
    if not attrs.resource_request:
        message = f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"'
        return errors.ApiError(403, "Forbidden", message, details={})
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    message = (
        f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group '
        f'"{attrs.api_group}" {where}'
    )
    return errors.forbidden(attrs.resource, attrs.api_group, attrs.name, message)


def denial_record(attrs: Attributes) -> dict[str, str]:
    """A refused request as JSON: the user and the attributes a rule would have to match."""
    if not attrs.resource_request:
        return {"user": attrs.user.name, "verb": attrs.verb, "path": attrs.path}
    return {
        "user": attrs.user.name,
        "verb": attrs.verb,
        "apiGroup": attrs.api_group,
        "resource": attrs.resource,
        "subresource": attrs.subresource,
        "namespace": attrs.namespace,
        "name": attrs.name,
    }


class Access:
    """Authentication, authorization and the RBAC-mode endpoints of one cluster."""

    def __init__(self, objects: Objects, handlers: Handlers, *, admin_token: str | None) -> None:
        self.objects = objects
        self.handlers = handlers
        self.issuer = TokenIssuer()
        self.authenticator = Authenticator(objects.storage, self.issuer, admin_token=admin_token)
        self.policy = StoragePolicy(objects.storage)
        self.denials: deque[dict[str, str]] = deque(maxlen=DENIALS_KEPT)
        """The requests refused with 403 by authorization, as ``denial_record`` shows them."""
        handlers.admission = self.admit

    def bootstrap(self, registry: Registry) -> None:
        """Create the bootstrap ClusterRoles and ClusterRoleBindings (once, at start)."""
        for plural, objs in (
            ("clusterroles", bootstrap_policy.cluster_roles()),
            ("clusterrolebindings", bootstrap_policy.cluster_role_bindings()),
        ):
            rt = registry.get(RBAC_GROUP, "v1", plural)
            assert rt is not None
            for obj in objs:
                self.objects.create(rt, "", obj)

    # --- steps 1 and 2 ------------------------------------------------------------------------

    def check(self, request: web.BaseRequest) -> UserInfo:
        """Authenticate and authorize ``request``; keeps the user on it, raises 401/403."""
        user = self.authenticator.authenticate(request.headers.get("Authorization", ""))
        request[USER_KEY] = user
        if MASTERS in user.groups:  # what rbac.authorize would answer, without the parsing
            return user
        attrs = request_attributes(user, request.method, request.path, request.query)
        if not rbac.authorize(self.policy, attrs).allowed:
            self.denials.append(denial_record(attrs))
            raise forbidden(attrs)
        return user

    async def denials_handler(self, request: web.BaseRequest) -> web.Response:
        """``GET /_emulator/rbac/denials``: ``{"denials": [...]}``, oldest first."""
        return web.json_response({"denials": list(self.denials)})

    @staticmethod
    def user(request: web.BaseRequest) -> UserInfo | None:
        return request.get(USER_KEY)

    # --- step 3 -------------------------------------------------------------------------------

    async def serve(
        self, request: web.BaseRequest, rt: ResourceType, namespace: str, name: str, sub: str
    ) -> web.StreamResponse | None:
        """The answer of an endpoint RBAC mode adds, or None for every other route."""
        is_token = rt.group == "" and rt.plural == "serviceaccounts" and sub == "token"
        if not is_token and rt.group not in REVIEW_GROUPS:
            return None
        if request.method != "POST" or (not is_token and name):
            raise errors.method_not_allowed()
        user = self.user(request)
        assert user is not None, "Access.check runs before serve"
        owner = self.handlers.owner(request, "CreateOptions", sub)
        body = self.handlers.decode_object(
            TOKEN_REQUEST if is_token else rt,
            await request.read(),
            request.headers.get("Content-Type", ""),
            "Warn",
            [],
        )
        if is_token:
            account = self.objects.get(rt, namespace, name)
            answer = token_request(self.issuer, account.obj, body)
            return _echoed(answer, owner.created_fields(TOKEN_REQUEST, with_defaults(body)))
        if rt.plural == "selfsubjectreviews":
            return json_response(reviews.self_subject_review(user), 201)
        if rt.plural == "selfsubjectrulesreviews":
            return json_response(reviews.rules_review(self.policy, user, body), 201)
        answer = reviews.access_review(self.policy, rt.kind, user, body, namespace=namespace)
        return _echoed(answer, owner.created_fields(rt, body))

    # --- step 4 -------------------------------------------------------------------------------

    def admit(
        self,
        request: web.BaseRequest,
        rt: ResourceType,
        namespace: str,
        obj: dict[str, Any],
        old: Mapping[str, Any] | None,
    ) -> None:
        """Refuse (403) a Role/ClusterRole/binding write that grants more than the user holds."""
        user = self.user(request)
        if rt.group != RBAC_GROUP or user is None or MASTERS in user.groups:
            return
        name = str((obj.get("metadata") or {}).get("name", ""))
        url_name = "" if request.method == "POST" else name  # an apply or PUT may create
        if rt.plural in ("roles", "clusterroles"):
            escalate = Attributes(
                user=user,
                verb="escalate",
                resource_request=True,
                api_group=RBAC_GROUP,
                resource=rt.plural,
                namespace=namespace,
                name=url_name,
            )
            if rbac.authorize(self.policy, escalate).allowed:
                return
            rules = [r for r in obj.get("rules") or [] if isinstance(r, Mapping)]
            self._confirm(user, rt, namespace, name, rules)
            changed_rule = old is None or old.get("aggregationRule") != obj.get("aggregationRule")
            if obj.get("aggregationRule") and changed_rule:
                owned = rbac.rules_for(self.policy, user, namespace)
                if missing(owned, FULL_AUTHORITY):
                    raise errors.forbidden(
                        rt.plural,
                        rt.group,
                        name,
                        "must have cluster-admin privileges to use the aggregationRule",
                    )
        elif rt.plural in ("rolebindings", "clusterrolebindings"):
            ref = obj.get("roleRef") or {}
            bind = Attributes(
                user=user,
                verb="bind",
                resource_request=True,
                api_group=str(ref.get("apiGroup", "")),
                resource="clusterroles" if ref.get("kind") == "ClusterRole" else "roles",
                namespace=namespace,
                name=str(ref.get("name", "")),
            )
            if rbac.authorize(self.policy, bind).allowed:
                return
            granted = rbac.role_rules(self.policy, ref, namespace)
            if granted is None:
                plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
                raise errors.not_found(plural, RBAC_GROUP, str(ref.get("name", "")))
            self._confirm(user, rt, namespace, name, granted)

    def _confirm(
        self,
        user: UserInfo,
        rt: ResourceType,
        namespace: str,
        name: str,
        rules: list[rbac.Rule],
    ) -> None:
        absent = missing(rbac.rules_for(self.policy, user, namespace), rules)
        if absent:
            raise errors.forbidden(rt.plural, rt.group, name, escalation_message(user, absent))


def _echoed(answer: dict[str, Any], fields: list[dict[str, Any]] | None) -> web.Response:
    """The 201 of an endpoint whose answer is its request object (TokenRequest, the access
    reviews), with the managedFields that request's create recorded, as kube-apiserver
    answers them. SelfSubjectReview and SelfSubjectRulesReview answer with a new object and
    therefore have none."""
    if fields:
        answer["metadata"]["managedFields"] = fields
    return json_response(answer, 201)


def _token_request_type() -> ResourceType:
    """How a TokenRequest body decodes (it is never stored)."""
    kind = "TokenRequest"
    return ResourceType(
        reviews.AUTHENTICATION,
        "v1",
        "tokenrequests",
        "tokenrequest",
        kind,
        True,
        Builtin(top(kind, spec_status(kind, reviews.AUTHENTICATION))),
        verbs=("create",),
    )


TOKEN_REQUEST = _token_request_type()
