"""CustomResourceDefinitions: the CRD resource itself and the resources it serves.

- ``CrdKind`` defaults and validates CRD objects (names, scope, versions, schemas).
- ``served_types(crd)`` turns an established CRD into one ``ResourceType`` per served
  version, all sharing one storage table (conversion strategy ``None``: only ``apiVersion``
  changes between versions).
- Custom resources themselves are checked by ``structural.CustomKind``.
"""

from __future__ import annotations

from typing import Any

from loadtest.apiserver.kinds import validate_meta
from loadtest.apiserver.registry import (
    CUSTOM_VERBS,
    STATUS_VERBS,
    ResourceType,
    Subresource,
    version_priority,
)
from loadtest.apiserver.scale import crd_paths
from loadtest.apiserver.schema import spec_status, top
from loadtest.apiserver.structural import CustomKind
from proto.api import validation as v
from proto.api.validation import ErrorType, FieldError

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
CRDS = "apiextensions.k8s.io/customresourcedefinitions"

# --- the CRD resource ------------------------------------------------------------------------

CRD_STRUCT = top("CustomResourceDefinition", spec_status("CustomResourceDefinition"))


def _structural(schema: Any, path: str, errors: list[FieldError], root: bool = False) -> None:
    if not isinstance(schema, dict):
        return
    typed = schema.get("type")
    if (
        not typed
        and not schema.get("x-kubernetes-int-or-string")
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        errors.append(
            FieldError(
                ErrorType.REQUIRED, f"{path}.type", "must not be empty for specified object fields"
            )
        )
    if root and typed and typed != "object":
        errors.append(
            FieldError(ErrorType.INVALID, f"{path}.type", "must be object at the root", typed)
        )
    for name, sub in (schema.get("properties") or {}).items():
        _structural(sub, f"{path}.properties[{name}]", errors)
    if isinstance(schema.get("items"), dict):
        _structural(schema["items"], f"{path}.items", errors)
    if isinstance(schema.get("additionalProperties"), dict):
        _structural(schema["additionalProperties"], f"{path}.additionalProperties", errors)


class CrdKind:
    """The ``customresourcedefinitions`` resource."""

    def decode(self, obj: dict[str, Any]) -> list[str]:
        return CRD_STRUCT.decode(obj)

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        spec = obj.setdefault("spec", {})
        names = spec.setdefault("names", {})
        if names.get("kind"):
            names.setdefault("singular", str(names["kind"]).lower())
            names.setdefault("listKind", f"{names['kind']}List")
        spec.setdefault("conversion", {"strategy": "None"})
        for version in spec.get("versions") or []:
            if isinstance(version, dict):
                version.setdefault("served", True)
                version.setdefault("storage", False)
        status = obj.setdefault("status", {})
        status.setdefault("conditions", None)
        status.setdefault("acceptedNames", {"plural": "", "kind": ""})
        stored = [
            ver.get("name")
            for ver in spec.get("versions") or []
            if isinstance(ver, dict) and ver.get("storage")
        ]
        known = list(status.get("storedVersions") or [])
        status["storedVersions"] = known + [s for s in stored if s not in known]

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errors = validate_meta(obj, v.is_dns1123_subdomain)
        spec = obj.get("spec") or {}
        group, names = spec.get("group") or "", spec.get("names") or {}
        plural = names.get("plural") or ""
        name = obj["metadata"].get("name", "")
        if name and name != f"{plural}.{group}":
            errors.append(
                FieldError(
                    ErrorType.INVALID,
                    "metadata.name",
                    'must be spec.names.plural+"."+spec.group',
                    name,
                )
            )
        if not group:
            errors.append(FieldError(ErrorType.REQUIRED, "spec.group", ""))
        elif "." not in group:
            errors.append(
                FieldError(
                    ErrorType.INVALID,
                    "spec.group",
                    "should be a domain with at least one dot",
                    group,
                )
            )
        for key in ("plural", "singular", "kind", "listKind"):
            if not names.get(key):
                errors.append(FieldError(ErrorType.REQUIRED, f"spec.names.{key}", ""))
        if spec.get("scope") not in ("Cluster", "Namespaced"):
            errors.append(
                FieldError(
                    ErrorType.NOT_SUPPORTED,
                    "spec.scope",
                    'supported values: "Cluster", "Namespaced"',
                    spec.get("scope", ""),
                )
            )
        versions = [ver for ver in spec.get("versions") or [] if isinstance(ver, dict)]
        if not versions:
            errors.append(
                FieldError(
                    ErrorType.REQUIRED,
                    "spec.versions",
                    "must have exactly one version marked as storage version",
                )
            )
        elif sum(1 for ver in versions if ver.get("storage")) != 1:
            errors.append(
                FieldError(
                    ErrorType.INVALID,
                    "spec.versions",
                    "must have exactly one version marked as storage version",
                    versions,
                )
            )
        for i, ver in enumerate(versions):
            schema = (ver.get("schema") or {}).get("openAPIV3Schema")
            where = f"spec.versions[{i}].schema.openAPIV3Schema"
            if schema is None:
                errors.append(FieldError(ErrorType.REQUIRED, where, "schemas are required"))
            else:
                _structural(schema, where, errors, root=True)
        if old is not None and spec.get("scope") != (old.get("spec") or {}).get("scope"):
            errors.append(
                FieldError(ErrorType.INVALID, "spec.scope", "field is immutable", spec.get("scope"))
            )
        return errors


def served_types(crd: dict[str, Any]) -> list[ResourceType]:
    """The resources an established CRD serves, one per served version."""
    spec = crd["spec"]
    names = spec["names"]
    group = spec["group"]
    storage_version = next(ver["name"] for ver in spec["versions"] if ver.get("storage"))
    result = []
    for ver in sorted(spec["versions"], key=lambda ver: version_priority(ver["name"])):
        if not ver.get("served"):
            continue
        subresources = []
        declared = ver.get("subresources") or {}
        scale_spec = declared.get("scale")
        if isinstance(scale_spec, dict):
            subresources.append(Subresource("scale", "Scale", STATUS_VERBS, "autoscaling", "v1"))
        if "status" in declared:
            subresources.append(
                Subresource("status", names["kind"], STATUS_VERBS, group, ver["name"])
            )
        schema = (ver.get("schema") or {}).get("openAPIV3Schema") or {}
        result.append(
            ResourceType(
                group,
                ver["name"],
                names["plural"],
                names.get("singular", names["kind"].lower()),
                names["kind"],
                spec["scope"] == "Namespaced",
                CustomKind(schema, kind=names["kind"], group=group),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                verbs=CUSTOM_VERBS,
                subresources=tuple(subresources),
                storage_gvk=(group, storage_version, names["kind"]),
                custom=True,
                status="status" in declared,
                scale=crd_paths(scale_spec) if isinstance(scale_spec, dict) else None,
                generation=True,
                unconditional_update=False,
                list_kind=names.get("listKind", names["kind"] + "List"),
            )
        )
    return result


def established(crd: dict[str, Any], now: str) -> dict[str, Any]:
    """The status the establishing controller writes: names accepted, Established."""
    names = crd["spec"]["names"]
    accepted = {
        k: names[k]
        for k in ("plural", "singular", "shortNames", "kind", "listKind", "categories")
        if k in names
    }
    status = dict(crd.get("status") or {})
    status["conditions"] = [
        {
            "type": "NamesAccepted",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "NoConflicts",
            "message": "no conflicts found",
        },
        {
            "type": "Established",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
        },
    ]
    status["acceptedNames"] = accepted
    return status


def crd_resource_type() -> ResourceType:
    return ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        CrdKind(),
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        subresources=(Subresource("status", "CustomResourceDefinition", STATUS_VERBS),),
        storage_gvk=("apiextensions.k8s.io", "v1beta1", "CustomResourceDefinition"),
        status=True,
        generation=True,
    )
