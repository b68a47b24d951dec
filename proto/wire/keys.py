"""Parent keys: the unit of work the coordinator routes and the workers reconcile.

- A ``ParentKey`` names one parent object of one controller:
  ``(kind, controller, resource, namespace, name)``.
  - ``kind``: the controller's kind, ``CompositeController`` or ``DecoratorController``;
  - ``controller``: the controller object's name (controllers are cluster-scoped);
  - ``resource``: the parent's group-resource as ``<plural>.<group>`` (``deployments.apps``;
    core group: ``pods``), see ``ResourceInfo.group_resource``. A CompositeController has one
    parent resource, but a DecoratorController may decorate several, and two of them may hold
    objects with the same namespace and name;
  - ``namespace``: ``""`` for a cluster-scoped parent;
  - ``name``: the parent's name.
- It is a ``NamedTuple`` of five ``str``: hashable, ordered, cheap, and msgpack encodes it as
  a five-element array with no conversion.
- ``canonical()`` is the byte string the slot hash is computed over; it never changes (slot
  assignment across processes and versions depends on it). Fields are joined by NUL, which
  Kubernetes names, namespaces, kinds and resources cannot contain.
"""

from __future__ import annotations

from typing import NamedTuple


class ParentKey(NamedTuple):
    """One parent object of one controller (see the module docstring for each field)."""

    kind: str
    controller: str
    resource: str
    namespace: str
    name: str

    def canonical(self) -> bytes:
        """The stable byte encoding hashed to find this key's slot."""
        return "\0".join(self).encode("utf-8", "surrogatepass")

    def __str__(self) -> str:
        obj = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind}/{self.controller}:{self.resource}:{obj}"
