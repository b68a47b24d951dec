"""Following a namespace's Pods through a rollout, event by event.

``async with pod_watch(kube, namespace, replicas) as watch:`` lists the Pods, then follows a
watch from that list's resourceVersion until the block ends (plus 0.2 s for the watch to
catch up when it ends normally). ``watch.deleted`` holds the Pods deleted, in order;
``watch.worst`` the most Pods missing or not Ready at once, counted against ``replicas``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

from proto.kube.client import Client
from proto.kube.resources import Resource

PODS = Resource("", "v1", "pods", "Pod", namespaced=True, subresources=("status",))


def ready(pod: dict[str, Any]) -> bool:
    """Whether the Pod's ``Ready`` condition is ``True``."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@dataclasses.dataclass
class PodWatch:
    replicas: int
    ready: dict[str, bool]
    deleted: list[str] = dataclasses.field(default_factory=list)
    worst: int = 0


@contextlib.asynccontextmanager
async def pod_watch(
    kube: Client,
    namespace: str,
    replicas: int,
    *,
    on_delete: Callable[[int], None] | None = None,
) -> AsyncIterator[PodWatch]:
    """See the module docstring; ``on_delete(n)`` runs on the n-th deletion."""
    listed = await kube.list(PODS, namespace=namespace)
    watch = PodWatch(replicas, {p["metadata"]["name"]: ready(p) for p in listed.items})

    async def follow() -> None:
        async for event in kube.watch(
            PODS, namespace=namespace, resource_version=listed.resource_version
        ):
            name = event.object.get("metadata", {}).get("name")
            if event.type == "DELETED":
                watch.ready.pop(name, None)
                watch.deleted.append(name)
                if on_delete is not None:
                    on_delete(len(watch.deleted))
            elif event.type in ("ADDED", "MODIFIED"):
                watch.ready[name] = ready(event.object)
            watch.worst = max(watch.worst, replicas - sum(watch.ready.values()))

    following = asyncio.ensure_future(follow())
    try:
        yield watch
        await asyncio.sleep(0.2)  # let the watch catch up
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
