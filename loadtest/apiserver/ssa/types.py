"""The shape server-side apply needs of a type: structs, maps, lists and how they merge.

structured-merge-diff types every position of an object: a *struct* has named fields, a
*map* has keys (its element type for all), a *list* is ``atomic`` (replaced and owned as a
whole), a ``set`` of scalars or a ``map`` of items identified by key fields, and any struct,
map or list can be ``atomic`` (``x-kubernetes-map-type: atomic`` / ``+structType=atomic``).

- Custom resources: ``from_schema`` reads the CRD version's structural schema
  (``properties``, ``additionalProperties``, ``items``, ``x-kubernetes-list-type``,
  ``x-kubernetes-list-map-keys``, ``x-kubernetes-map-type``; key ``default`` values count in
  item keys). Fields kept by ``x-kubernetes-preserve-unknown-fields`` are typed by their value
  (*deduced*): objects are granular maps, lists atomic.
- Built-in types: ``builtin(kind)`` is a deduced struct everywhere (objects granular, lists
  atomic) except where the Kubernetes API types say otherwise; ``_BUILTIN`` lists those
  positions for the kinds the emulator serves (list-map keys such as containers by ``name``,
  container ports by ``containerPort`` + ``protocol`` defaulted to ``TCP``, atomic selectors,
  atomic ownerReferences items and object references, set-type finalizers, the atomic
  ``roleRef`` and ``rules``/``subjects`` of the RBAC kinds...). Other positions
  of built-in objects are deduced structs with atomic lists (tolerations, args...), which
  matches the real types for the fields the emulator knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STRUCT, MAP, LIST, SCALAR = "struct", "map", "list", "scalar"
Path = tuple[str, ...]
ITEM = "[]"  # a list item in a ``_BUILTIN`` path
VALUE = "{}"  # a map value in a ``_BUILTIN`` path


@dataclass(frozen=True, slots=True)
class Type:
    """One position of a type.

    ``kind`` is ``struct``, ``map``, ``list``, ``scalar`` or ``""`` (deduced from the value).
    ``open`` structs type unknown fields as deduced *struct fields* (built-ins); otherwise an
    unknown key is a map element (maps, preserved unknown fields).
    """

    kind: str = ""
    fields: Mapping[str, Type] = field(default_factory=dict)
    elements: Type | None = None
    atomic: bool = False
    list_type: str = "atomic"
    keys: tuple[str, ...] = ()
    key_defaults: Mapping[str, Any] = field(default_factory=dict)
    open: bool = False

    def resolve(self, value: Any) -> Type:
        """This type, or for a deduced one the type its value implies."""
        if self.kind:
            return self
        if isinstance(value, dict):
            return _OPEN_STRUCT if self.open else _DEDUCED_MAP
        if isinstance(value, list):
            return _ATOMIC_LIST
        return _SCALAR

    def child(self, name: str) -> tuple[Type, bool]:
        """The type of a key of this struct or map, and whether it is a named struct field."""
        known = self.fields.get(name)
        if known is not None:
            return known, True
        if self.elements is not None:
            return self.elements, False
        if self.open:
            return _OPEN, True
        return _DEDUCED, False

    def item(self) -> Type:
        return self.elements if self.elements is not None else (_OPEN if self.open else _DEDUCED)

    @property
    def granular(self) -> bool:
        return self.kind in (STRUCT, MAP) and not self.atomic

    @property
    def associative(self) -> bool:
        return self.kind == LIST and not self.atomic and self.list_type in ("map", "set")


_DEDUCED = Type()
_OPEN = Type(open=True)
_DEDUCED_MAP = Type(MAP, elements=_DEDUCED)
_OPEN_STRUCT = Type(STRUCT, open=True)
_ATOMIC_LIST = Type(LIST, atomic=True)
_SCALAR = Type(SCALAR)


def list_map(*keys: str, item: Type = _OPEN, **defaults: Any) -> Type:
    return Type(LIST, elements=item, list_type="map", keys=keys, key_defaults=defaults)


SET = Type(LIST, elements=_SCALAR, list_type="set")
ATOMIC_LIST = _ATOMIC_LIST
ATOMIC = Type(STRUCT, atomic=True, open=True)
ATOMIC_MAP = Type(MAP, atomic=True, elements=_SCALAR)
STRING_MAP = Type(MAP, elements=_SCALAR)


# --- custom resources -------------------------------------------------------------------------


def from_schema(schema: Mapping[str, Any]) -> Type:
    """The type of a custom resource from its ``openAPIV3Schema`` (the root, with metadata)."""
    root = _schema_type(schema)
    fields = {**root.fields, "metadata": _METADATA, "apiVersion": _SCALAR, "kind": _SCALAR}
    return Type(STRUCT, fields=fields, elements=root.elements)


def _schema_type(schema: Mapping[str, Any]) -> Type:
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        return _SCALAR
    if kind == "array":
        items = schema.get("items")
        item = _schema_type(items) if isinstance(items, dict) else _DEDUCED
        list_type = schema.get("x-kubernetes-list-type", "atomic")
        if list_type == "map":
            keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
            props = items.get("properties", {}) if isinstance(items, dict) else {}
            defaults = {
                k: props[k]["default"]
                for k in keys
                if isinstance(props.get(k), dict) and "default" in props[k]
            }
            return Type(LIST, elements=item, list_type="map", keys=keys, key_defaults=defaults)
        if list_type == "set":
            return Type(LIST, elements=item, list_type="set")
        return Type(LIST, elements=item, atomic=True)
    if kind == "object" or "properties" in schema or "additionalProperties" in schema:
        atomic = schema.get("x-kubernetes-map-type") == "atomic"
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if isinstance(props, dict) and props:
            fields = {
                name: _schema_type(sub) for name, sub in props.items() if isinstance(sub, dict)
            }
            elements = _DEDUCED if schema.get("x-kubernetes-preserve-unknown-fields") else None
            return Type(STRUCT, fields=fields, elements=elements, atomic=atomic)
        if isinstance(extra, dict):
            return Type(MAP, elements=_schema_type(extra), atomic=atomic)
        return Type(MAP, elements=_DEDUCED, atomic=atomic)
    if kind:
        return _SCALAR
    return _DEDUCED


# --- built-in types ---------------------------------------------------------------------------


def _tree(overrides: Mapping[Path, Type], prefix: Path = ()) -> Type:
    """An open struct with ``overrides`` at their paths (``ITEM``: list items, ``VALUE``: map
    values); a path's own override keeps the subtree of deeper overrides."""
    own = overrides.get(prefix)
    depth = len(prefix)
    below = {p for p in overrides if len(p) > depth and p[:depth] == prefix}
    names = sorted({p[depth] for p in below})
    fields = {n: _tree(overrides, (*prefix, n)) for n in names if n not in (ITEM, VALUE)}
    if own is None:
        return Type(STRUCT, fields=fields, open=True)
    if own.kind == LIST and ITEM in names:
        return Type(
            LIST,
            elements=_tree(overrides, (*prefix, ITEM)),
            atomic=own.atomic,
            list_type=own.list_type,
            keys=own.keys,
            key_defaults=own.key_defaults,
        )
    if fields:
        return Type(
            own.kind,
            fields={**own.fields, **fields},
            elements=own.elements,
            atomic=own.atomic,
            open=own.open,
        )
    return own


