"""Who asks for what: the user of a request and its authorization attributes.

``request_attributes`` derives the attributes from a request line exactly as
kube-apiserver's ``RequestInfoFactory`` does, before any routing (so an unknown resource is
authorized like a known one):

- ``/api/v1/...`` and ``/apis/<group>/<version>/...`` with at least one part after the
  version are resource requests; everything else (``/api``, ``/apis/apps``, ``/version``,
  ``/metrics``, ``/healthz``) is a non-resource request whose verb is the lower-cased method.
- verbs: GET of a name ``get``, of a collection ``list``; ``watch`` for the legacy
  ``/watch/`` prefix or ``?watch=true``; POST ``create``, PUT ``update``, PATCH ``patch``,
  DELETE of a name ``delete``, of a collection ``deletecollection``.
- a list or watch with ``fieldSelector=metadata.name=X`` is authorized for the name ``X``.
- ``/api/v1/namespaces/<name>`` (and its ``status``/``finalize``) is a namespaced request in
  the namespace ``<name>``: a RoleBinding in that namespace can grant ``get`` on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, slots=True)
class UserInfo:
    """An authenticated identity (``k8s.io/apiserver/pkg/authentication/user.Info``)."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Attributes:
    """What is asked: a resource request (``resource`` set) or a non-resource ``path``."""

    user: UserInfo
    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def request_attributes(
    user: UserInfo, method: str, path: str, query: Mapping[str, str]
) -> Attributes:
    """The authorization attributes of ``method path?query`` sent by ``user``."""
    plain = Attributes(user=user, verb=method.lower(), resource_request=False, path=path)
    parts = [p for p in path.split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return plain
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(parts) < 3:
            return plain
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]
    watch = False
    if parts and parts[0] == "watch":
        watch, parts = True, parts[1:]
    namespace = ""
    if parts and parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = parts[0] if parts else ""
    name = parts[1] if len(parts) > 1 else ""
    subresource = parts[2] if len(parts) > 2 else ""
    verb = _verb(method, bool(name), watch or query.get("watch", "").lower() in ("true", "1"))
    if verb in ("list", "watch") and not name:
        name = _selected_name(query.get("fieldSelector", ""))
    return Attributes(
        user=user,
        verb=verb,
        resource_request=True,
        path=path,
        api_group=group,
        api_version=version,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
    )


def _verb(method: str, named: bool, watch: bool) -> str:
    if method == "GET" or method == "HEAD":
        if watch:
            return "watch"
        return "get" if named else "list"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def _selected_name(selector: str) -> str:
    """The name a field selector pins (``metadata.name=x``), as RequestInfoFactory reads it."""
    for term in selector.split(","):
        for op in ("==", "="):
            key, sep, value = term.partition(op)
            if sep and key.strip() == "metadata.name" and not key.endswith("!"):
                return value.strip()
    return ""
