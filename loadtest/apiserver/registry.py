"""The resource table: what the emulator serves and how each resource behaves.

A ``ResourceType`` is one resource in one group/version (``apps/v1 deployments``): its
discovery data (names, verbs, subresources), where it is stored (resources that share storage,
such as core and ``events.k8s.io`` Events, or the versions of a CRD, share a ``storage``
table), and its ``Kind``: the per-type behaviour (decoding, defaults, validation).
``Registry`` holds the built-in resources plus the ones CRDs add at run time.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from loadtest.apiserver.scale import ScalePaths
from proto.api.validation import FieldError

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CUSTOM_VERBS = ("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")


class Kind(Protocol):
    """Per-type behaviour, the emulator's ``RESTStrategy``."""

    def decode(self, obj: dict[str, Any]) -> list[str]:
        """Normalize a decoded body in place; drop and return unknown field paths.

        Raises ``DecodeError`` for what the real server rejects while decoding (400).
        """
        ...

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """Fill defaults in place; ``old`` is the stored object on updates (None on create)."""
        ...

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]: ...


class View(Protocol):
    """A resource served in another shape than it is stored (events.k8s.io Events)."""

    def to_storage(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def from_storage(self, obj: dict[str, Any]) -> dict[str, Any]: ...


class DecodeError(ValueError):
    """The body cannot be decoded as the resource's type; the message is the cause."""


@dataclass(frozen=True, slots=True)
class Subresource:
    name: str
    kind: str
    verbs: tuple[str, ...]
    group: str | None = None
    version: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    behaviour: Kind
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = VERBS
    subresources: tuple[Subresource, ...] = ()
    storage_gvk: tuple[str, str, str] | None = None
    custom: bool = False
    status: bool = False
    generation: bool = False
    watch_cache: bool = True
    create_on_update: bool = False
    unconditional_update: bool = True
    return_deleted: bool = False
    field_selectors: tuple[str, ...] = ()
    field_aliases: dict[str, str] = field(default_factory=dict)
    view: View | None = None
    list_kind: str = ""
    storage_name: str = ""
    scale: ScalePaths | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage(self) -> str:
        return self.storage_name or f"{self.group}/{self.plural}"

    @property
    def list_kind_name(self) -> str:
        return self.list_kind or self.kind + "List"

    @property
    def storage_version_hash(self) -> str:
        group, version, kind = self.storage_gvk or (self.group, self.version, self.kind)
        digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
        return base64.b64encode(digest[:8]).decode()

    def subresource(self, name: str) -> Subresource | None:
        return next((s for s in self.subresources if s.name == name), None)


@dataclass(frozen=True, slots=True)
class GroupOrder:
    """Where a group sits in discovery (the real server's priority order)."""

    name: str
    versions: tuple[str, ...]


class Registry:
    """Resources by (group, version, plural), in discovery order."""

    def __init__(self, builtins: list[ResourceType], group_order: list[str]) -> None:
        self._group_order = group_order
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._versions: dict[str, list[str]] = {}
        self.generation = 0
        """Bumped on every change, so callers can cache lookups."""
        for rt in builtins:
            self.add(rt)

    def _changed(self) -> None:
        self.generation += 1
        found: dict[str, set[str]] = {}
        for rt in self._types.values():
            found.setdefault(rt.group, set()).add(rt.version)
        self._versions = {g: sorted(vs, key=version_priority) for g, vs in found.items()}

    def add(self, rt: ResourceType) -> None:
        self._types[(rt.group, rt.version, rt.plural)] = rt
        self._changed()

    def remove_storage(self, storage: str) -> None:
        for key, rt in list(self._types.items()):
            if rt.storage == storage:
                del self._types[key]
        self._changed()

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self._types.values())

    def for_storage(self, storage: str) -> ResourceType | None:
        """A resource stored in table ``storage``, preferring one served in the stored shape."""
        candidates = [rt for rt in self._types.values() if rt.storage == storage]
        native = [rt for rt in candidates if rt.view is None]
        chosen = native or candidates
        return chosen[0] if chosen else None

    def versions(self, group: str) -> list[str]:
        """The group's served versions, preferred first (empty when not served)."""
        return self._versions.get(group, [])

    def groups(self) -> list[str]:
        """Groups with at least one resource: built-ins in priority order, then CRD groups."""
        present = {rt.group for rt in self._types.values() if rt.group}
        ordered = [g for g in self._group_order if g in present]
        return ordered + sorted(present - set(ordered))

    def resources(self, group: str, version: str) -> list[ResourceType]:
        found = [rt for rt in self._types.values() if rt.group == group and rt.version == version]
        return sorted(found, key=lambda rt: rt.plural)


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes version order: GA > beta > alpha (higher numbers first), then others."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), version)