_METADATA_PATHS: dict[Path, Type] = {
    ("labels",): STRING_MAP,
    ("annotations",): STRING_MAP,
    ("ownerReferences",): list_map("uid", item=ATOMIC),  # OwnerReference: structType=atomic
    ("finalizers",): SET,
}
_METADATA = _tree(_METADATA_PATHS)
_CONDITIONS: dict[Path, Type] = {("status", "conditions"): list_map("type")}


def _pod_spec(prefix: Path) -> dict[Path, Type]:
    paths: dict[Path, Type] = {}
    for name in ("containers", "initContainers", "ephemeralContainers"):
        paths[(*prefix, name)] = list_map("name")
        container = (*prefix, name, ITEM)
        paths[(*container, "ports")] = list_map("containerPort", "protocol", protocol="TCP")
        paths[(*container, "env")] = list_map("name")
        paths[(*container, "volumeMounts")] = list_map("mountPath")
        paths[(*container, "volumeDevices")] = list_map("devicePath")
        paths[(*container, "resources", "limits")] = STRING_MAP
        paths[(*container, "resources", "requests")] = STRING_MAP
    for name, keys in (
        ("volumes", ("name",)),
        ("imagePullSecrets", ("name",)),
        ("hostAliases", ("ip",)),
        ("topologySpreadConstraints", ("topologyKey", "whenUnsatisfiable")),
        ("resourceClaims", ("name",)),
        ("schedulingGates", ("name",)),
    ):
        paths[(*prefix, name)] = list_map(*keys)
    paths[(*prefix, "nodeSelector")] = ATOMIC_MAP
    return paths


