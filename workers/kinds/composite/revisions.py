"""ControllerRevisions of a CompositeController parent, as Metacontroller writes them. Pure.

- ``revision_name``: ``<parent plural>.<parent group, or "core">-<sha1 hex>``. The SHA-1 is
  over the parent UID's bytes followed by Go's ``json.Marshal`` of the revision's parent
  patch, and the prefix is cut to 212 bytes so the name fits in 253. The hash makes creation
  idempotent (a second create of the same revision is AlreadyExists), so the bytes must match
  Go's: a different encoding would create a second revision for the same patch and start a
  spurious rollout. A ``collision_count`` above zero (metashard's own, as DaemonSets and
  StatefulSets do) appends its decimal digits to the hashed bytes, for a name that an object
  this parent cannot claim already holds; zero gives Metacontroller's name exactly.
- ``revision_labels``, ``new_revision_object`` (the object Metacontroller creates) and
  ``revision_object`` (a live one with new children or history number, or ``None`` when
  unchanged). The schema itself (``Revision``, patches, hash, history numbers) is
  ``proto.api.revisions``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from proto.api import gojson, names
from proto.api.revisions import REVISION_NUMBER_ANNOTATION, ChildNames, Revision
from workers.apply import ControllerRef, deep_equal

__all__ = ["new_revision_object", "revision_labels", "revision_name", "revision_object"]

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


def revision_labels(
    parent: Mapping[str, Any], *, group: str, resource: str, generate_selector: bool
) -> dict[str, str]:
    """Metacontroller's revision labels: ``controller-uid`` under ``generateSelector``, else
    the parent's ``spec.template.metadata.labels``; plus the parent's group and resource."""
    labels: dict[str, str] = {}
    if generate_selector:
        labels[names.CONTROLLER_UID_LABEL] = str(parent["metadata"].get("uid") or "")
    else:
        template: Any = parent
        for part in ("spec", "template", "metadata", "labels"):
            template = template.get(part) if isinstance(template, Mapping) else None
        if isinstance(template, Mapping):
            labels.update({str(k): str(v) for k, v in template.items() if isinstance(v, str)})
    labels[names.REVISION_API_GROUP_LABEL] = group
    labels[names.REVISION_RESOURCE_LABEL] = resource
    return labels


def _children_field(children: ChildNames) -> list[dict[str, Any]]:
    return [{"apiGroup": g, "kind": k, "names": list(n)} for g, k, n in children]


def new_revision_object(
    revision: Revision,
    *,
    namespace: str,
    owner: ControllerRef,
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """The ControllerRevision to create for ``revision`` in ``namespace`` (not written yet):
    the parent's own namespace, or for a cluster-scoped parent the cluster revision
    namespace (its ownerReference then names a cluster-scoped owner, which is valid)."""
    metadata: dict[str, Any] = {
        "name": revision.name,
        "labels": dict(labels),
        "annotations": {REVISION_NUMBER_ANNOTATION: str(revision.number)},
        "ownerReferences": [owner.as_owner_reference()],
    }
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
