"""Helpers for informer tests: objects, a recording handler, stepping a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from manager.informers.store import Cached, Store
from proto.kube.resources import Resource
from proto.runtime.clock import FakeClock

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)


class Stores(dict[str, Store]):
    """Caches by resource plural, as ``manager.informers.store.Stores``."""

    def store(self, resource: Resource) -> Store | None:
        return self.get(resource.name)


Seen = tuple[str, str | None, str | None, bool]
"""(type, old "name@rv", new "name@rv", initial)"""


def configmap(name: str, rv: str, *, namespace: str = "ns", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "resourceVersion": rv,
        },
        "data": data,
    }


def bookmark(rv: str, *, initial_end: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"resourceVersion": rv}
    if initial_end:
        metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def _label(cached: Cached | None) -> str | None:
    return None if cached is None else f"{cached.name}@{cached.resource_version}"


class Recorder:
    """An event handler that records what it is given, compactly."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []

    def __call__(self, type: str, old: Cached | None, new: Cached | None, initial: bool) -> None:
        self.seen.append((type, _label(old), _label(new), initial))

    def take(self) -> list[Seen]:
        seen, self.seen = self.seen, []
        return seen


async def eventually(
    condition: Callable[[], bool],
    *,
    clock: FakeClock | None = None,
    step: float = 1.0,
    limit: float = 10.0,
) -> None:
    """Wait (really) until ``condition()`` holds, advancing ``clock`` by ``step`` meanwhile."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("the condition did not come true in time")
        if clock is not None:
            clock.advance(step)
        await asyncio.sleep(0.01)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)
