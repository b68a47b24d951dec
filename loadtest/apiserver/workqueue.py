"""The built-in controllers' queue: deduplicated keys, drained soon after they are added.

Storage listeners run inside a write and must not write themselves; they ``add`` keys here.
The queue drains on a later event-loop iteration (``call_soon``), so controllers act
asynchronously, like the real ones, but within the same loop turn sequence (promptly).
Keys added while draining are processed in the same drain. A failing sync is logged and the
key dropped: a controller bug must not take the API server down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable

from proto.runtime.logs import get_logger

_log = get_logger(__name__)


class WorkQueue:
    def __init__(self, name: str, sync: Callable[[Hashable], None]) -> None:
        self.name = name
        self._sync = sync
        self._pending: dict[Hashable, None] = {}
        self._scheduled = False

    def add(self, key: Hashable) -> None:
        self._pending[key] = None
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._drain)

    def _drain(self) -> None:
        self._scheduled = False
        rounds = 0
        while self._pending and rounds < 10_000:
            key = next(iter(self._pending))
            del self._pending[key]
            rounds += 1
            try:
                self._sync(key)
            except Exception:
                _log.exception("controller sync failed", controller=self.name, key=str(key))
        if self._pending and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._drain)
