"""What a sync or finalize answer may report about its parent: ``events`` and ``conditions``.

metashard's addition to the hook contract (Metacontroller #249; Crossplane composition
functions return both). Both fields are optional; a hook that sends neither sees no change.

- ``events``: ``[{type, reason, message}]``, Events to put on the parent. ``type`` is
  ``Normal`` or ``Warning``; ``reason`` a non-empty string of at most 128 characters (the
  limit of ``events.k8s.io``); ``message`` a string (absent: empty), cut at 1024 characters.
  At most ``MAX_EVENTS`` entries per answer are read (kept or named as malformed); the rest
  are ignored, with one problem saying so.
- ``conditions``: ``[{type, status, reason, message, observedGeneration, lastTransitionTime}]``,
  as ``metav1.Condition`` validates them: ``type`` a qualified name (``Ready``,
  ``example.com/Synced``), ``status`` ``True``, ``False`` or ``Unknown``, ``reason`` CamelCase
  (``^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$``, at most 1024 characters), ``message`` a
  string of at most 32768 characters (absent: empty), ``observedGeneration`` an integer >= 0
  (absent: left out), ``lastTransitionTime`` an RFC 3339 time (absent: the workers set it).
  A type may appear once.

``read_reports(top)`` reads both from a decoded answer. Unlike the rest of an answer, a
malformed entry does not refuse the answer: it is left out and described in
``Reports.problems`` (``events[1].type: must be Normal or Warning, not "Info"``), for the
caller to report; the other entries, and the rest of the answer, still apply. Unknown and
duplicate fields inside an entry are decoding issues like any other (``EVENTS_SHAPE``,
``CONDITIONS_SHAPE``): they refuse a ``strict`` answer and are logged for a ``loose`` one.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proto.api import names
from proto.api.decoding import FREE, Items, Struct
from proto.api.fields import Fields, join, json_type

MAX_EVENTS = 16
"""Events one answer may carry; the rest are left out (a problem)."""
EVENT_REASON_MAX = 128
EVENT_MESSAGE_MAX = 1024
CONDITION_REASON_MAX = 1024
CONDITION_MESSAGE_MAX = 32768
CONDITION_STATUSES = ("True", "False", "Unknown")

EVENTS_SHAPE = Items(Struct({"type": FREE, "reason": FREE, "message": FREE}))
CONDITIONS_SHAPE = Items(
    Struct(
        {
            "type": FREE,
            "status": FREE,
            "reason": FREE,
            "message": FREE,
            "observedGeneration": FREE,
            "lastTransitionTime": FREE,
        }
    )
)

# metav1.Condition's validation (apimachinery's ValidateConditions).
_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
_QUALIFIED_NAME_MAX = 316  # a 253-character prefix, a slash and a 63-character name
_CONDITION_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


@dataclass(frozen=True, slots=True)
class HookEvent:
    """An Event the hook asks for on its parent."""

    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Condition:
    """A condition the hook sets on its parent (``lastTransitionTime`` as the hook gave it)."""

    type: str
    status: str
    reason: str
    message: str
    observed_generation: int | None = None
    last_transition_time: str | None = None


@dataclass(frozen=True, slots=True)
class Reports:
    """The valid events and conditions of one answer, and what was wrong with the others."""

    events: tuple[HookEvent, ...] = ()
    conditions: tuple[Condition, ...] = ()
    problems: tuple[str, ...] = ()
    """One line per entry left out, naming its field."""

    def with_problem(self, problem: str | None) -> Reports:
        """These reports with ``problem`` too, another field's that does not refuse the
        answer either (``proto.api.ttl``); themselves for None."""
        if problem is None:
            return self
        return dataclasses.replace(self, problems=(*self.problems, problem))


NO_REPORTS = Reports()


class _Malformed(Exception):
    """One entry cannot be used; the message names the field."""


def read_reports(top: Fields) -> Reports:
    """The ``events`` and ``conditions`` of a decoded answer (see the module docstring)."""
    problems: list[str] = []
    events: list[HookEvent] = []
    for index, (path, item) in enumerate(_entries(top, "events", problems)):
        if index == MAX_EVENTS:
            problems.append(f"{path}: at most {MAX_EVENTS} events per answer, the rest are ignored")
            break
        try:
            events.append(_event(item, path))
        except _Malformed as err:
            problems.append(str(err))
    conditions: dict[str, Condition] = {}
    for path, item in _entries(top, "conditions", problems):
        try:
            condition = _condition(item, path)
        except _Malformed as err:
            problems.append(str(err))
            continue
        if condition.type in conditions:
            problems.append(f"{path}.type: {condition.type!r} appears more than once")
            continue
        conditions[condition.type] = condition
    return Reports(tuple(events), tuple(conditions.values()), tuple(problems))


def _entries(top: Fields, key: str, problems: list[str]) -> list[tuple[str, Any]]:
    value = top.obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(f"{key}: must be an array, not {json_type(value)}")
        return []
    return [(join(key, i), item) for i, item in enumerate(value)]


def _object(item: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise _Malformed(f"{path}: must be an object, not {json_type(item)}")
    return item


def _string(entry: Mapping[str, Any], path: str, key: str, *, required: bool) -> str:
    value = entry.get(key)
    if value is None:
        if required:
            raise _Malformed(f"{join(path, key)}: required")
        return ""
    if not isinstance(value, str):
        raise _Malformed(f"{join(path, key)}: must be a string, not {json_type(value)}")
    if required and not value:
        raise _Malformed(f"{join(path, key)}: must not be empty")
    return value


def _one_of(value: str, allowed: tuple[str, ...], path: str) -> str:
    if value not in allowed:
        raise _Malformed(f"{path}: must be {_alternatives(allowed)}, not {value!r}")
    return value


def _alternatives(allowed: tuple[str, ...]) -> str:
    return ", ".join(allowed[:-1]) + " or " + allowed[-1]


def _event(item: Any, path: str) -> HookEvent:
    entry = _object(item, path)
    kind = _string(entry, path, "type", required=True)
    _one_of(kind, (names.EVENT_TYPE_NORMAL, names.EVENT_TYPE_WARNING), join(path, "type"))
    reason = _string(entry, path, "reason", required=True)
    if len(reason) > EVENT_REASON_MAX:
        raise _Malformed(f"{join(path, 'reason')}: longer than {EVENT_REASON_MAX} characters")
    message = _string(entry, path, "message", required=False)
    return HookEvent(kind, reason, message[:EVENT_MESSAGE_MAX])


def _condition(item: Any, path: str) -> Condition:
    entry = _object(item, path)
    kind = _string(entry, path, "type", required=True)
    if len(kind) > _QUALIFIED_NAME_MAX or not _QUALIFIED_NAME.match(kind):
        raise _Malformed(
            f"{join(path, 'type')}: {kind!r} is not a qualified name (like Ready or "
            "example.com/Synced)"
        )
    status = _one_of(
        _string(entry, path, "status", required=True), CONDITION_STATUSES, join(path, "status")
    )
    reason = _string(entry, path, "reason", required=True)
    if len(reason) > CONDITION_REASON_MAX or not _CONDITION_REASON.match(reason):
        raise _Malformed(
            f"{join(path, 'reason')}: {reason!r} must be CamelCase (letters, digits, _ , :; "
            f"starting with a letter), at most {CONDITION_REASON_MAX} characters"
        )
    message = _string(entry, path, "message", required=False)
    if len(message) > CONDITION_MESSAGE_MAX:
        raise _Malformed(f"{join(path, 'message')}: longer than {CONDITION_MESSAGE_MAX} characters")
    generation = entry.get("observedGeneration")
    if generation is not None and (
        isinstance(generation, bool) or not isinstance(generation, int) or generation < 0
    ):
        raise _Malformed(
            f"{join(path, 'observedGeneration')}: must be an integer >= 0, not "
            f"{json_type(generation) if not isinstance(generation, int) else generation}"
        )
    since = entry.get("lastTransitionTime")
    if since is not None and not _rfc3339(since):
        raise _Malformed(
            f"{join(path, 'lastTransitionTime')}: must be an RFC 3339 time (2006-01-02T15:04:05Z)"
        )
    return Condition(kind, status, reason, message, generation, since)


def _rfc3339(value: Any) -> bool:
    if not isinstance(value, str) or "T" not in value.upper():
        return False
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return False
    return parsed.tzinfo is not None
