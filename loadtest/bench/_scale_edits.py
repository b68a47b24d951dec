"""Edits of parents timed to the moment their children carry the edit, as the watch shows it.

- ``Edits`` is the bookkeeping, pure: ``expect(name, data, at)`` before the benchmark writes
  ``spec.data = data`` to parent ``name`` at time ``at``; ``observe(name, cms, now)`` after
  every watch event of that parent or its children, with the checker's ConfigMaps (name ->
  (data, owner uid)). An edit resolves when all K children ``<name>-<i>`` hold
  ``child_data(data, i)``: its latency is ``now - at``. A newer edit of the same parent
  replaces an unresolved one (which then never resolves: its children never carry it).
- ``edit_clock`` is the shared harness's convergence checker (list+watch of the namespace's
  Fanouts and ConfigMaps) feeding an ``Edits`` from each event it evaluates: one watch serves
  both the whole-job convergence of a cold start and the timing of single edits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

ChildData = Callable[[str, int], dict[str, str]]


class Edits:
    def __init__(self, *, k: int, child_data: ChildData) -> None:
        self._k = k
        self._child_data = child_data
        self._pending: dict[str, tuple[str, float]] = {}
        self.latencies: list[float] = []  # of resolved edits, in the order they resolved
        self.last_resolved: float | None = None  # the time the last one resolved
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def expect(self, name: str, data: str, at: float) -> None:
        self._pending[name] = (data, at)
        self._idle.clear()

    def observe(self, name: str, cms: Mapping[str, tuple[Any, Any]], now: float) -> None:
        edit = self._pending.get(name)
        if edit is None:
            return
        data, at = edit
        for i in range(self._k):
            child = cms.get(f"{name}-{i}")
            if child is None or child[0] != self._child_data(data, i):
                return
        del self._pending[name]
        self.latencies.append(now - at)
        self.last_resolved = now
        if not self._pending:
            self._idle.set()

    async def wait(self, within: float) -> bool:
        """True once no edit is pending; False after ``within`` seconds."""
        try:
            await asyncio.wait_for(self._idle.wait(), within)
        except TimeoutError:
            return False
        return True


def edit_clock(h: Any, kube: Any, ns: str, n: int, k: int) -> Any:
    """The harness's ``Checker`` of namespace ``ns`` (N parents x K) with an ``Edits`` as
    ``.edits``, fed at each event (see the module docstring)."""
    base: Any = h.checker.Checker

    class EditClock(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(kube, ns, n, k)
            self.edits = Edits(k=k, child_data=h.workload.child_data)

        def _eval(self, name: str) -> None:
            super()._eval(name)
            self.edits.observe(name, self.cms, time.perf_counter())

    return EditClock()
