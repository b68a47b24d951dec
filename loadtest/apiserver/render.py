"""Objects as a resource serves them: bytes for responses, watch events and list items.

Objects are stored in their storage shape (core/v1 for Events, the storage version for
custom resources) and encoded once. A resource whose served shape is the storage shape
(``native``) reuses those bytes; others (events.k8s.io, other CRD versions) convert.

Built-in list items carry no ``kind``/``apiVersion`` (the real server's typed lists omit
them); custom-resource list items keep them.
"""

from __future__ import annotations

from typing import Any

import orjson

from loadtest.apiserver.registry import ResourceType
from loadtest.apiserver.storage import Entry, encode


def native(rt: ResourceType) -> bool:
    if rt.view is not None:
        return False
    return not rt.custom or rt.storage_gvk is None or rt.storage_gvk[1] == rt.version


def view_dict(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (storage shape) in the shape ``rt`` serves; shares nested values."""
    if rt.view is not None:
        return rt.view.from_storage(obj)
    if native(rt):
        return obj
    return {**obj, "apiVersion": rt.api_version}


def to_storage(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """A request body in ``rt``'s shape converted to the storage shape."""
    if rt.view is not None:
        return rt.view.to_storage(obj)
    if rt.custom and rt.storage_gvk is not None:
        group, version, _ = rt.storage_gvk
        obj["apiVersion"] = f"{group}/{version}"
    return obj


def object_bytes(rt: ResourceType, entry: Entry) -> bytes:
    if native(rt):
        return entry.raw
    return encode(view_dict(rt, entry.obj), rt.custom)


def mutable(rt: ResourceType, entry: Entry) -> dict[str, Any]:
    """A deep copy of the stored object in ``rt``'s shape, free to modify."""
    if native(rt):
        return entry.copy()
    return orjson.loads(object_bytes(rt, entry))


def _type_prefix(rt: ResourceType) -> bytes:
    return b'{"kind":"%s","apiVersion":"%s",' % (rt.kind.encode(), rt.api_version.encode())


def item_bytes(rt: ResourceType, entry: Entry, prefix: bytes) -> bytes:
    if rt.custom:
        return object_bytes(rt, entry)
    raw = object_bytes(rt, entry)
    if raw.startswith(prefix):
        return b"{" + raw[len(prefix) :]
    obj = dict(view_dict(rt, entry.obj))
    obj.pop("kind", None)
    obj.pop("apiVersion", None)
    return orjson.dumps(obj)


def list_bytes(rt: ResourceType, entries: list[Entry], meta: dict[str, Any]) -> bytes:
    prefix = _type_prefix(rt)
    items = b",".join(item_bytes(rt, e, prefix) for e in entries)
    if rt.custom:
        meta = {"continue": meta.get("continue", ""), **meta}
        return b'{"apiVersion":"%s","items":[%s],"kind":"%s","metadata":%s}' % (
            rt.api_version.encode(),
            items,
            rt.list_kind_name.encode(),
            orjson.dumps(meta, option=orjson.OPT_SORT_KEYS),
        )
    return b'{"kind":"%s","apiVersion":"%s","metadata":%s,"items":[%s]}' % (
        rt.list_kind_name.encode(),
        rt.api_version.encode(),
        orjson.dumps(meta),
        items,
    )


def event_line(rt: ResourceType, type_: str, entry: Entry) -> bytes:
    return b'{"type":"%s","object":%s}\n' % (type_.encode(), object_bytes(rt, entry))
