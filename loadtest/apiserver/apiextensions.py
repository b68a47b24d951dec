"""The apiextensions controllers, in process: serving CRDs and cleaning them up.

- A new or changed CRD is (re)registered: its served versions become resources in the
  ``Registry`` (so discovery and the REST paths follow), then the establishing controller
  writes ``NamesAccepted``/``Established`` and ``acceptedNames`` (a status write with its own
  resourceVersion, after the create, as in the real server).
- A deleted CRD (which the API server gave the ``customresourcecleanup`` finalizer) has all
  its objects deleted; once none is left the finalizer goes, the CRD is removed, its
  resources stop being served and open watches on them end.
"""

from __future__ import annotations

from collections.abc import Hashable

from loadtest.apiserver import crd, errors, timefmt
from loadtest.apiserver.lifecycle import DeleteOptions, Objects
from loadtest.apiserver.ownership import FieldOwner
from loadtest.apiserver.registry import ResourceType
from loadtest.apiserver.storage import DELETED, Change, Table
from loadtest.apiserver.workqueue import WorkQueue

CRDS = crd.CRDS
MANAGER = "kube-apiserver"  # the field manager of the CRD status this controller writes


class CrdController:
    def __init__(self, objects: Objects, crd_type: ResourceType) -> None:
        self.objects = objects
        self.crd_type = crd_type
        self.served: dict[str, str] = {}  # CRD name -> storage table of its objects
        self.by_storage: dict[str, str] = {}
        self.specs: dict[str, object] = {}
        self.queue = WorkQueue("apiextensions", self._sync)
        objects.storage.listen(self._observe)

    def _observe(self, table: Table, change: Change) -> None:
        if table.name == CRDS:
            self.queue.add(change.entry.name)
        elif change.type == DELETED and table.name in self.by_storage:
            name = self.by_storage[table.name]
            definition = self.objects.storage.table(CRDS).get("", name)
            if definition is not None and definition.meta.get("deletionTimestamp"):
                self.queue.add(name)

    def _sync(self, key: Hashable) -> None:
        name = str(key)
        table = self.objects.storage.table(CRDS)
        current = table.get("", name)
        if current is None:
            self._unserve(name)
            return
        obj = current.obj
        storage_name = f"{obj['spec']['group']}/{obj['spec']['names']['plural']}"
        if obj["metadata"].get("deletionTimestamp"):
            self._cleanup(name, storage_name)
            return
        if self.specs.get(name) != obj["spec"]:
            self.objects.registry.remove_storage(storage_name)
            for rt in crd.served_types(obj):
                self.objects.registry.add(rt)
            self.specs[name] = obj["spec"]
            self.served[name] = storage_name
            self.by_storage[storage_name] = name
        conditions = (obj.get("status") or {}).get("conditions") or []
        if not any(
            c.get("type") == "Established" and c.get("status") == "True" for c in conditions
        ):
            body = {"metadata": {"name": name}, "status": crd.established(obj, timefmt.now())}
            owner = FieldOwner(MANAGER, "status")
            self.objects.update(self.crd_type, "", name, body, subresource="status", owner=owner)

    def _cleanup(self, name: str, storage_name: str) -> None:
        rt = next((r for r in self.objects.registry if r.storage == storage_name), None)
        instances = self.objects.storage.tables.get(storage_name)
        if rt is not None and instances is not None:
            for entry in list(instances.objects.values()):
                if not entry.meta.get("deletionTimestamp"):
                    try:
                        self.objects.delete(
                            rt, entry.namespace, entry.name, DeleteOptions(policy="Background")
                        )
                    except errors.ApiError:
                        continue
            if instances.objects:
                return
        table = self.objects.storage.table(CRDS)
        current = table.get("", name)
        if current is None:
            return
        new = current.copy()
        finalizers = [
            f for f in new["metadata"].get("finalizers") or [] if f != crd.CLEANUP_FINALIZER
        ]
        if finalizers:
            new["metadata"]["finalizers"] = finalizers
        else:
            new["metadata"].pop("finalizers", None)
        self.objects.store(self.crd_type, table, current, new)

    def _unserve(self, name: str) -> None:
        storage_name = self.served.pop(name, None)
        self.specs.pop(name, None)
        if storage_name is None:
            return
        self.by_storage.pop(storage_name, None)
        self.objects.registry.remove_storage(storage_name)
        table = self.objects.storage.tables.get(storage_name)
        if table is not None:
            for subscriber in list(table.subscribers):
                close = getattr(subscriber, "close", None)
                if close is not None:
                    close()
        self.objects.storage.drop_table(storage_name)
