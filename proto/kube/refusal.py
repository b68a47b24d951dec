"""What a 403 refused, and to whom: ``Refusal.of(error)``, from kube-apiserver's own words.

The API server words an authorization denial as (``forbiddenMessage`` in
``k8s.io/apiserver/pkg/endpoints/handlers/responsewriters``, recorded in
``../shared/conformance/pending/16-rbac-tokens.json``)::

    configmaps "cm1" is forbidden: User "system:serviceaccount:ns:reader" cannot get resource
    "configmaps" in API group "" in the namespace "ns"
    configmaps is forbidden: User "..." cannot list resource "configmaps" in API group ""
    at the cluster scope

sometimes followed by ``: <the authorizer's reason>``. ``Refusal.of`` reads the user, verb,
resource (``<plural>`` or ``<plural>/<subresource>``), group and scope from it; a 403 worded
otherwise (a namespace being terminated, an admission webhook) gives the caller's own verb
and resource, and no user.

``identity(config)`` says who the credentials are, as far as they tell without asking the
server: the ServiceAccount whose token they carry (a projected or legacy token's claims,
``sub`` ``system:serviceaccount:<namespace>:<name>``; the token is not verified, only read).
``Refusal.who`` names the identity the operator must grant: that ServiceAccount, else the
user the message names (``ServiceAccount <ns>/<name>`` when that user is one), else these
credentials.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from pathlib import Path

import orjson

from proto.kube.cluster import ClusterConfig
from proto.kube.errors import Forbidden
from proto.kube.resources import Resource

_DENIAL = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]*)" '
    r'in API group "(?P<group>[^"]*)" '
    r'(?:in the namespace "(?P<namespace>[^"]*)"|at the cluster scope)'
)
_SERVICE_ACCOUNT = "system:serviceaccount:"


def service_account_of(user: str) -> str | None:
    """``<namespace>/<name>`` of a ServiceAccount's user name, else None."""
    if not user.startswith(_SERVICE_ACCOUNT):
        return None
    namespace, _, name = user.removeprefix(_SERVICE_ACCOUNT).partition(":")
    return f"{namespace}/{name}" if namespace and name else None


def _token(config: ClusterConfig) -> str | None:
    if config.token_file is not None:
        try:
            return Path(config.token_file).read_text().strip() or None
        except OSError:
            return None
    scheme, _, token = (config.authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def identity(config: ClusterConfig) -> str | None:
    """``ServiceAccount <namespace>/<name>`` when the credentials are a ServiceAccount's
    token, else None (a client certificate, a user's token, an auth plugin)."""
    token = _token(config)
    parts = token.split(".") if token else []
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = orjson.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError):
        return None
    subject = claims.get("sub") if isinstance(claims, dict) else None
    account = service_account_of(subject) if isinstance(subject, str) else None
    return f"ServiceAccount {account}" if account else None


@dataclass(frozen=True, slots=True)
class Refusal:
    """One kind of request the API server refuses: ``verb`` on ``resource`` (in ``group``,
    in ``namespace`` or at the cluster scope when None), to ``user`` (``""`` when the
    message does not say)."""

    verb: str
    resource: str
    group: str
    namespace: str | None
    user: str = ""

    @classmethod
    def of(cls, error: Forbidden, *, verb: str, resource: Resource) -> Refusal:
        """What ``error`` refused; ``verb`` and ``resource`` are the request's, used when
        the message is not the authorizer's."""
        found = _DENIAL.search(error.message)
        if found is None:
            return cls(verb, resource.name, resource.group, None)
        return cls(
            found["verb"],
            found["resource"],
            found["group"],
            found["namespace"],
            found["user"],
        )

    @property
    def what(self) -> str:
        """``watch things.example.com at the cluster scope``, ``list configmaps in namespace
        ns``."""
        plural, slash, sub = self.resource.partition("/")
        name = f"{plural}.{self.group}" if self.group else plural
        where = (
            f"in namespace {self.namespace}"
            if self.namespace is not None
            else "at the cluster scope"
        )
        return f"{self.verb} {name}{slash}{sub} {where}"

    def who(self, credentials: str | None) -> str:
        """Whom to grant: ``credentials`` (``identity(config)``) when known, else the user
        the API server named."""
        if credentials:
            return credentials
        account = service_account_of(self.user)
        if account:
            return f"ServiceAccount {account}"
        if self.user:
            return f'User "{self.user}"'
        return "these credentials"
