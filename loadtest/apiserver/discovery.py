"""Discovery documents: ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>``, ``/apis/<g>/<v>``
and the aggregated form (``apidiscovery.k8s.io/v2``).

All are computed from the live ``Registry``, so a CRD's resources appear once it is
established and disappear with it. Resources are sorted by name, subresources follow their
resource; groups keep the real server's priority order with CRD groups last.
"""

from __future__ import annotations

from typing import Any

from loadtest.apiserver.registry import Registry, ResourceType

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _accept_entries(accept: str) -> list[tuple[str, dict[str, str]]]:
    entries = []
    for part in accept.split(","):
        pieces = [p.strip() for p in part.split(";")]
        params = dict(p.split("=", 1) for p in pieces[1:] if "=" in p)
        params.pop("q", None)
        entries.append((pieces[0].lower(), params))
    return entries


def negotiate(accept: str | None) -> str | None:
    """``aggregated``, ``legacy`` or None (406) for a discovery request's Accept header."""
    if not accept:
        return "legacy"
    for media, params in _accept_entries(accept):
        if media in ("application/json", "*/*", "application/*", "application/yaml"):
            if not params:
                return "legacy"
            if (
                params.get("g") == "apidiscovery.k8s.io"
                and params.get("v") == "v2"
                and params.get("as") == "APIGroupDiscoveryList"
            ):
                return "aggregated"
        elif media == "application/vnd.kubernetes.protobuf":
            continue
    return None


def api_versions(host: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    }


def _group_version(group: str, version: str) -> dict[str, str]:
    return {"groupVersion": f"{group}/{version}", "version": version}


def api_group(registry: Registry, group: str) -> dict[str, Any]:
    versions = registry.versions(group)
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [_group_version(group, v) for v in versions],
        "preferredVersion": _group_version(group, versions[0]),
    }


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [api_group(registry, g) for g in registry.groups()]
    for g in groups:
        del g["kind"], g["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for rt in registry.resources(group, version):
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        entry.update(_other_names(rt))
        entry["storageVersionHash"] = rt.storage_version_hash
        resources.append(entry)
        for sub in sorted(rt.subresources, key=lambda s: s.name):
            item: dict[str, Any] = {
                "name": f"{rt.plural}/{sub.name}",
                "singularName": "",
                "namespaced": rt.namespaced,
            }
            if sub.group is not None and sub.group != rt.group:
                item["group"] = sub.group
                item["version"] = sub.version
            item["kind"] = sub.kind
            item["verbs"] = list(sub.verbs)
            resources.append(item)
    body: dict[str, Any] = {"kind": "APIResourceList"}
    if group:
        body["apiVersion"] = "v1"
        body["groupVersion"] = f"{group}/{version}"
    else:
        body["groupVersion"] = version
    body["resources"] = resources
    return body


def _other_names(rt: ResourceType) -> dict[str, list[str]]:
    """The ``shortNames`` and ``categories`` of a discovery entry, each left out when empty."""
    names = {"shortNames": list(rt.short_names), "categories": list(rt.categories)}
    return {key: value for key, value in names.items() if value}


def _response_kind(
    rt: ResourceType, kind: str, group: str | None, version: str | None
) -> dict[str, str]:
    if rt.custom and group in (None, rt.group):
        return {"group": rt.group, "version": rt.version, "kind": kind}
    return {"group": group or "", "version": version or "", "kind": kind}


def _aggregated_resource(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": _response_kind(rt, rt.kind, None, None),
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(rt.verbs),
    }
    entry.update(_other_names(rt))
    if rt.subresources:
        entry["subresources"] = [
            {
                "subresource": sub.name,
                "responseKind": _response_kind(rt, sub.kind, sub.group, sub.version),
                "verbs": list(sub.verbs),
            }
            for sub in sorted(rt.subresources, key=lambda s: s.name)
        ]
    return entry


def _aggregated_group(registry: Registry, group: str) -> dict[str, Any]:
    return {
        "metadata": {"name": group} if group else {},
        "versions": [
            {
                "version": version,
                "resources": [
                    _aggregated_resource(rt) for rt in registry.resources(group, version)
                ],
                "freshness": "Current",
            }
            for version in registry.versions(group)
        ],
    }


def aggregated(registry: Registry, *, core: bool) -> dict[str, Any]:
    groups = [""] if core else registry.groups()
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": [_aggregated_group(registry, g) for g in groups],
    }


def version_info() -> dict[str, str]:
    return {
        "major": "1",
        "minor": "36",
        "emulationMajor": "1",
        "emulationMinor": "36",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "35",
        "gitVersion": "v1.36.2",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "python",
        "compiler": "metashard-emulator",
        "platform": "linux/amd64",
    }
