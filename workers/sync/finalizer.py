"""A controller's finalizer on its parents: when to add, remove, finalize. Pure.

The finalizer is ``metacontroller.io/compositecontroller-<name>`` for a CompositeController
and ``metacontroller.io/decoratorcontroller-<name>`` for a DecoratorController (on its
targets); it exists so that the finalize hook gets a chance to clean up before a parent goes
away. Metacontroller's rules, the same for both kinds (``finalizer.Manager`` and
``syncParentObject``):

- ``change``: the finalizer is wanted exactly when the controller has a finalize hook. It is
  added when missing, but never to a parent already being deleted (we may have removed it
  already); it is removed when present and no longer wanted (the finalize hook was dropped).
- ``finalizing``: the finalize hook (``finalizing: true``) is called instead of sync when the
  controller has one and the parent is being deleted, or no longer matches
  ``parentResource.labelSelector`` while still carrying the finalizer (the caller only gets
  that far for an unselected parent that carries it).
- ``manages_children``: children are managed while the parent is alive, or while it is being
  deleted if our finalizer is still on it and no garbage-collector finalizer
  (``foregroundDeletion``, ``orphan``) is: otherwise we would fight the garbage collector.
- ``finalizers_patch``: the merge patch that sets the finalizer list, with the parent's
  resourceVersion as the precondition (the list is replaced whole, so it must be current).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

GC_FINALIZERS = frozenset(("foregroundDeletion", "orphan"))


class Change(enum.Enum):
    NONE = "none"
    ADD = "add"
    REMOVE = "remove"


def change(*, wanted: bool, present: bool, deleting: bool) -> Change:
    """What to do with our finalizer; ``wanted`` is "the controller has a finalize hook"."""
    if wanted == present:
        return Change.NONE
    if wanted:
        return Change.NONE if deleting else Change.ADD
    return Change.REMOVE


def finalizing(*, has_finalize_hook: bool, deleting: bool, selected: bool) -> bool:
    """Call the finalize hook rather than sync."""
    return has_finalize_hook and (deleting or not selected)


def manages_children(
    *, deleting: bool, finalizers: Sequence[str], name: str, has_finalize_hook: bool
) -> bool:
    """Whether this sync creates, updates and deletes children."""
    if not deleting:
        return True
    if not has_finalize_hook or name not in finalizers:
        return False
    return not any(f in GC_FINALIZERS for f in finalizers)


def finalizers_of(metadata: dict[str, Any]) -> list[str]:
    found = metadata.get("finalizers")
    return [f for f in found if isinstance(f, str)] if isinstance(found, list) else []


def updated(finalizers: Sequence[str], name: str, action: Change) -> list[str]:
    """The finalizer list after ``action``; order is kept, duplicates of ``name`` go."""
    kept = [f for f in finalizers if f != name]
    return [*kept, name] if action is Change.ADD else kept


def finalizers_patch(metadata: dict[str, Any], finalizers: Sequence[str]) -> dict[str, Any]:
    return {
        "metadata": {
            "finalizers": list(finalizers) or None,
            "resourceVersion": metadata.get("resourceVersion"),
        }
    }
