"""An object as a snapshot carries it: the API server's raw JSON, decoded once.

- ``Observed.decode(raw)`` decodes with orjson and reads the few fields every reconcile step
  needs (namespace, name, uid, labels, deletion, controller ownerReference). The raw bytes
  stay: a hook request embeds them as they are (``orjson.Fragment``), without re-encoding.
- ``obj`` is the decoded object, shared and read-only: steps that change an object build a
  new one (copy on write), they never mutate it.
- It is a ``NamedTuple``: immutable like a frozen dataclass, at a fraction of the cost to
  build (one per child per reconcile).
- Malformed objects (not a JSON object, metadata not an object) raise ``ValueError``: the
  coordinator only forwards what the API server sent, so this means a broken cache.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson


class Observed(NamedTuple):
    raw: bytes
    obj: dict[str, Any]
    namespace: str
    """``""`` for cluster-scoped objects."""
    name: str
    uid: str
    labels: dict[str, str]
    deleting: bool
    """``metadata.deletionTimestamp`` is set."""
    controller_uid: str | None
    """The uid of the controller ownerReference, ``None`` for an orphan."""

    @classmethod
    def decode(cls, raw: bytes) -> Observed:
        obj = orjson.loads(raw)
        return cls.of(raw, obj)

    @classmethod
    def of(cls, raw: bytes, obj: Any) -> Observed:
        if not isinstance(obj, dict):
            raise ValueError("an observed object must be a JSON object")
        metadata = obj.get("metadata")
        if not isinstance(metadata, dict):
            raise ValueError("an observed object has no metadata object")
        labels = metadata.get("labels")
        return cls(
            raw=raw,
            obj=obj,
            namespace=metadata.get("namespace") or "",
            name=metadata.get("name") or "",
            uid=metadata.get("uid") or "",
            labels=labels if isinstance(labels, dict) else {},
            deleting=metadata.get("deletionTimestamp") is not None,
            controller_uid=controller_uid(metadata),
        )


def controller_uid(metadata: dict[str, Any]) -> str | None:
    """The uid of the ownerReference with ``controller: true`` (``GetControllerOf``)."""
    refs = metadata.get("ownerReferences")
    if not refs:
        return None
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller") is True:
            uid = ref.get("uid")
            return uid if isinstance(uid, str) else ""
    return None
