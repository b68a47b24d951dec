"""Events: core/v1 storage, the events.k8s.io/v1 view, and the Event validation rules.

- Events are stored in the core/v1 shape. ``EventsView`` converts an ``events.k8s.io/v1``
  body to it (``regarding`` -> ``involvedObject``, ``note`` -> ``message``, ``deprecated*`` ->
  ``source``/``firstTimestamp``/``lastTimestamp``/``count``, ``reportingController`` ->
  ``reportingComponent``) and back, as the real conversion does.
- ``EventKind(request_version)`` validates like ``ValidateEventCreate/Update``: the legacy
  rules for every request, the strict ones only for ``events.k8s.io/v1`` requests.
- Time fields are re-written canonically (``Time`` whole seconds, ``MicroTime`` 6 digits).
"""

from __future__ import annotations

from typing import Any

from loadtest.apiserver.kinds import validate_meta
from loadtest.apiserver.schema import (
    INT32,
    MICROTIME,
    STRING,
    TIME,
    Field,
    Struct,
    top,
)
from proto.api import validation as v
from proto.api.validation import ErrorType, FieldError

OBJECT_REFERENCE = Struct(
    "ObjectReference",
    {
        name: Field(STRING)
        for name in (
            "kind",
            "namespace",
            "name",
            "uid",
            "apiVersion",
            "resourceVersion",
            "fieldPath",
        )
    },
)
EVENT_SOURCE = Struct("EventSource", {"component": Field(STRING), "host": Field(STRING)})
EVENT_SERIES = Struct(
    "EventSeries",
    {"count": Field(INT32, zero=True), "lastObservedTime": Field(MICROTIME, omitempty=False)},
)

CORE_EVENT = top(
    "Event",
    {
        "involvedObject": Field(OBJECT_REFERENCE, omitempty=False),
        "reason": Field(STRING),
        "message": Field(STRING),
        "source": Field(EVENT_SOURCE, omitempty=False),
        "firstTimestamp": Field(TIME, omitempty=False),
        "lastTimestamp": Field(TIME, omitempty=False),
        "count": Field(INT32, zero=True),
        "type": Field(STRING),
        "eventTime": Field(MICROTIME, omitempty=False),
        "series": Field(EVENT_SERIES),
        "action": Field(STRING),
        "related": Field(OBJECT_REFERENCE),
        "reportingComponent": Field(STRING, omitempty=False),
        "reportingInstance": Field(STRING, omitempty=False),
    },
)
NEW_EVENT = top(
    "Event",
    {
        "eventTime": Field(MICROTIME, omitempty=False),
        "series": Field(EVENT_SERIES),
        "reportingController": Field(STRING),
        "reportingInstance": Field(STRING),
        "action": Field(STRING),
        "reason": Field(STRING),
        "regarding": Field(OBJECT_REFERENCE, omitempty=False),
        "related": Field(OBJECT_REFERENCE),
        "note": Field(STRING),
        "type": Field(STRING),
        "deprecatedSource": Field(EVENT_SOURCE, omitempty=False),
        "deprecatedFirstTimestamp": Field(TIME, omitempty=False),
        "deprecatedLastTimestamp": Field(TIME, omitempty=False),
        "deprecatedCount": Field(INT32, zero=True),
    },
)

# core field <- events.k8s.io field, in core/v1 serialization order
_CORE_ORDER: tuple[tuple[str, str, Any], ...] = (
    ("involvedObject", "regarding", {}),
    ("reason", "reason", None),
    ("message", "note", None),
    ("source", "deprecatedSource", {}),
    ("firstTimestamp", "deprecatedFirstTimestamp", "null"),
    ("lastTimestamp", "deprecatedLastTimestamp", "null"),
    ("count", "deprecatedCount", None),
    ("type", "type", None),
    ("eventTime", "eventTime", "null"),
    ("series", "series", None),
    ("action", "action", None),
    ("related", "related", None),
    ("reportingComponent", "reportingController", ""),
    ("reportingInstance", "reportingInstance", ""),
)
_NEW_ORDER = (
    "eventTime",
    "series",
    "reportingController",
    "reportingInstance",
    "action",
    "reason",
    "regarding",
    "related",
    "note",
    "type",
    "deprecatedSource",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
    "deprecatedCount",
)
_NEW_ALWAYS: dict[str, Any] = {
    "eventTime": None,
    "regarding": {},
    "deprecatedSource": {},
    "deprecatedFirstTimestamp": None,
    "deprecatedLastTimestamp": None,
}


def _fill(default: Any) -> Any:
    return None if default == "null" else (dict(default) if isinstance(default, dict) else default)


def normalize_core(obj: dict[str, Any]) -> dict[str, Any]:
    """The core/v1 Event in serialization order, always-present fields filled in."""
    out: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": obj.get("metadata") or {},
    }
    for core, _, default in _CORE_ORDER:
        if core in obj and obj[core] is not None:
            out[core] = obj[core]
        elif default is not None:
            out[core] = _fill(default)
    return out