def _template(prefix: Path) -> dict[Path, Type]:
    meta = {(*prefix, "metadata", *p): t for p, t in _METADATA_PATHS.items()}
    return {**meta, **_pod_spec((*prefix, "spec"))}


_WORKLOAD = {**_CONDITIONS, ("spec", "selector"): ATOMIC, **_template(("spec", "template"))}

_BUILTIN: dict[str, dict[Path, Type]] = {
    "Pod": {
        **_CONDITIONS,
        **_pod_spec(("spec",)),
        ("status", "podIPs"): list_map("ip"),
        ("status", "hostIPs"): list_map("ip"),
    },
    "PodTemplate": _template(("template",)),
    "Deployment": _WORKLOAD,
    "ReplicaSet": _WORKLOAD,
    "StatefulSet": _WORKLOAD,
    "DaemonSet": _WORKLOAD,
    "Job": _WORKLOAD,
    "CronJob": _template(("spec", "jobTemplate", "spec", "template")),
    "Service": {
        **_CONDITIONS,
        ("spec", "ports"): list_map("port", "protocol", protocol="TCP"),
        ("spec", "selector"): ATOMIC_MAP,
    },
    "Namespace": _CONDITIONS,
    "PersistentVolumeClaim": _CONDITIONS,
    "CustomResourceDefinition": _CONDITIONS,
    "ServiceAccount": {("secrets",): list_map("name")},
    "ConfigMap": {("data",): STRING_MAP, ("binaryData",): STRING_MAP},
    # core and events.k8s.io Events (ObjectReference is structType=atomic)
    "Event": {("involvedObject",): ATOMIC, ("regarding",): ATOMIC, ("related",): ATOMIC},
    "Secret": {("data",): STRING_MAP, ("stringData",): STRING_MAP},
    # rbac.authorization.k8s.io: rules, subjects and selectors are listType=atomic,
    # RoleRef is structType=atomic
    "Role": {("rules",): ATOMIC_LIST},
    "ClusterRole": {
        ("rules",): ATOMIC_LIST,
        ("aggregationRule", "clusterRoleSelectors"): ATOMIC_LIST,
    },
    "RoleBinding": {("roleRef",): ATOMIC, ("subjects",): ATOMIC_LIST},
    "ClusterRoleBinding": {("roleRef",): ATOMIC, ("subjects",): ATOMIC_LIST},
    # the create-only answers that echo their request (and its managedFields)
    "TokenRequest": {("spec", "audiences"): ATOMIC_LIST},
    "SubjectAccessReview": {("spec", "groups"): ATOMIC_LIST},
    "LocalSubjectAccessReview": {("spec", "groups"): ATOMIC_LIST},
}
_BUILTIN_TYPES: dict[str, Type] = {}


def builtin(kind: str) -> Type:
    """The type of a built-in kind (a deduced open struct for kinds without a table)."""
    found = _BUILTIN_TYPES.get(kind)
    if found is None:
        paths = {("metadata", *p): t for p, t in _METADATA_PATHS.items()}
        paths.update(_BUILTIN.get(kind, {}))
        found = _BUILTIN_TYPES[kind] = _tree(paths)
    return found
