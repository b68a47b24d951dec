"""The garbage collector (kube-controller-manager's ``garbagecollector``), in process.

Invariants:
- An owner index (owner uid -> dependents) follows every write through a storage listener;
  listeners only enqueue, the work happens on the next loop iteration.
- A dependent whose owners are all gone is deleted (Background, or per its own
  ``orphan``/``foregroundDeletion`` finalizer). Owners count as present when an object with the
  reference's uid and name exists in the dependent's namespace (or cluster-wide); references
  to kinds the server does not serve are left alone.
- A dependent with a present owner loses only its dangling references (and those to owners
  waiting for it in foreground deletion).
- Foreground: an owner with ``foregroundDeletion`` has its dependents deleted (in foreground
  too when they have dependents themselves); the finalizer goes once no dependent with
  ``blockOwnerDeletion: true`` remains.
- Orphan: an owner with ``orphan`` has the reference stripped from every dependent, then the
  finalizer removed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable
from typing import Any

from loadtest.apiserver import errors
from loadtest.apiserver.lifecycle import FOREGROUND, ORPHAN, DeleteOptions, Objects
from loadtest.apiserver.ownership import FieldOwner
from loadtest.apiserver.registry import ResourceType
from loadtest.apiserver.storage import DELETED, Change, Entry, Table
from loadtest.apiserver.workqueue import WorkQueue

MANAGER = "kube-controller-manager"  # the field manager of the garbage collector's writes

Ref = dict[str, Any]


def _refs(entry: Entry | None) -> list[Ref]:
    if entry is None:
        return []
    return [
        r for r in entry.meta.get("ownerReferences") or [] if isinstance(r, dict) and r.get("uid")
    ]


class GarbageCollector:
    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self.dependents: dict[str, set[tuple[str, str]]] = {}
        self.queue = WorkQueue("garbagecollector", self._sync)
        objects.storage.listen(self._observe)

    # --- informer -----------------------------------------------------------------------------

    def _observe(self, table: Table, change: Change) -> None:
        entry, prev = change.entry, change.prev
        where = (table.name, entry.key)
        old_refs = {r["uid"] for r in _refs(prev)}
        new_refs = set() if change.type == DELETED else {r["uid"] for r in _refs(entry)}
        for uid in old_refs - new_refs:
            scope = self.dependents.get(uid)
            if scope is not None:
                scope.discard(where)
                if not scope:
                    del self.dependents[uid]
        for uid in new_refs - old_refs:
            self.dependents.setdefault(uid, set()).add(where)
        if new_refs:
            self.queue.add(("dependent", table.name, entry.key))
        if change.type == DELETED:
            for dependent in self.dependents.get(entry.uid, ()):
                self.queue.add(("dependent", *dependent))
            if prev is not None and old_refs:
                for uid in old_refs:
                    self._requeue_owner(uid)
        elif entry.meta.get("deletionTimestamp") and {FOREGROUND, ORPHAN} & set(
            entry.meta.get("finalizers") or ()
        ):
            self.queue.add(("owner", table.name, entry.key))

    def _requeue_owner(self, uid: str) -> None:
        found = self.objects.storage.lookup_uid(uid)
        if found is not None:
            table, owner = found
            if owner.meta.get("deletionTimestamp"):
                self.queue.add(("owner", table.name, owner.key))

    # --- work ---------------------------------------------------------------------------------

    def _lookup(self, table_name: str, key: str) -> tuple[ResourceType, Entry] | None:
        rt = self.objects.registry.for_storage(table_name)
        table = self.objects.storage.tables.get(table_name)
        entry = table.objects.get(key) if table is not None else None
        return (rt, entry) if rt is not None and entry is not None else None

    def _sync(self, item: Hashable) -> None:
        kind, table_name, key = str(item[0]), str(item[1]), str(item[2])  # type: ignore[index]
        found = self._lookup(table_name, key)
        if found is None:
            return
        if kind == "owner":
            self._process_owner(*found)
        else:
            self._process_dependent(*found)

    def _owner_state(self, dependent: Entry, ref: Ref) -> str:
        """``absent``, ``waiting`` (foreground-deleting), ``solid`` or ``unknown``."""
        api_version, kind = ref.get("apiVersion", ""), ref.get("kind", "")
        group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
        known = [rt for rt in self.objects.registry if rt.group == group and rt.kind == kind]
        if not known:
            return "unknown"
        found = self.objects.storage.lookup_uid(ref["uid"])
        if found is None:
            return "absent"
        _, owner = found
        if owner.name != ref.get("name") or (
            owner.namespace and owner.namespace != dependent.namespace
        ):
            return "absent"
        finalizers = owner.meta.get("finalizers") or []
        if owner.meta.get("deletionTimestamp") and FOREGROUND in finalizers:
            return "waiting"
        return "solid"

    def _process_dependent(self, rt: ResourceType, entry: Entry) -> None:
        refs = _refs(entry)
        if not refs:
            return
        meta = entry.meta
        if meta.get("deletionTimestamp") and FOREGROUND not in (meta.get("finalizers") or []):
            return
        states = {r["uid"]: self._owner_state(entry, r) for r in refs}
        if "unknown" in states.values():
            return
        if "solid" in states.values():
            drop = {uid for uid, state in states.items() if state != "solid"}
            if drop:
                self._strip(rt, entry, drop)
            return
        own = meta.get("finalizers") or []
        if "waiting" in states.values() and self.dependents.get(entry.uid):
            policy = "Foreground"
        elif ORPHAN in own:
            policy = "Orphan"
        elif FOREGROUND in own:
            policy = "Foreground"
        else:
            policy = "Background"
        if meta.get("deletionTimestamp"):
            return
        with contextlib.suppress(errors.ApiError):
            self.objects.delete(
                rt, entry.namespace, entry.name, DeleteOptions(policy=policy, uid=entry.uid)
            )

    def _strip(self, rt: ResourceType, entry: Entry, uids: set[str]) -> None:
        new = entry.copy()
        refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") not in uids]
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            new["metadata"].pop("ownerReferences", None)
        table = self.objects.table(rt)
        self.objects.store(rt, table, entry, new, owner=FieldOwner(MANAGER))

    def _process_owner(self, rt: ResourceType, owner: Entry) -> None:
        finalizers = list(owner.meta.get("finalizers") or [])
        dependents = [self._lookup(t, k) for t, k in sorted(self.dependents.get(owner.uid, ()))]
        if ORPHAN in finalizers:
            for found in dependents:
                if found is not None:
                    self._strip(found[0], found[1], {owner.uid})
            self._remove_finalizer(rt, owner.key, ORPHAN)
            return
        if FOREGROUND not in finalizers:
            return
        blocking = False
        for found in dependents:
            if found is None:
                continue
            dep_rt, dependent = found
            ref = next((r for r in _refs(dependent) if r["uid"] == owner.uid), {})
            if ref.get("blockOwnerDeletion") is True:
                blocking = True
            self._process_dependent(dep_rt, dependent)
        if not blocking:
            self._remove_finalizer(rt, owner.key, FOREGROUND)

    def _remove_finalizer(self, rt: ResourceType, key: str, finalizer: str) -> None:
        table = self.objects.table(rt)
        current = table.objects.get(key)
        if current is None or finalizer not in (current.meta.get("finalizers") or []):
            return
        new = current.copy()
        remaining = [f for f in new["metadata"].get("finalizers") or [] if f != finalizer]
        if remaining:
            new["metadata"]["finalizers"] = remaining
        else:
            new["metadata"].pop("finalizers", None)
        self.objects.store(rt, table, current, new, owner=FieldOwner(MANAGER))
