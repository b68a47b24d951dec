"""A fake kubelet: marks Pods Running and Ready (off by default).

When enabled, every pending Pod that is not being deleted gets a status like a kubelet's
after its containers started: phase ``Running``, the ``PodReadyToStartContainers``,
``Initialized``, ``Ready``, ``ContainersReady`` and ``PodScheduled`` conditions, one running
and ready ``containerStatuses`` entry per container, ``podIP``/``podIPs``, ``hostIP`` and
``startTime``. ``mark_ready(namespace, name)`` does the same for one Pod on demand.
Nothing is ever run, no node exists and graceful deletion is not modelled.
"""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Hashable
from typing import Any

from loadtest.apiserver import timefmt
from loadtest.apiserver.lifecycle import Objects
from loadtest.apiserver.storage import DELETED, Change, Table
from loadtest.apiserver.workqueue import WorkQueue

PODS = "/pods"
HOST_IP = "10.0.0.10"
READY_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
)
"""The condition types of a running, ready Pod, in a kubelet's order; each ``True``."""


class Kubelet:
    def __init__(self, objects: Objects, *, enabled: bool = False) -> None:
        self.objects = objects
        self.enabled = enabled
        self._ips = itertools.islice(ipaddress.ip_network("10.244.0.0/16").hosts(), 1, None)
        self.queue = WorkQueue("kubelet", self._sync)
        objects.storage.listen(self._observe)

    def enable(self) -> None:
        """Start marking pods ready, including those already pending."""
        self.enabled = True
        for entry in self.objects.storage.table(PODS).objects.values():
            self.queue.add((entry.namespace, entry.name))

    def disable(self) -> None:
        self.enabled = False

    def _observe(self, table: Table, change: Change) -> None:
        if self.enabled and table.name == PODS and change.type != DELETED:
            self.queue.add((change.entry.namespace, change.entry.name))

    def _sync(self, key: Hashable) -> None:
        namespace, name = str(key[0]), str(key[1])  # type: ignore[index]
        pod = self.objects.storage.table(PODS).get(namespace, name)
        if (
            self.enabled
            and pod is not None
            and not pod.meta.get("deletionTimestamp")
            and (pod.obj.get("status") or {}).get("phase", "Pending") == "Pending"
        ):
            self.mark_ready(namespace, name)

    def mark_ready(self, namespace: str, name: str) -> dict[str, Any]:
        """Write a Running/Ready status for one Pod; returns the stored object."""
        rt = self.objects.registry.get("", "v1", "pods")
        assert rt is not None
        pod = self.objects.get(rt, namespace, name)
        now = timefmt.now()
        old = pod.obj.get("status") or {}
        ip = old.get("podIP") or str(next(self._ips))
        spec = pod.obj.get("spec") or {}
        conditions = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            for t in READY_CONDITIONS
        ]
        statuses = [
            {
                "name": c.get("name", ""),
                "state": {"running": {"startedAt": now}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": c.get("image", ""),
                "imageID": "",
                "containerID": f"emulated://{pod.uid}/{c.get('name', '')}",
                "started": True,
            }
            for c in spec.get("containers") or []
            if isinstance(c, dict)
        ]
        status = {
            **old,
            "phase": "Running",
            "conditions": conditions,
            "hostIP": HOST_IP,
            "hostIPs": [{"ip": HOST_IP}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": old.get("startTime", now),
            "containerStatuses": statuses,
        }
        body = {"metadata": {"name": name, "namespace": namespace}, "status": status}
        return self.objects.update(rt, namespace, name, body, subresource="status").obj
