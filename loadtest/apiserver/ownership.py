"""Who wrote what: the ``managedFields`` of a write, between the endpoints and ``ssa.managed``.

- ``manager_name(field_manager, user_agent)``: the request's ``fieldManager``, else the
  User-Agent up to its first ``/`` (as kube-apiserver names non-apply managers).
- ``validate_field_manager``: at most 128 bytes, printable characters (422 on
  ``CreateOptions``/``UpdateOptions``/``PatchOptions``); required for apply patches.
- ``FieldOwner``: handed to ``Objects.create``/``store`` for a write. An Update owner computes
  the entry of its manager from the stored and the new object; an apply owner carries the
  managedFields its apply computed. Writes made without an owner (the emulator's own
  controllers, ``/scale``) keep the stored managedFields.
- ``scope(rt, subresource)``: the type (CRD schema or built-in table) and endpoint of a write.
- ``zero(rt)``: the empty object of a kind as the API server's typed conversion writes it
  (non-pointer structs present even when empty, nil slices and zero times as ``null``, other
  fields omitted), the "before" of a create: fields the create fills in those present places
  are owned without being members themselves. Kinds without an entry (ConfigMaps, Secrets...
  whose zero value has no such places) start from ``{"metadata": {}}``.
- ``FieldOwner.created_fields``: the managedFields a create records, for the create-only
  endpoints whose answer echoes the request (TokenRequest, the access reviews).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from loadtest.apiserver import errors, timefmt
from loadtest.apiserver.registry import ResourceType
from loadtest.apiserver.ssa import managed
from loadtest.apiserver.ssa.types import Type, builtin, from_schema
from proto.api.validation import ErrorType, FieldError

MAX_MANAGER_LENGTH = 128

_TEMPLATE: dict[str, Any] = {"metadata": {}, "spec": {"containers": None}}
_ZERO: dict[str, dict[str, Any]] = {
    "Namespace": {"spec": {}, "status": {}},
    "CustomResourceDefinition": {
        "spec": {
            "group": "",
            "names": {"plural": "", "kind": ""},
            "scope": "",
            "versions": None,
        },
        "status": {
            "conditions": None,
            "acceptedNames": {"plural": "", "kind": ""},
            "storedVersions": None,
        },
    },
    "Pod": {"spec": {"containers": None}, "status": {}},
    "Service": {"spec": {}, "status": {"loadBalancer": {}}},
    "Deployment": {
        "spec": {"selector": None, "template": _TEMPLATE, "strategy": {}},
        "status": {},
    },
    "ReplicaSet": {"spec": {"selector": None, "template": _TEMPLATE}, "status": {"replicas": 0}},
    "StatefulSet": {
        "spec": {"selector": None, "template": _TEMPLATE, "updateStrategy": {}},
        "status": {"replicas": 0, "availableReplicas": 0},
    },
    "DaemonSet": {
        "spec": {"selector": None, "template": _TEMPLATE, "updateStrategy": {}},
        "status": {
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        },
    },
    "Job": {"spec": {"template": _TEMPLATE}, "status": {}},
    "CronJob": {
        "spec": {"schedule": "", "jobTemplate": {"metadata": {}, "spec": {"template": _TEMPLATE}}},
        "status": {},
    },
    "PersistentVolumeClaim": {"spec": {"resources": {}}, "status": {}},
    "Role": {"rules": None},
    "ClusterRole": {"rules": None},
    "RoleBinding": {"roleRef": {"apiGroup": "", "kind": "", "name": ""}},
    "ClusterRoleBinding": {"roleRef": {"apiGroup": "", "kind": "", "name": ""}},
    "Lease": {"spec": {}},
    "TokenRequest": {
        "spec": {"audiences": None},
        "status": {"token": "", "expirationTimestamp": None},
    },
    "SelfSubjectAccessReview": {"spec": {}, "status": {"allowed": False}},
    "SubjectAccessReview": {"spec": {}, "status": {"allowed": False}},
    "LocalSubjectAccessReview": {"spec": {}, "status": {"allowed": False}},
    "Event": {
        "involvedObject": {},
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "eventTime": None,
        "reportingComponent": "",
        "reportingInstance": "",
    },
}


_VIEW_ZERO: dict[tuple[str, str], dict[str, Any]] = {
    ("events.k8s.io", "Event"): {
        "deprecatedSource": {},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    },
}


def zero(rt: ResourceType) -> dict[str, Any]:
    """The empty object of ``rt`` in the shape it is served."""
    if rt.view is not None:
        return {"metadata": {}, **copy.deepcopy(_VIEW_ZERO.get((rt.group, rt.kind), {}))}
    return {"metadata": {}, **copy.deepcopy(_ZERO.get(rt.kind, {}))}


def manager_name(field_manager: str | None, user_agent: str) -> str:
    if field_manager:
        return field_manager
    return user_agent.split("/", 1)[0]


def validate_field_manager(value: str | None, *, options: str, apply: bool) -> None:
    """``ValidateFieldManager`` (and apply's requirement): 422 on the request's options."""
    problems = []
    if apply and not value:
        problems.append(
            FieldError(ErrorType.REQUIRED, "fieldManager", "is required for apply patch")
        )
    value = value or ""
    if len(value.encode()) > MAX_MANAGER_LENGTH:
        problems.append(
            FieldError(
                ErrorType.TOO_LONG,
                "fieldManager",
                f"may not be more than {MAX_MANAGER_LENGTH} bytes",
            )
        )
    problems.extend(
        FieldError(
            ErrorType.INVALID,
            "fieldManager",
            f"invalid character U+{ord(char):04X} (at position {index})",
            value,
        )
        for index, char in enumerate(value)
        if not char.isprintable()
    )
    if problems:
        raise errors.invalid_options(options, problems)


def object_type(rt: ResourceType) -> Type:
    schema = getattr(rt.behaviour, "schema", None)
    if rt.custom and isinstance(schema, dict):
        return from_schema(schema)
    return builtin(rt.kind)


def scope(rt: ResourceType, subresource: str) -> managed.Scope:
    return managed.Scope(
        type=object_type(rt),
        api_version=rt.api_version,
        subresource=subresource,
        has_status=rt.status,
    )


@dataclass(frozen=True, slots=True)
class FieldOwner:
    """The manager of one write; ``entries`` set: the managedFields an apply computed."""

    manager: str
    subresource: str = ""
    entries: list[dict[str, Any]] | None = None
    applied: bool = False

    def record(self, rt: ResourceType, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """Set ``new``'s managedFields for this write over ``old`` (None: a create)."""
        meta = new["metadata"]
        if self.applied:
            fields = self.entries
        else:
            seen = new
            if rt.view is not None:  # ownership is recorded in the shape the client wrote
                old = rt.view.from_storage(old) if old is not None else None
                seen = rt.view.from_storage(seen)
            fields = managed.update(
                old,
                seen,
                manager=self.manager,
                scope=scope(rt, self.subresource),
                now=timefmt.now(),
                zero=lambda: zero(rt),
            )
        meta.pop("managedFields", None)
        if fields:
            meta["managedFields"] = fields

    def created_fields(self, rt: ResourceType, obj: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The managedFields a create of ``obj`` (as decoded and defaulted) records, without
        storing anything: for endpoints that answer with the request object (None: none)."""
        seen = copy.deepcopy(obj)
        meta = seen.get("metadata")
        seen["metadata"] = dict(meta) if isinstance(meta, dict) else {}
        self.record(rt, None, seen)
        fields: list[dict[str, Any]] | None = seen["metadata"].get("managedFields")
        return fields


def keep_stored(old: dict[str, Any], new: dict[str, Any]) -> None:
    """A write without an owner keeps the stored managedFields."""
    meta = new["metadata"]
    stored = old["metadata"].get("managedFields")
    meta.pop("managedFields", None)
    if stored is not None:
        meta["managedFields"] = stored
