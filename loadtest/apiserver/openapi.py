"""A minimal OpenAPI v3 endpoint: enough for kubectl's server-side field validation.

``/openapi/v3`` lists one document per served group/version; each document has the
resource paths with their operations, the ``x-kubernetes-group-version-kind`` extension and
the ``fieldValidation``/``dryRun``/``fieldManager`` query parameters, which is what kubectl
checks before it lets the server validate (``--validate=strict``). Schemas are not
published (``components.schemas`` is empty), so ``kubectl explain`` has nothing to show and
kubectl's client-side apply computes patches from its compiled-in types.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from loadtest.apiserver.registry import Registry, ResourceType

_PARAMETERS = [
    {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
    for name in ("dryRun", "fieldManager", "fieldValidation")
]


def _prefix(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _operations(rt: ResourceType, verbs: tuple[str, ...]) -> dict[str, Any]:
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    body = {"x-kubernetes-group-version-kind": gvk, "responses": {"200": {"description": "OK"}}}
    return {verb: {**body, "parameters": _PARAMETERS} for verb in verbs}


def document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    resources = registry.resources(group, version)
    if not resources:
        return None
    paths: dict[str, Any] = {}
    base = "/" + _prefix(group, version)
    for rt in resources:
        scope = (
            f"{base}/namespaces/{{namespace}}/{rt.plural}"
            if rt.namespaced
            else f"{base}/{rt.plural}"
        )
        paths[scope] = _operations(rt, ("get", "post", "delete"))
        paths[scope + "/{name}"] = _operations(rt, ("get", "put", "patch", "delete"))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.36.2"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def index(registry: Registry) -> dict[str, Any]:
    paths = {}
    for group in ["", *registry.groups()]:
        for version in registry.versions(group):
            doc = document(registry, group, version)
            digest = hashlib.sha512(orjson.dumps(doc)).hexdigest()[:64].upper()
            prefix = _prefix(group, version)
            paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={digest}"}
    return {"paths": paths}
