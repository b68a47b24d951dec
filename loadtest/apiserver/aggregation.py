"""The clusterrole-aggregation controller of kube-controller-manager, in process.

Whenever any ClusterRole changes, every ClusterRole with an ``aggregationRule`` is synced:
its ``rules`` become ``rbac.aggregated_rules`` (the union of the selected roles' rules),
written as the real controller writes them: a forced server-side apply of
``{metadata: {name}, rules}`` by manager ``clusterrole-aggregation-controller``
(``applying.apply_config``), so the role's managedFields get an ``Apply`` entry owning
``f:rules``. A hand edit of an aggregated role's rules is therefore reverted right after it
is stored (the forced apply takes ``rules`` back from the editor's entry), as on a real
cluster. An unchanged union writes nothing; an empty union leaves ``rules: null`` as
created.
"""

from __future__ import annotations

from collections.abc import Hashable

from loadtest.apiserver import applying
from loadtest.apiserver.lifecycle import Objects
from loadtest.apiserver.rbac import aggregated_rules
from loadtest.apiserver.storage import Change, Table
from loadtest.apiserver.workqueue import WorkQueue

CLUSTER_ROLES = "rbac.authorization.k8s.io/clusterroles"
MANAGER = "clusterrole-aggregation-controller"


class AggregationController:
    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self.queue = WorkQueue("clusterrole-aggregation", self._sync)
        objects.storage.listen(self._observe)

    def _observe(self, table: Table, change: Change) -> None:
        if table.name != CLUSTER_ROLES:
            return
        for entry in table.entries():
            if entry.obj.get("aggregationRule"):
                self.queue.add(entry.name)

    def _sync(self, key: Hashable) -> None:
        table = self.objects.storage.table(CLUSTER_ROLES)
        entry = table.get("", str(key))
        rt = self.objects.registry.for_storage(CLUSTER_ROLES)
        if entry is None or rt is None or entry.meta.get("deletionTimestamp"):
            return
        wanted = aggregated_rules(entry.obj, [e.obj for e in table.entries()])
        if wanted is None or wanted == (entry.obj.get("rules") or []):
            return
        config = {
            "apiVersion": rt.api_version,
            "kind": rt.kind,
            "metadata": {"name": entry.name},
            "rules": [dict(rule) for rule in wanted],
        }
        applying.apply_config(
            self.objects, rt, "", entry.name, "", config=config, manager=MANAGER, force=True
        )
