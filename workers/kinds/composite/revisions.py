"""ControllerRevisions of a CompositeController parent, as Metacontroller writes them. Pure.

- ``revision_name``: ``<parent plural>.<parent group, or "core">-<sha1 hex>``. The SHA-1 is
  over the parent UID's bytes followed by Go's ``json.Marshal`` of the revision's parent
  patch, and the prefix is cut to 212 bytes so the name fits in 253. The hash makes creation
  idempotent (a second create of the same revision is AlreadyExists), so the bytes must match
  Go's: a different encoding would create a second revision for the same patch and start a
  spurious rollout. A ``collision_count`` above zero (metashard's own, as DaemonSets and
  StatefulSets do) appends its decimal digits to the hashed bytes, for a name that an object
  this parent cannot claim already holds; zero gives Metacontroller's name exactly.
- ``make_patch`` / ``apply_patch``: Metacontroller's ``makePatch`` and ``applyPatch`` over
  ``revisionHistory.fieldPaths`` (dotted paths, default ``["spec"]``): the patch holds the
  parent's subtree at each path that exists; applying it overwrites those subtrees of a copy.
- ``Revision``: one revision as the rollout planner reads it (name, parent patch, claimed
  children, history number); ``Revision.decode`` reads a live object, ``new_revision_object``
  builds the object Metacontroller creates, ``revision_object`` the object to write back.
- ``revision_hash``: the ``controller-revision-hash`` label value of a revision's children:
  its name's 40 hex digits, so an existing revision keeps its own hash whatever the patch.
- History numbers (``metashard.io/revision``, metashard's own annotation, additive to the
  Metacontroller schema): a revision that becomes the latest gets one more than the highest
  number of the parent's revisions; ``rollout history`` and the history limit order by it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from proto.api import gojson, names
from workers.apply import ControllerRef, deep_equal

__all__ = [
    "REVISION_HASH_LABEL",
    "REVISION_NUMBER_ANNOTATION",
    "ChildNames",
    "Revision",
    "apply_patch",
    "make_patch",
    "new_revision_object",
    "revision_hash",
    "revision_labels",
    "revision_name",
    "revision_object",
]

REVISION_HASH_LABEL = "controller-revision-hash"
"""On every child of a rolling child type: the hash of the revision the child belongs to."""
REVISION_NUMBER_ANNOTATION = "metashard.io/revision"
"""On ControllerRevisions: the history number (see the module docstring)."""

_MAX_NAME = 253
_HASH_AND_DASH = 41


def revision_name(
    resource: str,
    group: str,
    parent_uid: str,
    parent_patch: Mapping[str, Any],
    collision_count: int = 0,
) -> str:
    """The ControllerRevision name for ``parent_patch`` of the parent with ``parent_uid``."""
    prefix = f"{resource}.{group or 'core'}".encode()[: _MAX_NAME - _HASH_AND_DASH]
    data = parent_uid.encode() + gojson.dumps(parent_patch)
    if collision_count:
        data += str(collision_count).encode()
    digest = hashlib.sha1(data, usedforsecurity=False)
    return f"{prefix.decode(errors='ignore')}-{digest.hexdigest()}"


def revision_hash(name: str) -> str:
    """The ``controller-revision-hash`` value of the revision called ``name``."""
    return name.rsplit("-", 1)[-1]


def make_patch(parent: Mapping[str, Any], field_paths: Sequence[str]) -> dict[str, Any]:
    """The subtrees of ``parent`` at ``field_paths`` (absent paths are left out)."""
    patch: dict[str, Any] = {}
    for path in field_paths:
        parts = path.split(".")
        found, value = _get(parent, parts)
        if found:
            patch = _set(patch, parts, value)
    return patch


def apply_patch(
    parent: Mapping[str, Any], patch: Mapping[str, Any], field_paths: Sequence[str]
) -> dict[str, Any]:
    """A copy of ``parent`` with ``patch``'s subtrees at ``field_paths`` written over it."""
    result = dict(parent)
    for path in field_paths:
        parts = path.split(".")
        found, value = _get(patch, parts)
        if found:
            result = _set(result, parts, value)
    return result


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


def revision_labels(
    parent: Mapping[str, Any], *, group: str, resource: str, generate_selector: bool
) -> dict[str, str]:
    """Metacontroller's revision labels: ``controller-uid`` under ``generateSelector``, else
    the parent's ``spec.template.metadata.labels``; plus the parent's group and resource."""
    labels: dict[str, str] = {}
    if generate_selector:
        labels[names.CONTROLLER_UID_LABEL] = str(parent["metadata"].get("uid") or "")
    else:
        found, template = _get(parent, ("spec", "template", "metadata", "labels"))
        if found and isinstance(template, Mapping):
            labels.update({str(k): str(v) for k, v in template.items() if isinstance(v, str)})
    labels[names.REVISION_API_GROUP_LABEL] = group
    labels[names.REVISION_RESOURCE_LABEL] = resource
    return labels


def _children_field(children: ChildNames) -> list[dict[str, Any]]:
    return [{"apiGroup": g, "kind": k, "names": list(n)} for g, k, n in children]


def new_revision_object(
    revision: Revision,
    *,
    parent: Mapping[str, Any],
    owner: ControllerRef,
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """The ControllerRevision to create for ``revision`` (not written yet)."""
    metadata: dict[str, Any] = {
        "name": revision.name,
        "labels": dict(labels),
        "annotations": {REVISION_NUMBER_ANNOTATION: str(revision.number)},
        "ownerReferences": [owner.as_owner_reference()],
    }
    namespace = parent["metadata"].get("namespace")
    if namespace:
        metadata["namespace"] = namespace
    body: dict[str, Any] = {
        "apiVersion": names.API_VERSION,
        "kind": names.CONTROLLER_REVISION,
        "metadata": metadata,
        "parentPatch": orjson.loads(gojson.dumps(revision.patch)),
    }
    if revision.children:
        body["children"] = _children_field(revision.children)
    return body


def revision_object(revision: Revision) -> dict[str, Any] | None:
    """The live object with ``revision``'s children and number, or ``None`` when it already
    says so (no write needed). ``revision.obj`` must be set."""
    assert revision.obj is not None
    obj = revision.obj
    metadata = obj["metadata"]
    annotations = metadata.get("annotations")
    annotations = dict(annotations) if isinstance(annotations, Mapping) else {}
    if revision.number:
        annotations[REVISION_NUMBER_ANNOTATION] = str(revision.number)
    children = _children_field(revision.children)
    current = obj.get("children") or []
    if deep_equal(current, children) and deep_equal(metadata.get("annotations") or {}, annotations):
        return None
    updated: dict[str, Any] = {**obj, "metadata": {**metadata, "annotations": annotations}}
    if children:
        updated["children"] = children
    else:
        updated.pop("children", None)
    return updated
