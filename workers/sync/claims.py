"""Which observed children a parent claims, adopts and releases. Pure.

This is Kubernetes' ``ControllerRefManager.ClaimObject`` as Metacontroller runs it for every
child of every sync, decided for one child type at a time:

- An object whose controller ownerReference is another uid belongs to someone else: ignored.
- Ours and matched by the parent's selector: claimed, even while the parent is being deleted
  (claiming what we own takes no action).
- Ours and no longer matched: released (our ownerReference removed), unless the parent is
  being deleted; not claimed either way.
- An orphan (no controller ownerReference): adopted, then claimed, when the parent is not
  being deleted, the selector matches, the orphan is not itself being deleted, and (for a
  namespaced parent) it is in the parent's namespace. Otherwise ignored.

Metacontroller re-reads the parent with an uncached GET before adopting (its uid and deletion
could have changed). Here the snapshot is as fresh as the coordinator's cache, and every
adoption and release carries the child's resourceVersion as a precondition, so a change in
between makes the write fail with a conflict instead of acting on stale state.

``adoption_patch`` and ``release_patch`` build those writes as JSON merge patches: the whole
``ownerReferences`` list (a merge patch replaces lists) and ``resourceVersion``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from proto.api.selectors import Selector
from workers.sync.observed import Observed


@dataclass(frozen=True, slots=True)
class Claimant:
    """The parent, as far as claiming its children is concerned."""

    uid: str
    namespace: str
    """``""`` for a cluster-scoped parent: children may then be in any namespace."""
    deleting: bool
    selector: Selector


@dataclass(frozen=True, slots=True)
class Claims:
    """The decision for the candidates of one child type, each list in snapshot order."""

    owned: tuple[Observed, ...]
    """Already ours and matched: claimed as they are."""
    adopt: tuple[Observed, ...]
    """Orphans to adopt: claimed once the adoption is written."""
    release: tuple[Observed, ...]
    """Ours but no longer matched: give them up."""


def claim(candidates: Iterable[Observed], parent: Claimant) -> Claims:
    owned: list[Observed] = []
    adopt: list[Observed] = []
    release: list[Observed] = []
    selector = parent.selector
    for child in candidates:
        controller = child.controller_uid
        if controller is not None:
            if controller != parent.uid:
                continue
            if selector.matches(child.labels):
                owned.append(child)
            elif not parent.deleting:
                release.append(child)
            continue
        if parent.deleting or not selector.matches(child.labels) or child.deleting:
            continue
        if parent.namespace and child.namespace != parent.namespace:
            continue
        adopt.append(child)
    return Claims(tuple(owned), tuple(adopt), tuple(release))


def _owner_references(obj: dict[str, Any]) -> list[Any]:
    refs = obj["metadata"].get("ownerReferences")
    return refs if isinstance(refs, list) else []


def _patch(obj: dict[str, Any], refs: list[Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "ownerReferences": refs or None,
            "resourceVersion": obj["metadata"].get("resourceVersion"),
        }
    }


def adoption_patch(child: Observed, owner_reference: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that makes ``owner_reference`` the child's controller: it replaces a
    reference with the same uid, else it is appended (Metacontroller's ``addOwnerReference``)."""
    uid = owner_reference["uid"]
    refs = _owner_references(child.obj)
    if any(isinstance(ref, dict) and ref.get("uid") == uid for ref in refs):
        updated = [
            owner_reference if isinstance(ref, dict) and ref.get("uid") == uid else ref
            for ref in refs
        ]
    else:
        updated = [*refs, owner_reference]
    return _patch(child.obj, updated)


def release_patch(child: Observed, parent_uid: str) -> dict[str, Any]:
    """The merge patch that removes every ownerReference to ``parent_uid``."""
    refs = _owner_references(child.obj)
    kept = [ref for ref in refs if not (isinstance(ref, dict) and ref.get("uid") == parent_uid)]
    return _patch(child.obj, kept)
