"""FETCH answered with a SNAPSHOT from the coordinator's caches: what a worker gets for one
parent (``parent_of`` a key, then ``snapshot_of``, ``revisions_of``), and the server that sends
it or a NACK saying why not (``SnapshotServer``: the parent is looked up once per answer).

What a snapshot holds (the parent and its claimable children, as raw JSON):
- ``parent`` is the cached parent, or None when it is gone or no longer the controller's
  (``ControllerView.handles``: not selected and not carrying the controller's finalizer).
- ``children`` has one group per declared child type (``<Kind>.<apiVersion>``, present even
  when empty): what the controller kind says a parent may claim (``children_of``: for a
  CompositeController its owned children and the orphans its selector matches, for a
  DecoratorController its annotated attachments). Each object appears once; order is stable.
- ``revisions`` (``revisions_of``) are the parent's ControllerRevisions, for a controller
  that keeps them (``manager.controllers.view.keeps_revisions``); they are not among
  ``children``.
- ``related`` is what ``manager.routing.related`` selected for the parent (controllers with a
  customize hook), empty otherwise.
- Payloads are the bytes the API server sent; nothing is decoded or re-encoded here.

What ``SnapshotServer.fetch`` answers:
- Only the owner of the key's slot, in the current epoch, for a known controller and its
  parent resource gets a snapshot (else NACK STALE_EPOCH, NOT_OWNER, UNKNOWN_CONTROLLER,
  UNKNOWN_KEY).
- Read-your-writes: a FETCH names, per group-resource, the resourceVersion of the worker's
  last write (its barrier). The snapshot is taken only once the informer of that resource
  has seen it, or ``barrier_timeout`` has passed (then it is taken anyway and counted).
- For controllers with a customize hook, the snapshot waits (same timeout) until the
  parent's related objects are known, and under rolling updates those of each older
  revision that owns children (``KeepsRevisions.revision_parents``); if they still are not,
  NACK NOT_READY. The snapshot's ``revision_related`` carries the older revisions' related
  objects where they differ from the live parent's.
- A snapshot carries the parent's ControllerRevisions (``revisions_of``)
  when its controller keeps them (rolling updates), none otherwise.
- While a snapshot waits, pushes of its key still go out (the worker that fetches drops
  them, and the snapshot, sent after them, reflects them; a worker that gave up waiting, or
  the slot's new owner, runs the key). A snapshot whose slot changed owner meanwhile is not
  sent.
- Per-controller limits: right before a snapshot goes out, ``manager.term.throttle`` says
  whether it may; a snapshot that holds a permit says so (``permit``: the worker answers DONE
  when its reconcile ends), and one that may not go out now is NACK THROTTLED instead (the
  throttle pushes the key again when its turn comes).
- ``close()`` cancels the snapshots still waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from manager.controllers.running import ControllerSet
from manager.controllers.view import (
    ControllerView,
    Versions,
    group_key,
    group_resource,
    keeps_revisions,
)
from manager.informers.shared import Informers
from manager.informers.store import Cached, Stores
from manager.informers.watermark import parse_resource_version
from manager.routing.related import Related
from manager.term.dispatch import Dispatch, SlotOf
from manager.term.membership import SlotOwners
from manager.term.metrics import TermMetrics
from manager.term.throttle import Admission, Throttle
from proto.kube.resources import Resource
from proto.wire import Fetch, Nack, NackReason, ParentKey, Snapshot

Children = dict[str, tuple[bytes, ...]]
RelatedOf = Callable[[ControllerView, Cached], Children]


def parent_of(view: ControllerView, key: ParentKey, stores: Stores) -> Cached | None:
    """The cached parent ``key`` names, if ``view`` handles it; None otherwise."""
    resource = view.parent_resource(key)
    store = stores.store(resource) if resource is not None else None
    if resource is None or store is None:
        return None
    parent = store.get(key.namespace, key.name)
    return parent if parent is not None and view.handles(resource, parent) else None


def snapshot_of(
    view: ControllerView,
    parent: Cached | None,
    *,
    stores: Stores,
    related: RelatedOf | None = None,
) -> tuple[bytes | None, Children, Children]:
    """(parent, children, related) of ``parent`` (``parent_of`` a key; None: gone)."""
    if parent is None:
        return None, {}, {}
    keeper = keeps_revisions(view)
    revisions = keeper.revision_resource() if keeper is not None else None
    children: Children = {}
    for resource in view.children:
        if resource is revisions:
            continue
        store = stores.store(resource)
        children[group_key(resource)] = (
            () if store is None else view.children_of(parent, resource, store)
        )
    return parent.raw, children, related(view, parent) if related is not None else {}


def revisions_of(
    view: ControllerView, parent: Cached | None, *, stores: Stores
) -> tuple[bytes, ...]:
    """The ControllerRevisions of ``parent`` (``parent_of`` a key): none when the controller
    keeps none, or the parent is gone."""
    keeper = keeps_revisions(view)
    resource = keeper.revision_resource() if keeper is not None else None
    store = stores.store(resource) if resource is not None else None
    if keeper is None or store is None or parent is None:
        return ()
    return keeper.revisions_of(parent, store)


class SnapshotServer:
    def __init__(
        self,
        *,
        epoch: int,
        owners: SlotOwners,
        slots: SlotOf,
        controllers: ControllerSet,
        informers: Informers,
        related: Related,
        dispatch: Dispatch,
        throttle: Throttle,
        metrics: TermMetrics,
        barrier_timeout: float,
    ) -> None:
        self._epoch = epoch
        self._owners = owners
        self._slots = slots
        self._controllers = controllers
        self._informers = informers
        self._related = related
        self._dispatch = dispatch
        self._throttle = throttle
        self._metrics = metrics
        self._barrier_timeout = barrier_timeout
        self._tasks: set[asyncio.Task[None]] = set()

    def fetch(self, worker: str, msg: Fetch) -> None:
        key = msg.key
        if msg.epoch != self._epoch:
            detail = f"current epoch is {self._epoch}"
            return self._refuse(worker, msg, NackReason.STALE_EPOCH, detail)
        if self._owners.owner(self._slots.slot(key)) != worker:
            return self._refuse(worker, msg, NackReason.NOT_OWNER, "the key's slot is not yours")
        view = self._controllers.get((key.kind, key.controller))
        if view is None:
            detail = f"no {key.kind} {key.controller}"
            return self._refuse(worker, msg, NackReason.UNKNOWN_CONTROLLER, detail)
        resource = view.parent_resource(key)
        if resource is None:
            detail = f"{key.resource} is not this controller's parent"
            return self._refuse(worker, msg, NackReason.UNKNOWN_KEY, detail)
        waits = self._barrier_waits(view, msg.barrier)
        parent = parent_of(view, key, self._informers)
        if parent is not None and view.customize is not None:
            versions = _versions(view, parent, revisions_of(view, parent, stores=self._informers))
            if not self._related.ready(view, resource, parent, versions):
                waits.append(
                    asyncio.ensure_future(
                        self._related.wait_ready(
                            view, resource, parent, self._barrier_timeout, versions
                        )
                    )
                )
        if waits:
            task = asyncio.ensure_future(self._answer_later(worker, msg, view, waits))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._answer(worker, msg, view, resource, parent)
        return None

    def close(self) -> list[asyncio.Task[None]]:
        """Cancel the snapshots still waiting; return their tasks (to be awaited)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        return tasks

    def _refuse(self, worker: str, msg: Fetch, reason: NackReason, detail: str) -> None:
        self._metrics.fetch(reason.value)
        self._dispatch.send(worker, Nack(self._epoch, msg.request_id, reason, detail))

    def _barrier_waits(
        self, view: ControllerView, barrier: Mapping[str, str]
    ) -> list[asyncio.Future[bool]]:
        waits: list[asyncio.Future[bool]] = []
        for resource in (*view.parents, *view.children):
            wanted = barrier.get(group_resource(resource))
            if wanted is None:
                continue
            informer = self._informers.get(resource)
            if informer is None:
                continue
            have = parse_resource_version(informer.last_resource_version)
            need = parse_resource_version(wanted)
            if have is None or need is None or have >= need:
                continue
            waits.append(asyncio.ensure_future(informer.wait_for(wanted, self._barrier_timeout)))
        return waits

    async def _answer_later(
        self, worker: str, msg: Fetch, view: ControllerView, waits: list[asyncio.Future[bool]]
    ) -> None:
        results = await asyncio.gather(*waits)
        if not all(results):
            self._metrics.barrier_timeout()
        resource = view.parent_resource(msg.key)
        if resource is not None and self._owners.owner(self._slots.slot(msg.key)) == worker:
            self._answer(worker, msg, view, resource, parent_of(view, msg.key, self._informers))

    def _answer(
        self,
        worker: str,
        msg: Fetch,
        view: ControllerView,
        resource: Resource,
        parent: Cached | None,
    ) -> None:
        """Send the snapshot of ``parent`` (as the cache holds it now; None: gone) of
        ``resource``, or NACK NOT_READY or THROTTLED."""
        related = None
        revision_related: dict[str, dict[str, tuple[bytes, ...]]] = {}
        revisions = revisions_of(view, parent, stores=self._informers)
        if view.customize is not None:
            if parent is not None:
                versions = _versions(view, parent, revisions)
                if not self._related.ready(view, resource, parent, versions):
                    detail = "the customize hook has not answered for this parent yet"
                    return self._refuse(worker, msg, NackReason.NOT_READY, detail)
                revision_related = self._related.revision_related_of(view, parent)
            related = self._related.related_of
        admission = self._throttle.admit(worker, msg.key)
        if admission is Admission.THROTTLED:
            detail = f"{msg.key.kind} {msg.key.controller} is at its limit"
            return self._refuse(worker, msg, NackReason.THROTTLED, detail)
        raw, children, objects = snapshot_of(view, parent, stores=self._informers, related=related)
        self._metrics.fetch("snapshot")
        snapshot = Snapshot(
            self._epoch,
            msg.request_id,
            msg.key,
            raw,
            children,
            revisions,
            objects,
            revision_related,
            admission is Admission.PERMIT,
        )
        self._dispatch.send(worker, snapshot)
        return None


def _versions(view: ControllerView, parent: Cached, revisions: tuple[bytes, ...]) -> Versions:
    """The older revisions' parents the customize hook must answer for (rolling only)."""
    keeper = keeps_revisions(view)
    return keeper.revision_parents(parent, revisions) if keeper is not None else ()
