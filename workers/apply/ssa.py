"""Server-side apply of children: the apply body, the comparisons and the update planner.

Under ``--apply-strategy server-side-apply`` a desired child is not merged here: it is sent to
the API server as an apply patch, and the server merges it by the field ownership it records
in ``managedFields``. What stays on this side, as pure functions over JSON-decoded values:

- ``apply_body(desired, controller)``: the desired child as applied: the controller
  ownerReference appended (unless one with the parent's uid is there), without the system
  metadata (``SYSTEM_FIELDS``: uid, resourceVersion, generation, creationTimestamp,
  deletionTimestamp, deletionGracePeriodSeconds, managedFields, selfLink), without ``status``
  and without the last-applied annotation of dynamic apply (an annotations map left empty
  is removed).
- ``sanitized(obj)``: an object as compared: without the system metadata and ``status``.
  A dry-run result and an observed object that are equal once sanitized mean the apply would
  change nothing that the comparison cares about.
- ``covers(current, desired)``: whether every field the desired child sets holds in
  ``current`` (maps: key by key; lists: the desired items match, in order, a subsequence of
  the current ones, so items an admission plugin added do not count as a difference).
  A rollout asks this to know whether a child is "already updated" under SSA.
- ``holds_metadata(observed, body)``: ``covers`` for the metadata of an apply body. A cache
  hit counts only when it holds: a label or annotation someone removed or changed moves
  neither the uid nor the generation the cache is keyed by.
- ``plan_update(...)``: what to do with an existing child (``Step``), per update method,
  as Metacontroller's ``ServerSideApply.Apply`` decides:

  ============================  =====================================================
  child being deleted           SKIP (a child pending deletion is never updated)
  ``OnDelete``                  SKIP: an existing child is never patched
  cache hit (same body, uid,    SKIP: the last apply of this body is still current
  generation/resourceVersion,
  body's metadata held)
  ``InPlace``, ``RollingIn…``   APPLY
  ``Recreate``, ``RollingRe…``  without a dry-run result: DRY_RUN; a dry run of a newer
                                child than observed (its resourceVersion differs): STALE;
                                sanitized dry run equal to sanitized observed: SKIP;
                                different only in the ``in_place_labels``: APPLY (the
                                ``controller-revision-hash`` label never recreates a
                                child); otherwise RECREATE
  ============================  =====================================================

  STALE is metashard's: a dry run answers with the server's current object (its
  resourceVersion unchanged), so a child someone changed after the snapshot would look
  different and be recreated for a change that is not ours; the next sync sees it.

Invariants: inputs are never mutated; a sanitized object or an apply body shares unchanged
subtrees with its input (treat results as read-only).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from proto.api.controllers import UpdateMethod
from workers.apply import SYSTEM_FIELDS, ControllerRef, strip_last_applied
from workers.apply.errors import InvalidObjectError


class Step(enum.Enum):
    SKIP = "skip"
    APPLY = "apply"
    DRY_RUN = "dry-run"
    """Run the apply as a server-side dry run first, then plan again with its result."""
    RECREATE = "recreate"
    """Delete the child; a later sync creates it again (by an apply)."""
    STALE = "stale"
    """The dry run saw a newer child than observed: do nothing now (the next sync sees it)."""


def _without_system_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k != "status"}
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and any(name in metadata for name in SYSTEM_FIELDS):
        out["metadata"] = {k: v for k, v in metadata.items() if k not in SYSTEM_FIELDS}
    return out


def sanitized(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without the system metadata and ``status`` (see the module docstring)."""
    return _without_system_fields(obj)


def apply_body(desired: Mapping[str, Any], controller: ControllerRef) -> dict[str, Any]:
    """The apply patch of a desired child (see the module docstring). Raises
    ``InvalidObjectError`` when ``desired`` or its metadata is not an object."""
    if not isinstance(desired, dict):
        raise InvalidObjectError("a desired child must be a JSON object")
    body = _without_system_fields(strip_last_applied(desired))
    metadata = body.get("metadata")
    if not isinstance(metadata, dict):
        raise InvalidObjectError("desired child metadata is not an object")
    refs = metadata.get("ownerReferences")
    if not isinstance(refs, list) or not all(isinstance(ref, dict) for ref in refs):
        refs = []
    if any(ref.get("uid") == controller.uid for ref in refs):
        return body
    owned = [*refs, controller.as_owner_reference()]
    return {**body, "metadata": {**metadata, "ownerReferences": owned}}


def body_hash(body: Mapping[str, Any]) -> str:
    """A stable digest of an apply body (key order does not matter)."""
    encoded = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(encoded, digest_size=16).hexdigest()


def _same(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1, and 1 is 1.0 (the server may re-encode numbers).
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def covers(current: Any, desired: Any) -> bool:
    """Whether every field ``desired`` sets holds in ``current`` (module docstring)."""
    if isinstance(desired, dict):
        return isinstance(current, dict) and all(
            key in current and covers(current[key], value) for key, value in desired.items()
        )
    if isinstance(desired, list):
        if not isinstance(current, list):
            return False
        items = iter(current)
        return all(any(covers(have, want) for have in items) for want in desired)
    return _same(current, desired)


def holds_metadata(observed: Mapping[str, Any], body: Mapping[str, Any]) -> bool:
    """Whether ``observed`` still holds the metadata the apply ``body`` sets (labels,
    annotations, ownerReferences...): what the apply cache, keyed by uid and generation,
    cannot see change, since a metadata edit moves no generation."""
    return covers(observed.get("metadata"), body.get("metadata"))


def up_to_date(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether an existing child already holds everything a desired child applies: the
    rollout's "already updated" under SSA."""
    if current is None:
        return False
    wanted = _without_system_fields(strip_last_applied(dict(desired)))
    return covers(current, wanted)


def _resource_version(obj: Mapping[str, Any]) -> Any:
    metadata = obj.get("metadata")
    return metadata.get("resourceVersion") if isinstance(metadata, dict) else None


def _without_labels(obj: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("labels"), dict):
        return obj
    labels = {k: v for k, v in metadata["labels"].items() if k not in keys}
    return {**obj, "metadata": {**metadata, "labels": labels}}


def plan_update(
    method: UpdateMethod,
    *,
    observed: Mapping[str, Any],
    deleting: bool = False,
    cached: bool = False,
    dry_run: Mapping[str, Any] | None = None,
    in_place_labels: frozenset[str] = frozenset(),
) -> Step:
    """The step for an existing child (table in the module docstring). ``cached``: the
    apply cache holds this child's body for its current uid and version. ``dry_run``: the
    answer of the apply run as a dry run, once ``DRY_RUN`` was asked."""
    if deleting or method is UpdateMethod.ON_DELETE or cached:
        return Step.SKIP
    if method.in_place:
        return Step.APPLY
    if not method.recreates:
        return Step.SKIP
    if dry_run is None:
        return Step.DRY_RUN
    if _resource_version(dry_run) != _resource_version(observed):
        return Step.STALE
    after, before = sanitized(dry_run), sanitized(observed)
    if after == before:
        return Step.SKIP
    if in_place_labels and _without_labels(after, in_place_labels) == _without_labels(
        before, in_place_labels
    ):
        return Step.APPLY
    return Step.RECREATE
