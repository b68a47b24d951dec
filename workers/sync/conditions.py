"""A hook's ``conditions`` merged into the status a sync writes. Pure.

``merged(status, wanted, observed=..., now=...)`` is ``status`` (what the kind is about to
write: a CompositeController's hook status with ``observedGeneration``; a decorator's) with
each condition of ``wanted`` (``proto.api.reports``) set in ``status.conditions`` by type, as
apimachinery's ``meta.SetStatusCondition`` sets it:

- a condition of the same type already in ``status.conditions`` is replaced in place; others
  are kept, and new types are appended in the hook's order;
- ``lastTransitionTime`` is the parent's (``observed``: its status as read) when the parent
  has a condition of that type with the same ``status`` and a transition time; otherwise the
  hook's own, else ``now``. So a hook that answers the same condition on every sync leaves
  the status as it is, and the sync writes nothing;
- the written condition always has ``type``, ``status``, ``reason``, ``message`` (``""``
  when the hook gave none) and ``lastTransitionTime``, and ``observedGeneration`` when the
  hook gave one.

``status`` is not modified; with no ``wanted`` it is returned as it is.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from proto.api.reports import Condition


def merged(
    status: Mapping[str, Any], wanted: Sequence[Condition], *, observed: Any, now: str
) -> dict[str, Any]:
    if not wanted:
        return dict(status)
    previous = _by_type(observed.get("conditions") if isinstance(observed, Mapping) else None)
    current = status.get("conditions")
    items: list[Any] = list(current) if isinstance(current, list) else []
    index = {
        item.get("type"): i
        for i, item in reversed(list(enumerate(items)))
        if isinstance(item, Mapping)
    }
    for condition in wanted:
        written = _written(condition, previous.get(condition.type), now)
        at = index.get(condition.type)
        if at is None:
            index[condition.type] = len(items)
            items.append(written)
        else:
            items[at] = written
    return {**status, "conditions": items}


def timestamp(seconds: float) -> str:
    """``seconds`` since the epoch as a ``metav1.Time`` (RFC 3339, whole seconds, UTC)."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _by_type(conditions: Any) -> dict[str, Mapping[str, Any]]:
    if not isinstance(conditions, list):
        return {}
    found: dict[str, Mapping[str, Any]] = {}
    for item in conditions:
        if isinstance(item, Mapping) and isinstance(item.get("type"), str):
            found.setdefault(item["type"], item)
    return found


def _written(condition: Condition, before: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    since = condition.last_transition_time or now
    if before is not None and before.get("status") == condition.status:
        kept = before.get("lastTransitionTime")
        if isinstance(kept, str) and kept:
            since = kept
    written: dict[str, Any] = {
        "type": condition.type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastTransitionTime": since,
    }
    if condition.observed_generation is not None:
        written["observedGeneration"] = condition.observed_generation
    return written
