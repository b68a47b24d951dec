"""What an operator asks of metashard through annotations, beyond Metacontroller: pause a
parent's syncs, or sync it now. Both are metashard's own (``metashard.io/``); an object
without them is synced as Metacontroller syncs it.

- ``metashard.io/paused`` (``PAUSED``), on a parent or on a CompositeController or
  DecoratorController: ``"true"`` stops the syncs of that parent, or of every parent of that
  controller (no hook call, no write; a parent being deleted is still finalized); ``"false"``
  or no annotation: not paused. Any other value is a problem to report (``Pause.problem``,
  naming the value), and the default applies: not paused. Exactly ``"true"`` and ``"false"``,
  as crossplane-runtime's ``crossplane.io/paused`` reads its value.
- ``metashard.io/sync-requested-at`` (``SYNC_REQUESTED_AT``), on a parent or a controller
  object: any change of its value asks for a sync at once (of that parent, or of every
  parent of that controller). The value is opaque: ``metashard sync`` writes the time of the
  request (``request_stamp``, RFC 3339 with microseconds, so two requests within one second
  differ), but whatever changes it counts, and no value is wrong.

Pure: ``annotations_of`` reads an object's annotations, ``pause_of`` and ``sync_requested``
read them.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

PAUSED: Final = "metashard.io/paused"
SYNC_REQUESTED_AT: Final = "metashard.io/sync-requested-at"


@dataclass(frozen=True, slots=True)
class Pause:
    """Whether an object's syncs are paused, and what was wrong with its annotation, if
    anything (then ``paused`` is the default, False)."""

    paused: bool = False
    problem: str | None = None


NOT_PAUSED = Pause()
PAUSED_NOW = Pause(paused=True)


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata.annotations`` of a decoded object; empty when it has none (or not a map)."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def pause_of(annotations: Mapping[str, Any]) -> Pause:
    """What ``metashard.io/paused`` says (module docstring)."""
    value = annotations.get(PAUSED)
    if value is None or value == "false":
        return NOT_PAUSED
    if value == "true":
        return PAUSED_NOW
    return Pause(
        problem=f'annotation {PAUSED}: {value!r} is neither "true" nor "false"; not paused'
    )


def sync_requested(annotations: Mapping[str, Any]) -> str | None:
    """The value of ``metashard.io/sync-requested-at``, if any (compare it, never parse it)."""
    value = annotations.get(SYNC_REQUESTED_AT)
    return value if isinstance(value, str) else None


def request_stamp(now: datetime.datetime) -> str:
    """The value ``metashard sync`` writes: ``now`` as RFC 3339 in UTC, with microseconds
    (``2026-11-27T20:35:00.123456Z``)."""
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
