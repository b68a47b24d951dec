"""Guarded merge patches of one object: finalizers on a parent, ownership of a child.

Every patch carries the object's resourceVersion as its precondition (the snapshot is as
fresh as the coordinator's cache, no GET is made first):

- ``set_finalizers(...)`` sets a parent's finalizer list. It returns the patched parent, or
  ``None`` when the parent is gone (NotFound); a Conflict raises ``StaleSnapshot`` (the
  change is on its way, a retry sees it); any other API error raises ``SyncFailure``.
- ``sync_finalizer(...)`` is the first step of every sync: the ``Parent`` as
  ``finalizer.change`` wants it (our finalizer added or removed), or ``None`` when there is
  nothing to sync (the parent is gone, or it is not selected and does not carry our
  finalizer).
- ``guarded_patch(...)`` writes an adoption or release patch of a child. NotFound is let go
  (``None``), a Conflict raises ``StaleSnapshot``, any other API error is appended to
  ``problems`` (the caller fails the sync once every child was tried). ``adopt(...)`` is the
  adoption (``workers.sync.claims.adoption_patch``) and returns the child as written.

Each successful write is reported to ``request.wrote`` (the read-your-writes barrier).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proto.kube import errors
from proto.runtime.logs import get_logger
from workers.reconcile import ReconcileRequest
from workers.sync import finalizer
from workers.sync.children import Target
from workers.sync.claims import adoption_patch
from workers.sync.errors import StaleSnapshot, SyncFailure
from workers.sync.observed import Observed
from workers.sync.writer import Writer

log = get_logger("metashard.patches")


def describe(kind: str, obj: dict[str, Any]) -> str:
    """``Kind namespace/name`` (``Kind name`` when cluster-scoped), for messages."""
    metadata = obj["metadata"]
    namespace = metadata.get("namespace")
    where = f"{namespace}/{metadata.get('name')}" if namespace else metadata.get("name")
    return f"{kind} {where}"


async def set_finalizers(
    writer: Writer,
    target: Target,
    obj: dict[str, Any],
    wanted: list[str],
    request: ReconcileRequest,
) -> dict[str, Any] | None:
    """``obj`` with ``wanted`` as its finalizers; ``None`` when it is gone."""
    metadata = obj["metadata"]
    what = describe(target.resource.kind, obj)
    try:
        answer = await writer.patch(
            target.resource,
            metadata["name"],
            finalizer.finalizers_patch(metadata, wanted),
            namespace=metadata.get("namespace") or None,
        )
    except errors.NotFound:
        return None
    except errors.Conflict as err:
        raise StaleSnapshot(f"can't sync finalizer for {what}: {err}") from None
    except errors.KubeError as err:
        raise SyncFailure(f"can't sync finalizer for {what}: {err}") from None
    request.wrote(target.group_resource, answer, action="patch finalizers of")
    return answer


@dataclass(slots=True)
class Parent:
    """The parent a sync works on, once its finalizer is as wanted (``sync_finalizer``).

    A value, read-only by convention: built once per sync, where a frozen dataclass would cost
    five times as much to build."""

    target: Target
    obj: dict[str, Any]
    raw: bytes
    finalizers: list[str]
    deleting: bool
    uid: str
    namespace: str
    """``""`` for a cluster-scoped parent: its children may be in any namespace."""

    def describe(self, obj: dict[str, Any] | None = None) -> str:
        """``Kind namespace/name`` of the parent (as ``obj``, a version of it), for messages."""
        return describe(self.target.resource.kind, self.obj if obj is None else obj)


async def sync_finalizer(
    writer: Writer,
    target: Target,
    obj: dict[str, Any],
    raw: bytes,
    *,
    name: str,
    wanted: bool,
    selected: bool,
    request: ReconcileRequest,
) -> Parent | None:
    """Add or remove finalizer ``name`` (``wanted``: the controller has a finalize hook)."""
    metadata = obj["metadata"]
    deleting = metadata.get("deletionTimestamp") is not None
    finalizers = finalizer.finalizers_of(metadata)
    if not selected and name not in finalizers:
        return None
    step = finalizer.change(wanted=wanted, present=name in finalizers, deleting=deleting)
    if step is not finalizer.Change.NONE:
        updated = await set_finalizers(
            writer, target, obj, finalizer.updated(finalizers, name, step), request
        )
        if updated is None:
            return None
        obj, raw = updated, orjson.dumps(updated)
        finalizers = finalizer.finalizers_of(obj["metadata"])
        if not selected and name not in finalizers:
            return None
    metadata = obj["metadata"]
    namespace = (metadata.get("namespace") or "") if target.resource.namespaced else ""
    return Parent(target, obj, raw, finalizers, deleting, metadata.get("uid") or "", namespace)


async def guarded_patch(
    writer: Writer,
    target: Target,
    child: Observed,
    patch: dict[str, Any],
    *,
    what: str,
    request: ReconcileRequest,
    problems: list[str],
    controller: str,
) -> dict[str, Any] | None:
    """Patch ``child`` under its resourceVersion; the answer, ``None`` if not written."""
    try:
        answer = await writer.patch(
            target.resource, child.name, patch, namespace=child.namespace or None
        )
    except errors.NotFound:
        return None
    except errors.Conflict as err:
        raise StaleSnapshot(f"can't {what}: {err}") from None
    except errors.KubeError as err:
        problems.append(f"can't {what}: {err}")
        return None
    log.info(what, controller=controller)
    request.wrote(target.group_resource, answer, action="patch")
    return answer


async def adopt(
    writer: Writer,
    target: Target,
    orphan: Observed,
    owner_reference: dict[str, Any],
    *,
    what: str,
    request: ReconcileRequest,
    problems: list[str],
    controller: str,
) -> Observed | None:
    """Make ``owner_reference`` the controller of ``orphan``; the child as written (its
    resourceVersion is current), ``None`` if it was not."""
    adopted = await guarded_patch(
        writer,
        target,
        orphan,
        adoption_patch(orphan, owner_reference),
        what=what,
        request=request,
        problems=problems,
        controller=controller,
    )
    return None if adopted is None else Observed.of(orjson.dumps(adopted), adopted)
