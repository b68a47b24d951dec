"""The body of a sync or finalize hook request, built from the snapshot's raw JSON.

A ``HookRequest`` is what one sync or finalize call sends: the controller and the parent as
raw JSON, the object maps of the children and related objects, and ``finalizing``.
``encode(request)`` returns the bytes to POST for a CompositeController: ``{controller,
parent, children, related, finalizing}`` (``proto.api.hooks.sync_request``). Objects are
embedded as the API server sent them (``orjson.Fragment``): the controller, the parent and
every child are never re-encoded, which is most of the request's cost. An object the reconcile
rewrote (the parent after a finalizer change) is passed as its new raw JSON.

``object_map(version, parent_namespace=..., groups=...)`` keys each group's objects as hooks
of that version expect (``proto.api.objectmap.object_key``): v2 ``namespace/name``; v1
relative to the parent, dropping objects a namespaced parent cannot see. Every group passed
in appears, empty or not. ``maps(...)`` builds both maps of a request: the observed children
(a DecoratorController's attachments) and the snapshot's related objects.

``fragment(raw)`` embeds raw JSON in a request body built elsewhere (a DecoratorController's
request has other field names: ``proto.api.decorator.sync_request``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import orjson

from proto.api.controllers import HookVersion
from proto.api.hooks import sync_request
from proto.api.objectmap import ObjectMap, TypeKey, object_key
from workers.sync.observed import Observed


def object_map(
    version: HookVersion, *, parent_namespace: str, groups: Mapping[str, Iterable[Observed]]
) -> ObjectMap:
    result: ObjectMap = {}
    for group_key, objects in groups.items():
        group: dict[str, Any] = {}
        for obj in objects:
            key = object_key(
                version, parent_namespace=parent_namespace, namespace=obj.namespace, name=obj.name
            )
            if key is not None:
                group[key] = orjson.Fragment(obj.raw)
        result[group_key] = group
    return result


def maps(
    version: HookVersion,
    *,
    parent_namespace: str,
    observed: Mapping[TypeKey, Iterable[Observed]],
    related: Mapping[str, Iterable[bytes]],
) -> tuple[ObjectMap, ObjectMap]:
    """(children, related) object maps of one request."""
    children = object_map(
        version,
        parent_namespace=parent_namespace,
        groups={t.group_key: found for t, found in observed.items()},
    )
    decoded = {group: [Observed.decode(r) for r in raws] for group, raws in related.items()}
    return children, object_map(version, parent_namespace=parent_namespace, groups=decoded)


def fragment(raw: bytes) -> Mapping[str, Any]:
    """``raw`` JSON, embedded as it is when the body is encoded with orjson."""
    return cast(Mapping[str, Any], orjson.Fragment(raw))


@dataclass(slots=True)
class HookRequest:
    """One sync (``finalizing=False``) or finalize request, before it is encoded (a value,
    read-only by convention: one is built per hook call, not frozen to build it cheaply)."""

    controller: bytes
    parent: bytes
    children: ObjectMap
    related: ObjectMap
    finalizing: bool


def encode(request: HookRequest) -> bytes:
    body = sync_request(
        controller=fragment(request.controller),
        parent=fragment(request.parent),
        children=request.children,
        related=request.related,
        finalizing=request.finalizing,
    )
    return orjson.dumps(body)
