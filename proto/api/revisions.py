"""ControllerRevisions of CompositeController parents, as Metacontroller stores them. Pure.

Read by the workers (which write them, ``workers.kinds.composite``) and by ``metashard rollout``:

- ``Revision``: one revision (name, ``parentPatch``, the children it claims, history number);
  ``Revision.decode`` reads a live object.
- ``make_patch`` / ``apply_patch``: Metacontroller's ``makePatch`` and ``applyPatch`` over
  ``revisionHistory.fieldPaths`` (dotted paths, default ``["spec"]``): the patch holds the
  parent's subtree at each path that exists; applying it overwrites those subtrees of a copy.
- ``restore_patch``: what ``metashard rollout undo`` writes: ``apply_patch`` that also
  removes the paths the patch lacks, so the result's ``make_patch`` is the patch itself.
- ``older_parents``: the parent each older revision that owns children is synced with (its
  ``parentPatch`` applied over the live parent); the coordinator calls the customize hook
  once for each (Metacontroller calls customize once per revision).
- ``revision_hash``: the ``controller-revision-hash`` label value of a revision's children:
  its name's 40 hex digits, so an existing revision keeps its own hash whatever the patch.
- History numbers (``metashard.io/revision``, metashard's own annotation, additive to the
  Metacontroller schema): a revision that becomes the latest gets one more than the highest
  number of the parent's revisions; the history limit and ``rollout history`` order by it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "REVISION_HASH_LABEL",
    "REVISION_NUMBER_ANNOTATION",
    "ChildNames",
    "Revision",
    "apply_patch",
    "make_patch",
    "older_parents",
    "restore_patch",
    "revision_hash",
]

REVISION_HASH_LABEL = "controller-revision-hash"
"""On every child of a rolling child type: the hash of the revision the child belongs to."""
REVISION_NUMBER_ANNOTATION = "metashard.io/revision"
"""On ControllerRevisions: the history number (see the module docstring)."""
DEFAULT_HISTORY_LIMIT = 5
"""Childless revisions kept per parent unless ``--revision-history-limit`` or a controller's
``metashard.io/revision-history-limit`` annotation says otherwise."""


def revision_hash(name: str) -> str:
    """The ``controller-revision-hash`` value of the revision called ``name``."""
    return name.rsplit("-", 1)[-1]


def make_patch(parent: Mapping[str, Any], field_paths: Sequence[str]) -> dict[str, Any]:
    """The subtrees of ``parent`` at ``field_paths`` (absent paths are left out)."""
    return _copy_paths({}, parent, field_paths)


def apply_patch(
    parent: Mapping[str, Any], patch: Mapping[str, Any], field_paths: Sequence[str]
) -> dict[str, Any]:
    """A copy of ``parent`` with ``patch``'s subtrees at ``field_paths`` written over it."""
    return _copy_paths(dict(parent), patch, field_paths)


def _copy_paths(
    target: dict[str, Any], source: Mapping[str, Any], field_paths: Sequence[str]
) -> dict[str, Any]:
    """``target`` with ``source``'s subtrees at ``field_paths`` written over it (copy on
    write; paths absent from ``source`` are left as they are)."""
    for path in field_paths:
        parts = path.split(".")
        found, value = _get(source, parts)
        if found:
            target = _set(target, parts, value)
    return target


def restore_patch(
    parent: Mapping[str, Any], patch: Mapping[str, Any], field_paths: Sequence[str]
) -> dict[str, Any]:
    """A copy of ``parent`` whose subtrees at ``field_paths`` are ``patch``'s: written over
    where the patch has them, removed where it does not (the field did not exist then)."""
    result = dict(parent)
    for path in field_paths:
        parts = path.split(".")
        found, value = _get(patch, parts)
        result = _set(result, parts, value) if found else _remove(result, parts)
    return result


