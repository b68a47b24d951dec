"""The process's shared informers: one per resource, reference-counted.

Invariants:

- ``acquire(resource)`` returns the one informer of that resource (keyed by group, version
  and plural name), creating and starting it (a task running ``Informer.run``) on first use;
  every call counts one user. ``release(resource)`` drops one user; the last release stops
  the informer, waits until its task has ended and removes its metric series.
- Each user says what it needs of the resource: every object (``selector=None``) or only
  those a label selector matches. The informer lists and watches with the ``cover`` of
  the users' selectors (``proto.api.selectors``), so the server sends, and the store keeps,
  only objects some user needs, a superset of them; one user that needs everything makes it
  watch everything. When the users change so does its selector (``Informer.reselect``: a
  relist). Users still apply their own selectors to what the informer holds.
- Starting or stopping one informer never touches another.
- Every informer tells ``refusals`` when the API server refuses its list or watch (403).
- ``synced`` is True when every informer acquired now has synced (vacuously with none);
  ``wait_synced()`` returns once that holds, also when informers are acquired or released
  while it waits.
- An informer whose task ends on its own (a defect: ``run`` only ends when cancelled) is
  logged with its exception; it stays registered and unsynced, so readiness says so.
- Must be used from one event loop (``acquire`` creates tasks on the running loop).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from manager.informers.gcguard import PROCESS_GC_GUARD, GcGuard
from manager.informers.informer import (
    NO_REFUSALS,
    Informer,
    InformerOptions,
    ListerWatcher,
    RefusalSink,
    resource_label,
)
from manager.informers.metrics import (
    NO_INFORMER_METRICS,
    InformerMetrics,
    InformerMetricsFactory,
)
from manager.informers.store import Store
from proto.api.selectors import Selector, cover
from proto.kube.resources import Resource
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger

ResourceKey = tuple[str, str, str]
"""(group, version, plural name)."""


def _key(resource: Resource) -> ResourceKey:
    return (resource.group, resource.version, resource.name)


@dataclass(slots=True)
class _Entry:
    informer: Informer
    task: asyncio.Task[None]
    metrics: InformerMetrics
    needs: list[Selector | None] = field(default_factory=list)
    """One per user: the label selector it needs, None for every object."""


def combine(needs: Iterable[Selector | None]) -> Selector | None:
    """What users with ``needs`` need together: the ``cover`` of their selectors; None (every
    object) when one of them needs every object, or when the cover restricts nothing."""
    selectors: list[Selector] = []
    for need in needs:
        if need is None:
            return None
        selectors.append(need)
    covered = cover(selectors)
    return None if covered.empty or covered.matches_nothing else covered


def watch_selector(needs: Iterable[Selector | None]) -> str:
    """The label selector an informer's list and watch carry for ``needs`` ("": none)."""
    combined = combine(needs)
    return "" if combined is None else str(combined)


class Informers:
    """The shared informers of one client (see the module docstring)."""

    def __init__(
        self,
        client: ListerWatcher,
        *,
        options: InformerOptions | None = None,
        clock: Clock = SYSTEM_CLOCK,
        metrics: InformerMetricsFactory = NO_INFORMER_METRICS,
        gc_guard: GcGuard = PROCESS_GC_GUARD,
        rng: random.Random | None = None,
        refusals: RefusalSink = NO_REFUSALS,
    ) -> None:
        self._client = client
        self._refusals = refusals
        self._options = options
        self._clock = clock
        self._metrics = metrics
        self._gc = gc_guard
        self._rng = rng if rng is not None else random.Random()
        self._entries: dict[ResourceKey, _Entry] = {}
        self._changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, resource: Resource) -> Informer | None:
        """The running informer of ``resource``, without acquiring it."""
        entry = self._entries.get(_key(resource))
        return entry.informer if entry is not None else None

    def store(self, resource: Resource) -> Store | None:
        """The cache of ``resource``'s running informer (None when none runs)."""
        entry = self._entries.get(_key(resource))
        return entry.informer.store if entry is not None else None

    def users(self, resource: Resource) -> int:
        entry = self._entries.get(_key(resource))
        return len(entry.needs) if entry is not None else 0

    def acquire(self, resource: Resource, *, selector: Selector | None = None) -> Informer:
        """The informer of ``resource``, started if it is not running; one more user, who
        needs what ``selector`` matches (None: every object)."""
        key = _key(resource)
        entry = self._entries.get(key)
        if entry is None:
            metrics = self._metrics.for_resource(resource_label(resource))
            informer = Informer(
                self._client,
                resource,
                label_selector=watch_selector([selector]),
                options=self._options,
                clock=self._clock,
                metrics=metrics,
                gc_guard=self._gc,
                rng=random.Random(self._rng.random()),
                refusals=self._refusals,
            )
            task = asyncio.get_running_loop().create_task(
                informer.run(), name=f"informer {resource_label(resource)}"
            )
            task.add_done_callback(self._ended)
            entry = self._entries[key] = _Entry(informer, task, metrics)
            informer.add_synced_callback(self._notify)
            self._notify()
        entry.needs.append(selector)
        entry.informer.reselect(watch_selector(entry.needs))
        return entry.informer

    def reselect(self, resource: Resource, old: Selector | None, new: Selector | None) -> None:
        """A user of ``resource`` that needed ``old`` now needs ``new``. ``KeyError`` if no
        user of it needs ``old``."""
        entry = self._user(resource, old)
        entry.needs[entry.needs.index(old)] = new
        entry.informer.reselect(watch_selector(entry.needs))

    async def release(self, resource: Resource, *, selector: Selector | None = None) -> None:
        """One user less (the one that acquired with ``selector``); the last one stops the
        informer. ``KeyError`` if no such user."""
        key = _key(resource)
        entry = self._user(resource, selector)
        entry.needs.remove(selector)
        if entry.needs:
            entry.informer.reselect(watch_selector(entry.needs))
            return
        del self._entries[key]
        self._notify()
        await self._stop(entry)

    def _user(self, resource: Resource, selector: Selector | None) -> _Entry:
        entry = self._entries.get(_key(resource))
        if entry is None or selector not in entry.needs:
            raise KeyError(f"the informer of {resource} is not acquired with {selector}")
        return entry

    async def close(self) -> None:
        """Stop every informer."""
        entries = list(self._entries.values())
        self._entries.clear()
        self._notify()
        await asyncio.gather(*(self._stop(e) for e in entries))

    @property
    def synced(self) -> bool:
        return all(e.informer.synced for e in self._entries.values())

    async def wait_synced(self) -> None:
        while True:
            changed = self._changed
            if self.synced:
                return
            await changed.wait()

    async def _stop(self, entry: _Entry) -> None:
        entry.task.cancel()
        await asyncio.wait([entry.task])
        entry.metrics.forget()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        get_logger(__name__).error(
            "an informer stopped on its own", task=task.get_name(), exc_info=exc
        )
