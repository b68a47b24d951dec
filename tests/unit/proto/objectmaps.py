"""A reference object map built from decoded objects, for differential tests of the hook
request's object maps (``workers.sync.hookrequest`` builds them from raw JSON)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from proto.api.controllers import HookVersion
from proto.api.objectmap import ObjectMap, TypeKey, object_key


def _namespace_and_name(obj: Mapping[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return metadata.get("namespace") or "", metadata.get("name") or ""


def build_object_map(
    version: HookVersion,
    *,
    parent_namespace: str,
    groups: Mapping[TypeKey, Iterable[Mapping[str, Any]]],
) -> ObjectMap:
    """The object map of ``groups`` (type -> objects of that type) for one parent."""
    result: ObjectMap = {}
    for type_key, objects in groups.items():
        group = result.setdefault(type_key.group_key, {})
        for obj in objects:
            namespace, name = _namespace_and_name(obj)
            key = object_key(
                version, parent_namespace=parent_namespace, namespace=namespace, name=name
            )
            if key is not None:
                group[key] = obj
    return result
