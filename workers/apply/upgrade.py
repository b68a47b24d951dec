"""Moving a child written by dynamic apply to server-side apply: the managed-fields upgrade.

Dynamic apply writes children with POST and PUT, which the API server records in
``managedFields`` as ``Update`` entries of the client's manager (``metashard``, from its
User-Agent; ``metacontroller`` for children Metacontroller wrote). A later server-side apply
shares those fields with the Update manager, so a field the hook stops returning would stay
forever. The documented client-side to server-side upgrade (client-go's
``csaupgrade.UpgradeManagedFieldsPatch``) fixes this before the first apply:

- ``upgrade_patch(obj, old_managers=..., manager=...)`` returns the JSON patch to send, or
  ``None`` when there is nothing to migrate. The fields of every ``Update`` entry of an old
  manager on the main resource (no ``subresource``) are merged into the apply manager's
  ``Apply`` entry (created from the first old entry when there is none) and those entries
  removed; entries of another apiVersion than the apply entry's are left alone (field sets of
  different versions do not mix).
- ``last_applied`` (optional): the dynamic-apply annotation is removed in the same patch
  when present (Metacontroller's migration for ``InPlace`` children).
- The patch replaces ``/metadata/resourceVersion`` with the version the migration was computed
  from: a child changed meanwhile answers 409 Conflict and is migrated on a later sync.
- Pure: ``obj`` is not mutated.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from proto.api.names import LAST_APPLIED_ANNOTATION

DYNAMIC_APPLY_MANAGERS = frozenset(("metashard", "metacontroller"))
"""The Update managers dynamic apply writes as (metashard's and Metacontroller's clients)."""

_FIELDS_V1 = "FieldsV1"


def union(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """The union of two ``fieldsV1`` trees."""
    out = dict(a)
    for key, value in b.items():
        have = out.get(key)
        if isinstance(have, dict) and isinstance(value, dict):
            out[key] = union(have, value)
        elif key not in out:
            out[key] = value
    return out


def _is_old(entry: Any, old_managers: Collection[str]) -> bool:
    return (
        isinstance(entry, dict)
        and entry.get("operation") == "Update"
        and entry.get("manager") in old_managers
        and not entry.get("subresource")
        and entry.get("fieldsType", _FIELDS_V1) == _FIELDS_V1
        and isinstance(entry.get("fieldsV1", {}), dict)
    )


def _is_applier(entry: Any, manager: str) -> bool:
    return (
        isinstance(entry, dict)
        and entry.get("operation") == "Apply"
        and entry.get("manager") == manager
        and not entry.get("subresource")
    )


def upgraded_entries(
    entries: list[Any], *, old_managers: Collection[str], manager: str
) -> list[Any] | None:
    """``entries`` after the upgrade, or None when no old entry can be merged."""
    applier = next((e for e in entries if _is_applier(e, manager)), None)
    olds = [e for e in entries if _is_old(e, old_managers)]
    if not olds:
        return None
    version = applier["apiVersion"] if applier is not None else olds[0].get("apiVersion")
    merging = [e for e in olds if e.get("apiVersion") == version]
    if not merging:
        return None
    fields: dict[str, Any] = dict(applier.get("fieldsV1") or {}) if applier is not None else {}
    for entry in merging:
        fields = union(fields, entry.get("fieldsV1") or {})
    merged = (
        dict(applier)
        if applier is not None
        else {
            "manager": manager,
            "operation": "Apply",
            "apiVersion": version,
            "fieldsType": _FIELDS_V1,
        }
    )
    if applier is None and "time" in merging[0]:
        merged["time"] = merging[0]["time"]
    merged["fieldsV1"] = fields
    out: list[Any] = []
    placed = False
    for entry in entries:
        if any(entry is m for m in merging):
            if not placed and applier is None:
                out.append(merged)
                placed = True
            continue
        out.append(merged if entry is applier else entry)
    return out


def _pointer(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


def upgrade_patch(
    obj: Mapping[str, Any],
    *,
    manager: str,
    old_managers: Collection[str] = DYNAMIC_APPLY_MANAGERS,
    last_applied: bool = False,
) -> list[dict[str, Any]] | None:
    """The JSON patch migrating ``obj`` to ``manager`` (module docstring), or None."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return None
    ops: list[dict[str, Any]] = []
    entries = metadata.get("managedFields")
    if isinstance(entries, list):
        upgraded = upgraded_entries(entries, old_managers=old_managers, manager=manager)
        if upgraded is not None:
            ops.append({"op": "replace", "path": "/metadata/managedFields", "value": upgraded})
    annotations = metadata.get("annotations")
    if last_applied and isinstance(annotations, dict) and LAST_APPLIED_ANNOTATION in annotations:
        path = "/metadata/annotations/" + _pointer(LAST_APPLIED_ANNOTATION)
        ops.append({"op": "remove", "path": path})
    if not ops:
        return None
    version = metadata.get("resourceVersion")
    if isinstance(version, str) and version:
        ops.append({"op": "replace", "path": "/metadata/resourceVersion", "value": version})
    return ops
