"""A hosted controller as the coordinator sees it: parsed spec plus resolved resources.

``ControllerView`` is what routing and snapshots work from; ``definition`` is what workers
receive (``proto.wire.ControllerDef``). Building one needs discovery (``manager.controllers``);
everything here is pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson

from manager.store import Cached
from proto.api.controllers import CompositeController, HookName, group_of
from proto.api.endpoints import Connection, decode_connections
from proto.api.names import CONTROLLER_UID_LABEL
from proto.api.objectmap import TypeKey
from proto.api.selectors import Selector, SelectorError, from_label_selector, from_match_labels
from proto.kube.resources import Resource
from proto.wire import ControllerDef, ControllerKind, ParentKey, ResourceInfo


def resource_info(resource: Resource) -> ResourceInfo:
    return ResourceInfo(
        api_version=resource.api_version,
        resource=resource.name,
        kind=resource.kind,
        namespaced=resource.namespaced,
        subresources=tuple(sorted(resource.subresources)),
    )


def group_resource(resource: Resource) -> str:
    return f"{resource.name}.{resource.group}" if resource.group else resource.name


def group_key(resource: Resource) -> str:
    """``<Kind>.<apiVersion>``: the hook's object-map group and the snapshot's key."""
    return TypeKey(resource.api_version, resource.kind).group_key


@dataclass(frozen=True, eq=False)
class ControllerView:
    spec: CompositeController
    raw: bytes  # the controller object as the API server sent it
    resource_version: str
    parent: Resource
    children: tuple[Resource, ...]
    connections: bytes = field(default=b"", repr=False)
    """Each hook's resolved TLS material and credentials (``proto.api.endpoints``)."""

    @property
    def name(self) -> str:
        return self.spec.name

    @cached_property
    def parent_group_resource(self) -> str:
        return group_resource(self.parent)

    @cached_property
    def definition(self) -> ControllerDef:
        return ControllerDef(
            kind=ControllerKind.COMPOSITE,
            name=self.spec.name,
            uid=self.spec.uid,
            resource_version=self.resource_version,
            object=self.raw,
            resources=(resource_info(self.parent), *(resource_info(c) for c in self.children)),
            connections=self.connections,
        )

    def connection(self, hook: HookName) -> Connection:
        """The resolved connection of one hook (empty when it uses none)."""
        return self._connections.get(hook.value) or Connection()

    @cached_property
    def _connections(self) -> dict[str, Connection]:
        return decode_connections(self.connections)

    def key(self, namespace: str, name: str) -> ParentKey:
        return ParentKey(
            ControllerKind.COMPOSITE.value,
            self.spec.name,
            self.parent_group_resource,
            namespace if self.parent.namespaced else "",
            name,
        )

    def handles(self, parent: Cached) -> bool:
        """Whether this controller handles ``parent``: ``parentResource.labelSelector`` selects
        it, or it still carries this controller's finalizer (it must be finalized)."""
        return (
            self.spec.parent.label_selector.matches(parent.labels)
            or self.spec.finalizer in parent.finalizers
        )

    def owns(self, child: Cached) -> bool:
        """Whether ``child``'s controller ownerReference points at this controller's parent type."""
        ref = child.owner
        if ref is None or ref.kind != self.parent.kind:
            return False
        return group_of(ref.api_version) == self.parent.group

    def children_selector(self, parent: Cached) -> Selector:
        """The selector that claims children for ``parent`` (``Selector.nothing()`` if unusable)."""
        if self.spec.generate_selector:
            return from_match_labels({CONTROLLER_UID_LABEL: parent.uid})
        try:
            obj: dict[str, Any] = orjson.loads(parent.raw)
            return from_label_selector((obj.get("spec") or {}).get("selector"))
        except (SelectorError, orjson.JSONDecodeError, AttributeError):
            return Selector.nothing()
