"""Removing a deleted controller's finalizer from the objects that still carry it.

Metacontroller leaves ``metacontroller.io/<kind>-<name>`` finalizers behind when a
CompositeController or DecoratorController is deleted, and those objects can then never be
deleted without a manual patch (metacontroller#1062). metashard removes them:

- ``holding(view, stores)`` lists, from the coordinator's caches, the parents of the
  controller that carry its finalizer (called when the controller object is deleted, before
  its informers are released).
- ``remove(writer, items, finalizer)`` patches each of them: the finalizer list without
  ours, with the object's resourceVersion as the precondition. A Conflict re-reads the object
  and tries again (at most ``ATTEMPTS`` times); NotFound means nothing is left to do. Failures
  are logged; they never stop the others. ``remove`` returns how many it patched, and what
  403s refused (``proto.kube.refusal.Refusal``, each distinct one once) and on how many objects,
  for the caller to report where operators look.

Only the coordinator that ran the controller does this, when its informer sees the deletion.
A controller deleted while no coordinator leads keeps its finalizers on parents, as in
Metacontroller; so does a parent a reconcile gives the finalizer at the very moment the
controller is deleted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from manager.controllers.hookrefs import Getter
from manager.controllers.view import ControllerView
from manager.informers.store import Stores
from proto.kube import errors
from proto.kube.refusal import Refusal
from proto.kube.resources import Resource
from proto.runtime.logs import get_logger

log = get_logger("metashard.finalizers")

ATTEMPTS = 5


class FinalizerWriter(Getter, Protocol):
    """Reads an object again after a conflict, patches it; ``proto.kube.client.Client``
    conforms."""

    async def patch(
        self, resource: Resource, name: str, patch: Any, *, namespace: str | None = None
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Held:
    """One object carrying the finalizer, as cached."""

    resource: Resource
    namespace: str
    name: str
    finalizers: tuple[str, ...]
    resource_version: str


def holding(view: ControllerView, stores: Stores) -> list[Held]:
    found: list[Held] = []
    for resource in view.parents:
        store = stores.store(resource)
        if store is None:
            continue
        found.extend(
            Held(resource, p.namespace, p.name, p.finalizers, p.resource_version)
            for p in store
            if view.finalizer in p.finalizers
        )
    return found


def _patch(finalizers: Iterable[str], finalizer: str, resource_version: str) -> dict[str, Any]:
    kept = [f for f in finalizers if f != finalizer]
    return {"metadata": {"finalizers": kept or None, "resourceVersion": resource_version}}


@dataclass(frozen=True, slots=True)
class Removal:
    """What ``remove`` did."""

    patched: int
    refused: tuple[Refusal, ...] = ()
    """What the API server refused (403), each distinct refusal once."""
    left: int = 0
    """Objects that keep the finalizer because a request about them was refused."""


async def remove(writer: FinalizerWriter, held: Iterable[Held], finalizer: str) -> Removal:
    """Remove ``finalizer`` from every object in ``held`` (see the module docstring)."""
    patched = left = 0
    refused: dict[Refusal, None] = {}
    for item in held:
        try:
            if await _remove_one(writer, item, finalizer):
                patched += 1
        except errors.Forbidden as e:
            left += 1
            verb = "patch" if e.method == "PATCH" else "get"
            refused[Refusal.of(e, verb=verb, resource=item.resource)] = None
            log.warning(
                "cannot remove a finalizer: the API server refuses it",
                finalizer=finalizer,
                object=item.name,
                error=str(e),
            )
    if patched:
        log.info("finalizers of a deleted controller removed", finalizer=finalizer, objects=patched)
    return Removal(patched, tuple(refused), left)


async def _remove_one(writer: FinalizerWriter, item: Held, finalizer: str) -> bool:
    """Patch ``item``; False when nothing was left to do or it failed (logged); raises
    ``Forbidden``."""
    namespace = item.namespace or None
    finalizers, version = item.finalizers, item.resource_version
    for _ in range(ATTEMPTS):
        if finalizer not in finalizers:
            return False
        try:
            try:
                await writer.patch(
                    item.resource,
                    item.name,
                    _patch(finalizers, finalizer, version),
                    namespace=namespace,
                )
                return True
            except errors.Conflict:
                pass  # changed meanwhile: read it again
            current = await writer.get(item.resource, item.name, namespace=namespace)
        except errors.NotFound:
            return False
        except errors.Forbidden:
            raise
        except errors.KubeError as e:
            log.warning(
                "cannot remove a finalizer", finalizer=finalizer, object=item.name, error=str(e)
            )
            return False
        metadata = current.get("metadata") or {}
        finalizers = tuple(metadata.get("finalizers") or ())
        version = metadata.get("resourceVersion") or ""
    log.warning(
        "cannot remove a finalizer: the object keeps changing",
        finalizer=finalizer,
        object=item.name,
    )
    return False
