"""The newest resourceVersion a watch has delivered, and waiting until it reaches one.

Why an integer comparison is valid: Kubernetes resourceVersions are etcd revisions, one
counter for the whole cluster that every write increments. The events of one watch (and the
bookmarks and lists of one resource) therefore carry increasing integers, and "this stream has
delivered revision N" means it has delivered every change of that resource up to N. A
resourceVersion is opaque by contract; one that is not a plain integer (an aggregated API
server may use another scheme) cannot be compared, and is reported as such.

- ``advance(rv)`` raises the mark to ``rv`` when that is a larger integer; anything else
  leaves it alone. It wakes every waiter whose target is now reached.
- ``wait_for(rv, timeout)`` is True at once when the mark is at or past ``rv``, False at once
  for a non-integer ``rv``, else True when the mark reaches it, False after ``timeout``
  seconds on the injected clock, or when ``close()`` is called first.
- Waiters are kept in a heap by target, so an advance costs O(1) when nobody waits.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.deadline import within


def parse_resource_version(value: str) -> int | None:
    """The revision a resourceVersion denotes, or None when it is not a plain integer."""
    if value.isascii() and value.isdigit():
        return int(value)
    return None


class Watermark:
    """The highest revision seen so far (see the module docstring)."""

    __slots__ = ("_clock", "_seq", "_waiters", "revision")

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self.revision = -1
        """The highest integer resourceVersion seen; -1 before the first."""
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._seq = itertools.count()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def advance(self, resource_version: str) -> None:
        value = parse_resource_version(resource_version)
        if value is None or value <= self.revision:
            return
        self.revision = value
        waiters = self._waiters
        while waiters and waiters[0][0] <= value:
            reached = heapq.heappop(waiters)[2]
            if not reached.done():
                reached.set_result(True)

    async def wait_for(self, resource_version: str, timeout: float) -> bool:  # noqa: ASYNC109
        target = parse_resource_version(resource_version)
        if target is None:
            return False
        if target <= self.revision:
            return True
        if timeout <= 0:
            return False
        reached: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        entry = (target, next(self._seq), reached)
        heapq.heappush(self._waiters, entry)
        try:
            return await within(self._clock, timeout, reached)
        except TimeoutError:
            return False
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)
                heapq.heapify(self._waiters)

    def close(self) -> None:
        """Answer every pending waiter with False."""
        for _, _, reached in self._waiters:
            if not reached.done():
                reached.set_result(False)
        self._waiters.clear()
