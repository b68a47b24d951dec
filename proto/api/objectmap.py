"""Hook object maps: how children, attachments and related objects appear in hook requests.

A map is ``{"<Kind>.<apiVersion>": {"<key>": object}}``; the group key is ``Pod.v1`` for core
types and ``StatefulSet.apps/v1`` otherwise. The inner key depends on the hook version:

- **v2** (Metacontroller's UniformObjectMap): ``namespace/name`` for namespaced objects, ``name``
  for cluster-scoped ones, whatever the parent.
- **v1** (RelativeObjectMap, keys relative to the parent): ``name`` when parent and object are
  both namespaced or both cluster-scoped; ``namespace/name`` for a namespaced object under a
  cluster-scoped parent. Under a namespaced parent, v1 **drops** objects from other namespaces
  and cluster-scoped objects, silently, as Metacontroller does.

Invariants:

- Every type passed in appears as a group, even with no objects (``{"Pod.v1": {}}``), so hooks
  can rely on the declared types being present.
- An object's scope is read from its ``metadata.namespace`` (empty or absent: cluster-scoped);
  the parent's from ``parent_namespace`` (``""``: cluster-scoped).
- Two objects with the same key in one group: the later one wins (Go map assignment).
- Objects are placed in the map as given, not copied.

``object_key`` is the rule for one object; the workers build the maps from the snapshot's raw
JSON (``workers.sync.hookrequest``) for CompositeController requests (``children``,
``related``) and DecoratorController requests (``attachments``, ``related``) alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proto.api.controllers import HookVersion

ObjectMap = dict[str, dict[str, Any]]
"""``{group key: {object key: object}}``, ready to be encoded into a hook request."""


@dataclass(frozen=True, slots=True)
class TypeKey:
    """A Kubernetes type as hooks see it: apiVersion and kind."""

    api_version: str
    kind: str

    @property
    def group_key(self) -> str:
        """``Kind.apiVersion``: ``Pod.v1``, ``StatefulSet.apps/v1``."""
        return f"{self.kind}.{self.api_version}"


def object_key(
    version: HookVersion, *, parent_namespace: str, namespace: str, name: str
) -> str | None:
    """The inner key of one object, or ``None`` when a v1 map leaves it out."""
    if version is HookVersion.V2:
        return f"{namespace}/{name}" if namespace else name
    if parent_namespace:
        return name if namespace == parent_namespace else None
    return f"{namespace}/{name}" if namespace else name