class EventsView:
    """events.k8s.io/v1 <-> core/v1 Event."""

    def to_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        core: dict[str, Any] = {"metadata": obj.get("metadata") or {}}
        for core_name, new_name, _ in _CORE_ORDER:
            if new_name in obj:
                core[core_name] = obj[new_name]
        return normalize_core(core)

    def from_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        new: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": "events.k8s.io/v1",
            "metadata": obj["metadata"],
        }
        mapped = {new_name: obj.get(core) for core, new_name, _ in _CORE_ORDER}
        for name in _NEW_ORDER:
            value = mapped.get(name)
            if name in _NEW_ALWAYS:
                new[name] = _NEW_ALWAYS[name] if value is None else value
            elif value not in (None, "", 0, {}):
                new[name] = value
        if not new["regarding"]:
            new["regarding"] = {}
        return new


def _required(field: str) -> FieldError:
    return FieldError(ErrorType.REQUIRED, field, "")


def _too_long(field: str, limit: int) -> FieldError:
    return FieldError(ErrorType.INVALID, field, f"can have at most {limit} characters", "")


def _legacy(event: dict[str, Any], core_request: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    namespace = event["metadata"].get("namespace", "")
    involved = (event.get("involvedObject") or {}).get("namespace", "")
    reporting_field = "reportingComponent" if core_request else "reportingController"
    mismatch = FieldError(
        ErrorType.INVALID, "involvedObject.namespace", "does not match event.namespace", involved
    )
    if event.get("eventTime") is None:
        if (not involved and namespace not in ("", "default")) or (
            involved and namespace != involved
        ):
            errors.append(mismatch)
    else:
        if not involved and namespace not in ("default", "kube-system"):
            errors.append(mismatch)
        controller = event.get("reportingComponent", "")
        if not controller:
            errors.append(_required(reporting_field))
        errors.extend(
            FieldError(ErrorType.INVALID, reporting_field, m, controller)
            for m in (v.is_qualified_name(controller) if controller else [])
        )
        for name, limit in (("reportingInstance", 128), ("action", 128), ("reason", 128)):
            value = event.get(name, "")
            if not value:
                errors.append(_required(name))
            elif len(value) > limit:
                errors.append(_too_long(name, limit))
        if len(event.get("message", "")) > 1024:
            errors.append(_too_long("message", 1024))
    errors.extend(
        FieldError(ErrorType.INVALID, "namespace", m, namespace)
        for m in (v.is_dns1123_subdomain(namespace) if namespace else [])
    )
    return errors


def _series(event: dict[str, Any]) -> list[FieldError]:
    series = event.get("series")
    if series is None:
        return []
    errors = []
    if int(series.get("count") or 0) < 2:
        errors.append(FieldError(ErrorType.INVALID, "series.count", "should be at least 2", ""))
    if series.get("lastObservedTime") is None:
        errors.append(_required("series.lastObservedTime"))
    return errors


_IMMUTABLE = (
    "involvedObject",
    "reason",
    "message",
    "source",
    "firstTimestamp",
    "lastTimestamp",
    "count",
    "type",
)


class EventKind:
    """Event behaviour for one request API version (``v1`` or ``events.k8s.io/v1``)."""

    def __init__(self, *, core: bool) -> None:
        self.core = core

    def decode(self, obj: dict[str, Any]) -> list[str]:
        unknown = (CORE_EVENT if self.core else NEW_EVENT).decode(obj)
        if self.core:
            normalized = normalize_core(obj)
            obj.clear()
            obj.update(normalized)
        return unknown

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        return None

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errors = _legacy(obj, self.core)
        if self.core:
            return errors
        if old is None:
            errors.extend(validate_meta(obj, v.is_dns1123_subdomain))
            errors.extend(_series(obj))
            if obj.get("eventTime") is None:
                errors.append(_required("eventTime"))
            if obj.get("type") not in ("Normal", "Warning"):
                errors.append(
                    FieldError(
                        ErrorType.INVALID, "type", f"has invalid value: {obj.get('type', '')}", ""
                    )
                )
            for name in ("firstTimestamp", "lastTimestamp", "count"):
                if obj.get(name):
                    errors.append(FieldError(ErrorType.INVALID, name, "needs to be unset", ""))
            if any((obj.get("source") or {}).values()):
                errors.append(FieldError(ErrorType.INVALID, "source", "needs to be unset", ""))
            return errors
        if obj.get("series") != old.get("series"):
            errors.extend(_series(obj))
        for name in _IMMUTABLE:
            if obj.get(name) != old.get(name):
                errors.append(
                    FieldError(ErrorType.INVALID, name, "field is immutable", obj.get(name))
                )
        return errors


def selectable_fields(event: dict[str, Any]) -> dict[str, str]:
    """The field-selector values of a (core-shaped) Event."""
    involved = event.get("involvedObject") or {}
    fields = {f"involvedObject.{k}": str(involved.get(k, "")) for k in OBJECT_REFERENCE.fields}
    source = (event.get("source") or {}).get("component") or event.get("reportingComponent", "")
    fields.update(
        reason=event.get("reason", ""),
        reportingComponent=event.get("reportingComponent", ""),
        source=source,
        type=event.get("type", ""),
    )
    return fields


NEW_FIELD_ALIASES = {
    **{f"regarding.{k}": f"involvedObject.{k}" for k in OBJECT_REFERENCE.fields},
    "reason": "reason",
    "reportingController": "reportingComponent",
    "type": "type",
}
