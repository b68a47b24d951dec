"""Kubernetes Events, written the way client-go's event recorder writes them.

- ``EventRecorder.emit(obj, type, reason, message)`` never blocks and never raises: the
  Event is written by a background task; failures are logged. Events of cluster-scoped
  objects land in the ``default`` namespace (as Metacontroller's do).
- Repeats of the same (object, type, reason, message) within ``aggregate_window`` update the
  existing Event's ``count`` and ``lastTimestamp`` instead of creating a new one; within
  ``min_interval`` they are not written at all (a hot error loop costs no API writes).
- At most ``max_pending`` writes wait at once; beyond that new Events are dropped (logged).
- ``source.component`` (and ``reportingComponent``) is the component given, ``metacontroller``
  for metashard, so tools that filter Metacontroller's events keep working.
"""

from __future__ import annotations

import asyncio
import datetime
import secrets
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from proto.kube.errors import KubeError
from proto.kube.resources import Resource
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger

log = get_logger("metashard.events")

EVENTS = Resource(
    group="",
    version="v1",
    name="events",
    kind="Event",
    namespaced=True,
    verbs=("create", "get", "list", "patch", "watch"),
)

NORMAL = "Normal"
WARNING = "Warning"


def _timestamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class _Seen:
    namespace: str
    name: str
    count: int
    written_at: float


class EventWriter(Protocol):
    """What the recorder needs from the client (``proto.kube.Client`` conforms)."""

    async def create(
        self, resource: Resource, body: Any, *, namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def patch(
        self, resource: Resource, name: str, patch: Any, *, namespace: str | None = None
    ) -> dict[str, Any]: ...


class EventRecorder:
    def __init__(
        self,
        client: EventWriter,
        *,
        component: str,
        instance: str = "",
        clock: Clock = SYSTEM_CLOCK,
        aggregate_window: float = 600.0,
        min_interval: float = 10.0,
        max_pending: int = 256,
        remember: int = 4096,
    ) -> None:
        self._client = client
        self._component = component
        self._instance = instance
        self._clock = clock
        self._window = aggregate_window
        self._min_interval = min_interval
        self._max_pending = max_pending
        self._remember = remember
        self._seen: OrderedDict[tuple[str, str, str, str], _Seen] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    def emit(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Record an Event about ``obj`` (a Kubernetes object: apiVersion, kind, metadata)."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        key = (uid, type, reason, message)
        now = self._clock.now()
        seen = self._seen.get(key)
        if seen is not None and now - seen.written_at < self._min_interval:
            return
        if len(self._tasks) >= self._max_pending:
            log.warning("event dropped: too many pending", reason=reason, object=meta.get("name"))
            return
        task = asyncio.create_task(self._write(obj, key, type, reason, message, now))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        """Wait for the pending writes (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _write(
        self,
        obj: Mapping[str, Any],
        key: tuple[str, str, str, str],
        type: str,
        reason: str,
        message: str,
        now: float,
    ) -> None:
        meta = obj.get("metadata") or {}
        stamp = _timestamp()
        seen = self._seen.get(key)
        try:
            if seen is not None and now - seen.written_at < self._window:
                seen.count += 1
                seen.written_at = now
                await self._client.patch(
                    EVENTS,
                    seen.name,
                    {"count": seen.count, "lastTimestamp": stamp},
                    namespace=seen.namespace,
                )
                return
            namespace = meta.get("namespace") or "default"
            name = f"{meta.get('name', 'unknown')}.{secrets.token_hex(8)}"
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion", ""),
                    "kind": obj.get("kind", ""),
                    "name": meta.get("name", ""),
                    "namespace": meta.get("namespace", ""),
                    "uid": meta.get("uid", ""),
                    "resourceVersion": meta.get("resourceVersion", ""),
                },
                "reason": reason,
                "message": message,
                "type": type,
                "source": {"component": self._component},
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
                "reportingComponent": self._component,
                "reportingInstance": self._instance,
            }
            await self._client.create(EVENTS, body, namespace=namespace)
            self._seen[key] = _Seen(namespace, name, 1, now)
            if len(self._seen) > self._remember:
                self._seen.popitem(last=False)
        except KubeError as e:
            log.warning("event not written", reason=reason, object=meta.get("name"), error=str(e))
