"""The namespace and service-account controllers of kube-controller-manager, in process.

- Namespace controller: once a namespace is terminating it deletes everything in it (every
  served resource, Background propagation), records the five deletion conditions with the
  real reasons and messages (``Some resources are remaining: configmaps. has 1 resource
  instances``...), and when nothing is left removes the ``kubernetes`` finalizer, which lets
  the namespace go. It re-runs whenever something in a terminating namespace changes.
- Service-account controller: every active namespace has a ``default`` ServiceAccount; it is
  created after the namespace (and recreated if deleted).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Hashable
from typing import Any

from loadtest.apiserver import errors, timefmt
from loadtest.apiserver.lifecycle import DeleteOptions, Objects
from loadtest.apiserver.ownership import FieldOwner
from loadtest.apiserver.registry import ResourceType
from loadtest.apiserver.storage import ADDED, DELETED, Change, Table
from loadtest.apiserver.timers import call_later
from loadtest.apiserver.workqueue import WorkQueue
from proto.runtime.clock import Clock

NAMESPACES = "/namespaces"
MANAGER = "kube-controller-manager"  # the field manager of the status this controller writes
SERVICE_ACCOUNTS = "/serviceaccounts"

_CONDITIONS = (
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
)


class NamespaceController:
    """Syncs a terminating namespace ``delay`` seconds after it (or its content) changed.

    kube-controller-manager waits 5 s (``namespaceDeletionGracePeriod``) so that every API
    server has seen the deletion before the content goes.
    """

    def __init__(self, objects: Objects, clock: Clock, *, delay: float = 5.0) -> None:
        self.objects = objects
        self.clock = clock
        self.delay = delay
        self.queue = WorkQueue("namespace", self._sync)
        self._timers: dict[str, asyncio.Task[None]] = {}
        objects.storage.listen(self._observe)

    def _later(self, name: str) -> None:
        if name in self._timers:
            return

        def due() -> None:
            self._timers.pop(name, None)
            self.queue.add(name)

        self._timers[name] = call_later(self.clock, self.delay, due)

    def _observe(self, table: Table, change: Change) -> None:
        entry = change.entry
        if table.name == NAMESPACES:
            if change.type != DELETED and entry.meta.get("deletionTimestamp"):
                self._later(entry.name)
            return
        if entry.namespace:
            ns = self.objects.storage.table(NAMESPACES).get("", entry.namespace)
            if ns is not None and ns.meta.get("deletionTimestamp"):
                self._later(entry.namespace)

    def _sync(self, key: Hashable) -> None:
        name = str(key)
        ns_rt = self.objects.registry.for_storage(NAMESPACES)
        namespace = self.objects.storage.table(NAMESPACES).get("", name)
        if ns_rt is None or namespace is None or not namespace.meta.get("deletionTimestamp"):
            return
        remaining: Counter[str] = Counter()
        finalizers: Counter[str] = Counter()
        for table in list(self.objects.storage.tables.values()):
            if table.name == NAMESPACES or not table.by_namespace.get(name):
                continue
            rt = self.objects.registry.for_storage(table.name)
            if rt is None:
                continue
            for entry in list(table.by_namespace.get(name, {}).values()):
                if not entry.meta.get("deletionTimestamp"):
                    try:
                        self.objects.delete(
                            rt, name, entry.name, DeleteOptions(policy="Background")
                        )
                    except errors.ApiError:
                        continue
            for entry in table.by_namespace.get(name, {}).values():
                remaining[f"{rt.plural}.{rt.group}"] += 1
                for finalizer in entry.meta.get("finalizers") or []:
                    finalizers[finalizer] += 1
        self._set_conditions(ns_rt, name, remaining, finalizers)
        if not remaining:
            current = self.objects.storage.table(NAMESPACES).get("", name)
            if current is not None:
                spec = dict(current.obj.get("spec") or {})
                spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != "kubernetes"]
                body = {"metadata": {"name": name}, "spec": spec}
                self.objects.update(ns_rt, "", name, body, subresource="finalize")

    def _set_conditions(
        self, rt: ResourceType, name: str, remaining: Counter[str], finalizers: Counter[str]
    ) -> None:
        current = self.objects.storage.table(NAMESPACES).get("", name)
        if current is None:
            return
        old = {c.get("type"): c for c in (current.obj.get("status") or {}).get("conditions") or []}
        wanted: list[tuple[str, str, str, str]] = [(t, "False", r, m) for t, r, m in _CONDITIONS]
        wanted.append(
            _remaining(
                "NamespaceContentRemaining",
                [f"{res} has {n} resource instances" for res, n in sorted(remaining.items())],
                present=("SomeResourcesRemain", "Some resources are remaining: "),
                absent=("ContentRemoved", "All content successfully removed"),
            )
        )
        wanted.append(
            _remaining(
                "NamespaceFinalizersRemaining",
                [f"{f} in {n} resource instances" for f, n in sorted(finalizers.items())],
                present=(
                    "SomeFinalizersRemain",
                    "Some content in the namespace has finalizers remaining: ",
                ),
                absent=("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
            )
        )
        conditions: list[dict[str, Any]] = []
        for type_, state, reason, message in wanted:
            previous = old.get(type_)
            since = (
                previous["lastTransitionTime"]
                if previous and previous.get("status") == state
                else timefmt.now()
            )
            conditions.append(
                {
                    "type": type_,
                    "status": state,
                    "lastTransitionTime": since,
                    "reason": reason,
                    "message": message,
                }
            )
        status = dict(current.obj.get("status") or {})
        status["conditions"] = conditions
        body: dict[str, Any] = {"metadata": {"name": name}, "status": status}
        owner = FieldOwner(MANAGER, "status")
        self.objects.update(rt, "", name, body, subresource="status", owner=owner)


def _remaining(
    type_: str, listed: list[str], *, present: tuple[str, str], absent: tuple[str, str]
) -> tuple[str, str, str, str]:
    """A ``*Remaining`` condition: ``True`` with the ``present`` reason and message prefix,
    followed by what remains, when anything is ``listed``; else ``False`` with ``absent``."""
    if listed:
        reason, prefix = present
        return (type_, "True", reason, prefix + ", ".join(listed))
    reason, message = absent
    return (type_, "False", reason, message)


class ServiceAccountController:
    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self.queue = WorkQueue("serviceaccount", self._sync)
        objects.storage.listen(self._observe)

    def _observe(self, table: Table, change: Change) -> None:
        entry = change.entry
        if table.name == NAMESPACES and change.type == ADDED:
            self.queue.add(entry.name)
        elif table.name == SERVICE_ACCOUNTS and change.type == DELETED and entry.name == "default":
            self.queue.add(entry.namespace)

    def _sync(self, key: Hashable) -> None:
        name = str(key)
        namespace = self.objects.storage.table(NAMESPACES).get("", name)
        rt = self.objects.registry.for_storage(SERVICE_ACCOUNTS)
        if rt is None or namespace is None or namespace.meta.get("deletionTimestamp"):
            return
        if self.objects.storage.table(SERVICE_ACCOUNTS).get(name, "default") is None:
            self.objects.create(rt, name, {"metadata": {"name": "default"}})
