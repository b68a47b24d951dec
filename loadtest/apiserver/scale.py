"""The ``/scale`` subresource (``autoscaling/v1`` Scale) of workloads and custom resources.

A Scale view is built from the object (``spec.replicas``, ``status.replicas`` and the label
selector, or the paths a CRD's ``subresources.scale`` names); writing one changes only the
replicas of the object, with the Scale's resourceVersion as precondition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadtest.apiserver.storage import Entry
from proto.api import selectors


@dataclass(frozen=True, slots=True)
class ScalePaths:
    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    selector: str = ""


WORKLOADS = ScalePaths(selector=".spec.selector")


def _get(obj: Any, path: str) -> Any:
    for part in path.strip(".").split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _set(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    for part in parts[:-1]:
        obj = obj.setdefault(part, {})
    obj[parts[-1]] = value


def view(entry: Entry, paths: ScalePaths) -> dict[str, Any]:
    meta = entry.meta
    status: dict[str, Any] = {"replicas": _get(entry.obj, paths.status_replicas) or 0}
    if paths.selector:
        selector = _get(entry.obj, paths.selector)
        if isinstance(selector, dict):
            status["selector"] = str(selectors.from_label_selector(selector))
        elif isinstance(selector, str) and selector:
            status["selector"] = selector
    keep = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in keep if k in meta},
        "spec": {"replicas": _get(entry.obj, paths.spec_replicas) or 0},
        "status": status,
    }


def apply(entry: Entry, scale: dict[str, Any], paths: ScalePaths) -> dict[str, Any]:
    """The object with the replicas of ``scale``; carries the Scale's resourceVersion."""
    obj = entry.copy()
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    _set(obj, paths.spec_replicas, replicas)
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    obj["metadata"]["resourceVersion"] = rv or str(entry.rv)
    return obj


def crd_paths(spec: dict[str, Any]) -> ScalePaths:
    return ScalePaths(
        spec.get("specReplicasPath", ".spec.replicas"),
        spec.get("statusReplicasPath", ".status.replicas"),
        spec.get("labelSelectorPath", ""),
    )