def _remove(obj: dict[str, Any], parts: Sequence[str]) -> dict[str, Any]:
    """``obj`` without the value at ``parts`` (copy on write; ``obj`` itself when absent)."""
    head, rest = parts[0], parts[1:]
    if head not in obj:
        return obj
    if not rest:
        return {k: v for k, v in obj.items() if k != head}
    inner = obj[head]
    if not isinstance(inner, dict):
        return obj
    removed = _remove(inner, rest)
    return obj if removed is inner else {**obj, head: removed}


def _get(obj: Mapping[str, Any], parts: Sequence[str]) -> tuple[bool, Any]:
    current: Any = obj
    for part in parts:
        if not isinstance(current, Mapping) or part not in current:
            return False, None
        current = current[part]
    return True, current


def _set(obj: Mapping[str, Any], parts: Sequence[str], value: Any) -> dict[str, Any]:
    """A copy of ``obj`` with ``value`` at ``parts`` (copy on write; non-objects replaced)."""
    head, rest = parts[0], parts[1:]
    if not rest:
        return {**obj, head: value}
    inner = obj.get(head)
    return {**obj, head: _set(inner if isinstance(inner, Mapping) else {}, rest, value)}


ChildNames = tuple[tuple[str, str, tuple[str, ...]], ...]
"""``children`` of a revision: ``(apiGroup, kind, names)`` in stored order."""


@dataclass(frozen=True, slots=True)
class Revision:
    """One ControllerRevision as the rollout planner reads it."""

    name: str
    patch: Mapping[str, Any]
    children: ChildNames = ()
    number: int = 0
    """The history number; 0 when the object has none (written by Metacontroller)."""
    obj: Mapping[str, Any] | None = None
    """The live object; ``None`` for a revision not written yet."""

    @classmethod
    def decode(cls, obj: Mapping[str, Any]) -> Revision:
        """A live ControllerRevision; ``ValueError`` when it is malformed."""
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping):
            raise ValueError("ControllerRevision has no metadata")
        patch = obj.get("parentPatch")
        if patch is None:
            patch = {}
        if not isinstance(patch, Mapping):
            raise ValueError(
                f"ControllerRevision {metadata.get('name')}: parentPatch is not an object"
            )
        children: list[tuple[str, str, tuple[str, ...]]] = []
        for entry in obj.get("children") or ():
            if not isinstance(entry, Mapping):
                raise ValueError(f"ControllerRevision {metadata.get('name')}: malformed children")
            listed = entry.get("names") or ()
            children.append(
                (
                    str(entry.get("apiGroup") or ""),
                    str(entry.get("kind") or ""),
                    tuple(str(n) for n in listed),
                )
            )
        annotations = metadata.get("annotations")
        number = 0
        if isinstance(annotations, Mapping):
            text = annotations.get(REVISION_NUMBER_ANNOTATION)
            if isinstance(text, str) and text.isdigit():
                number = int(text)
        return cls(str(metadata.get("name") or ""), patch, tuple(children), number, obj)

    @property
    def hash(self) -> str:
        return revision_hash(self.name)

    def child_count(self) -> int:
        return sum(len(listed) for _, _, listed in self.children)

    def owns(self, group: str, kind: str, name: str) -> bool:
        return any(g == group and k == kind and name in n for g, k, n in self.children)


def older_parents(
    parent: Mapping[str, Any], revisions: Sequence[Revision], field_paths: Sequence[str]
) -> list[tuple[str, dict[str, Any]]]:
    """``(revision name, parent version)`` for each of ``revisions`` that owns children and
    whose patch is not ``parent``'s own: the parent materialized from that revision, as the
    sync hook of that revision gets it. The latest revision (the live parent's patch) and
    childless ones are left out, so with a single revision the list is empty."""
    own = make_patch(parent, field_paths)
    return [
        (revision.name, apply_patch(parent, revision.patch, field_paths))
        for revision in revisions
        if revision.child_count() and revision.patch != own
    ]
