"""Customize hooks and the related objects they select, on the coordinator.

Contract:
- For every parent of a controller that has a customize hook, the hook is called once per
  parent version that matters (uid and ``metadata.generation``), by a bounded pool of tasks:
  never from an informer event handler (``parent_changed`` only schedules). The answer's rules
  are kept until the generation changes or the parent goes away, and for at most 20 minutes
  (Metacontroller's customize cache TTL): once the answer is that old, the parent's next
  event or next snapshot (a periodic resync asks for one) calls the hook again exactly as a
  new generation does, its snapshots waiting for the new answer. So a parent without
  ``metadata.generation`` (a ConfigMap, a Secret) whose labels or annotations the hook reads
  gets a fresh answer at its first sync after 20 minutes, not never.
- The resources the rules name are resolved through discovery and watched by shared informers
  (a namespace informer too when a rule has a ``namespaceSelector``); an informer is released
  when no rule names its resource any more.
- A change of a related object is routed to every parent with a rule matching the object's old
  or new state (``proto.api.related.matches``), at the event's priority.
- ``related_of(view, parent)`` is the snapshot's ``related``: one group per rule's resource
  (``<Kind>.<apiVersion>``, present even when empty) with the matching objects' raw JSON.
- Rolling updates: the customize hook is also called once per older revision that owns
  children, with that revision's parent (``KeepsRevisions.revision_parents``), as
  Metacontroller does. Those answers hang off the live parent's entry: kept while the
  revision stays among the parent's older revisions, dropped with the live answer (a new
  generation, the parent gone, any answer of the family 20 minutes old).
  ``ready``/``wait_ready`` given ``versions`` cover them too, and ``revision_related_of`` is
  the snapshot's ``revision_related``: the groups of each revision whose related objects
  differ from the live parent's. With one revision nothing more is called or sent.
- An answer counts once the informers of the resources its rules name have listed them
  (at most 30 s, else it counts as failed), so a snapshot never carries an empty related
  group only because a new informer has not listed yet.
- Every customize request carries the attempt headers (``proto.hooks.attempt``): the term's
  ``epoch``, slot generation 0 (the coordinator calls for no slot), a new attempt id per call
  and the uid, resourceVersion and generation of the parent it sends.
- A customize call that fails (transport, non-200, malformed answer) is reported as a
  ``SyncError`` Warning event on the parent and a log line and retried with backoff (1 s
  doubling to 5 min); until it succeeds the parent's snapshots cannot be served (NOT_READY).
  The answer is decoded by the hook client (``HookClient.call_decoded``), so one it cannot
  decode counts in ``metacontroller_customize_requests_total`` as ``invalid-response``, not
  ``"200"``.
- In ``loose`` mode the answer's problems (unknown or duplicate fields) are logged, each
  distinct one once per controller, as the workers do for sync and finalize answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from manager.controllers.view import (
    ControllerId,
    ControllerView,
    Versions,
    group_key,
    group_resource,
)
from manager.informers.informer import EventHandler, Informer
from manager.informers.shared import Informers
from manager.informers.store import Cached
from manager.routing.router import KeySink
from proto.api.controllers import HookName
from proto.api.decoding import LooseWarnings
from proto.api.errors import HookResponseError
from proto.api.hooks import customize_request, decode_customize_response
from proto.api.names import REASON_SYNC_ERROR
from proto.api.related import RelatedRule, matches, namespace_scope
from proto.hooks.attempt import attempt_headers
from proto.hooks.client import HookClient, HookEndpoint
from proto.hooks.errors import HookError
from proto.kube.errors import KubeError
from proto.kube.events import WARNING, EventRecorder
from proto.kube.resources import Discovery, Resource
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger
from proto.wire import ParentKey, Priority

log = get_logger("metashard.related")

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
EntryKey = tuple[ControllerId, str]  # (controller, parent uid)
CallKey = tuple[ControllerId, str, str]  # (controller, parent uid, revision name or "")
_MAX_BACKOFF = 300.0
_SYNC_TIMEOUT = 30.0
_ANSWER_TTL = 20 * 60.0  # Metacontroller's customize cache TTL (customize/manager.go)


@dataclass(slots=True)
class _Entry:
    view: ControllerView
    resource: Resource
    parent: Cached
    """The live parent (its key, namespace and generation)."""
    rules: tuple[RelatedRule, ...] | None = None
    resources: tuple[Resource, ...] = ()
    answered: float | None = None
    """When ``rules`` were taken (clock seconds); ``None`` until then."""
    error: str | None = None
    failures: int = 0
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    revision: str = ""
    """The older revision this answer is for; ``""`` for the live parent."""
    version: bytes | None = None
    """The parent the hook gets for ``revision`` (``None``: the live parent)."""
    revisions: dict[str, _Entry] = field(default_factory=dict)
    """On a live parent's entry: the entries of its older revisions."""

    @property
    def call_key(self) -> CallKey:
        return (self.view.id, self.parent.uid, self.revision)

    def family(self) -> list[_Entry]:
        """This entry and its revisions' entries."""
        return [self, *self.revisions.values()]


@dataclass(slots=True)
class _Watched:
    resource: Resource
    informer: Informer
    handler: EventHandler
    users: int = 0


class Related:
    def __init__(
        self,
        *,
        epoch: int,
        hooks: HookClient,
        discovery: Discovery,
        informers: Informers,
        recorder: EventRecorder,
        sink: KeySink,
        clock: Clock = SYSTEM_CLOCK,
        concurrency: int = 8,
    ) -> None:
        self._epoch = epoch
        self._hooks = hooks
        self._discovery = discovery
        self._informers = informers
        self._recorder = recorder
        self._sink = sink
        self._clock = clock
        self._concurrency = concurrency
        self._entries: dict[EntryKey, _Entry] = {}
        self._calls: asyncio.Queue[CallKey] = asyncio.Queue()
        self._queued: set[CallKey] = set()
        self._watched: dict[str, _Watched] = {}
        self._namespaces: Informer | None = None
        self._releases: set[asyncio.Future[None]] = set()
        self._known: set[ControllerId] = set()  # to forget those that go
        self._warned: dict[ControllerId, LooseWarnings] = {}

    # --- what the router, the snapshots and the hosted controllers tell and ask -------------------

    @staticmethod
    def applies(view: ControllerView) -> bool:
        return view.customize is not None

    def parent_changed(
        self, view: ControllerView, resource: Resource, parent: Cached | None, old: Cached | None
    ) -> None:
        """A parent appeared, changed or went away (cheap: schedules a call when needed)."""
        if not self.applies(view):
            return
        if parent is None:
            if old is not None:
                self._forget((view.id, old.uid))
            return
        key = (view.id, parent.uid)
        entry = self._entries.get(key)
        if (
            entry is not None
            and entry.view is view
            and entry.parent.generation == parent.generation
            and not self._expired(entry)
        ):
            for member in entry.family():
                member.parent = parent
            return
        if entry is not None:
            self._release(entry)
        entry = self._entries[key] = _Entry(view, resource, parent)
        self._schedule(entry.call_key)

    def controllers_changed(
        self, views: Sequence[ControllerView], added: Sequence[ControllerView]
    ) -> None:
        """Forget the parents of controllers that are gone or no longer have a customize hook,
        and the hook client's TLS contexts of controllers that are gone."""
        ids = {v.id for v in views}
        for kind, name in self._known - ids:
            self._hooks.forget(controller_type=kind, controller_name=name)
            self._warned.pop((kind, name), None)
        self._known = ids
        live = {v.id: v for v in views if self.applies(v)}
        for key, entry in list(self._entries.items()):
            if live.get(entry.view.id) is not entry.view:
                self._forget(key)

    def state(self, view: ControllerView, resource: Resource, parent: Cached) -> _Entry | None:
        """``parent``'s entry; made (and its call scheduled) when missing or expired."""
        entry = self._entries.get((view.id, parent.uid))
        if entry is None or self._expired(entry):
            self.parent_changed(view, resource, parent, None)
            entry = self._entries.get((view.id, parent.uid))
        return entry

    def _expired(self, entry: _Entry) -> bool:
        """Whether an answer of ``entry``'s family is ``_ANSWER_TTL`` old."""
        now = self._clock.now()
        return any(
            m.answered is not None and now - m.answered >= _ANSWER_TTL for m in entry.family()
        )

    def _family(
        self, view: ControllerView, resource: Resource, parent: Cached, versions: Versions
    ) -> list[_Entry]:
        """The entries ``parent`` needs answered: its own and one per older revision in
        ``versions`` (made and scheduled when new; those of revisions no longer listed are
        dropped)."""
        entry = self.state(view, resource, parent)
        if entry is None:
            return []
        wanted = dict(versions)
        for name in [n for n in entry.revisions if n not in wanted]:
            self._release(entry.revisions.pop(name))
        for name, version in wanted.items():
            if name not in entry.revisions:
                made = _Entry(view, resource, entry.parent, revision=name, version=version)
                entry.revisions[name] = made
                self._schedule(made.call_key)
        return entry.family()

    async def wait_ready(
        self,
        view: ControllerView,
        resource: Resource,
        parent: Cached,
        timeout: float,  # noqa: ASYNC109
        versions: Versions = (),
    ) -> bool:
        """Wait up to ``timeout`` until the customize hook answered for ``parent`` and each
        of its ``versions`` (or failed); whether all answered."""
        family = self._family(view, resource, parent, versions)
        if not family:
            return False
        waits = [e.ready.wait() for e in family if e.rules is None]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
        return all(e.rules is not None for e in family)

    def ready(
        self, view: ControllerView, resource: Resource, parent: Cached, versions: Versions = ()
    ) -> bool:
        """Whether the customize hook answered for ``parent`` and each of its ``versions``."""
        family = self._family(view, resource, parent, versions)
        return bool(family) and all(e.rules is not None for e in family)

    def related_of(self, view: ControllerView, parent: Cached) -> dict[str, tuple[bytes, ...]]:
        entry = self._entries.get((view.id, parent.uid))
        if entry is None:
            return {}
        return self._related(entry, view, parent)

    def revision_related_of(
        self, view: ControllerView, parent: Cached
    ) -> dict[str, dict[str, tuple[bytes, ...]]]:
        """Per older revision (as last given to ``ready``), its related objects when they
        differ from the live parent's."""
        entry = self._entries.get((view.id, parent.uid))
        if entry is None or not entry.revisions:
            return {}
        live = self._related(entry, view, parent)
        out: dict[str, dict[str, tuple[bytes, ...]]] = {}
        for name, member in entry.revisions.items():
            found = self._related(member, view, parent)
            if found != live:
                out[name] = found
        return out

    def _related(
        self, entry: _Entry, view: ControllerView, parent: Cached
    ) -> dict[str, tuple[bytes, ...]]:
        if entry.rules is None:
            return {}
        version = view.customize.version  # type: ignore[union-attr]
        out: dict[str, tuple[bytes, ...]] = {}
        for rule, resource in zip(entry.rules, entry.resources, strict=True):
            objects = out.get(group_key(resource), ())
            seen = set(objects)
            for obj in self._candidates(resource, rule, view, parent):
                if obj.raw in seen:
                    continue
                if matches(
                    rule,
                    version=version,
                    parent_namespace=parent.namespace,
                    namespace=obj.namespace,
                    name=obj.name,
                    labels=obj.labels,
                    namespace_labels=self._namespace_labels(obj.namespace),
                ):
                    seen.add(obj.raw)
                    objects += (obj.raw,)
            out[group_key(resource)] = objects
        return out

    # --- calls --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Call customize hooks until cancelled; releases every informer on the way out."""
        callers = [asyncio.create_task(self._caller()) for _ in range(self._concurrency)]
        try:
            await asyncio.gather(*callers)
        finally:
            for task in callers:
                task.cancel()
            await asyncio.gather(*callers, return_exceptions=True)
            for watched in list(self._watched.values()):
                watched.informer.remove_handler(watched.handler)
                await self._informers.release(watched.resource)
            self._watched.clear()
            if self._namespaces is not None:
                await self._informers.release(NAMESPACES)

    def _lookup(self, key: CallKey) -> _Entry | None:
        controller, uid, revision = key
        entry = self._entries.get((controller, uid))
        if entry is None or not revision:
            return entry
        return entry.revisions.get(revision)

    def _schedule(self, key: CallKey, delay: float = 0.0) -> None:
        if key in self._queued:
            return
        self._queued.add(key)
        if delay <= 0:
            self._calls.put_nowait(key)
        else:
            asyncio.get_running_loop().call_later(delay, self._calls.put_nowait, key)

    async def _caller(self) -> None:
        while True:
            key = await self._calls.get()
            self._queued.discard(key)
            entry = self._lookup(key)
            if entry is None or entry.rules is not None:
                continue
            try:
                await self._call(entry)
            except (HookError, HookResponseError, KubeError, TimeoutError) as e:
                self._failed(key, entry, str(e))

    async def _call(self, entry: _Entry) -> None:
        view = entry.view
        hook = view.customize
        assert hook is not None
        parent = entry.parent
        asked = orjson.loads(entry.version if entry.version is not None else parent.raw)
        body = orjson.dumps(customize_request(controller=orjson.loads(view.raw), parent=asked))
        endpoint = HookEndpoint(
            HookName.CUSTOMIZE,
            hook.webhook,
            view.kind.value,
            view.name,
            view.connection(HookName.CUSTOMIZE),
        )
        headers = attempt_headers(
            epoch=self._epoch, generation=0, attempt=uuid.uuid4().hex, parent=asked
        )
        response = await self._hooks.call_decoded(
            endpoint,
            body,
            decode=functools.partial(
                decode_customize_response,
                mode=hook.response_mode,
                version=hook.version,
                parent_namespace=parent.namespace,
            ),
            headers=headers,
        )
        warned = self._warned.setdefault(view.id, LooseWarnings())
        for warning in warned.fresh(response.warnings):
            log.warning(
                "loose decoding of a customize hook answer", controller=view.name, problem=warning
            )
        resources = tuple(
            [
                await self._discovery.resolve(rule.api_version, resource=rule.resource)
                for rule in response.related_rules
            ]
        )
        if self._lookup(entry.call_key) is not entry:
            return  # the parent changed or went away meanwhile
        self._unwatch(entry)  # what an earlier, failed attempt watched
        entry.resources = resources
        informers = [self._watch(resource) for resource in resources]
        if any(r.namespace_selector is not None for r in response.related_rules):
            informers.append(self._watch_namespaces())
        unsynced = [i for i in informers if not i.synced]
        if unsynced:
            # A new informer's store is empty until its first list: answering before then
            # would send the hook no related objects.
            try:
                await asyncio.wait_for(
                    asyncio.gather(*(i.wait_synced() for i in unsynced)), _SYNC_TIMEOUT
                )
            except TimeoutError:
                if self._lookup(entry.call_key) is not entry:
                    return  # released meanwhile: nothing to report
                raise TimeoutError(
                    f"the related resources were not listed within {_SYNC_TIMEOUT:g}s"
                ) from None
            if self._lookup(entry.call_key) is not entry:
                return
        entry.rules = response.related_rules
        entry.answered = self._clock.now()
        entry.error = None
        entry.failures = 0
        entry.ready.set()
        self._sink.push(view.key(entry.resource, parent.namespace, parent.name), Priority.LIVE)

    def _failed(self, key: CallKey, entry: _Entry, error: str) -> None:
        entry.error = error
        entry.failures += 1
        delay = min(2.0 ** (entry.failures - 1), _MAX_BACKOFF)
        entry.ready.set()  # waiters learn it failed
        entry.ready = asyncio.Event()
        log.warning(
            "customize hook failed",
            controller=entry.view.name,
            parent=entry.parent.name,
            revision=entry.revision or None,
            error=error,
            retry_in=delay,
        )
        self._recorder.emit(
            orjson.loads(entry.parent.raw),
            WARNING,
            REASON_SYNC_ERROR,
            f"customize hook (revision {entry.revision}): {error}"
            if entry.revision
            else f"customize hook: {error}",
        )
        self._schedule(key, delay)

    def _forget(self, key: EntryKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._release(entry)

    # --- informers and routing ----------------------------------------------------------------

    def _watch(self, resource: Resource) -> Informer:
        name = group_resource(resource)
        watched = self._watched.get(name)
        if watched is None:
            informer = self._informers.acquire(resource)
            handler = self._handler(name)
            informer.add_handler(handler)
            watched = self._watched[name] = _Watched(resource, informer, handler)
        watched.users += 1
        return watched.informer

    def _release(self, entry: _Entry) -> None:
        """Drop ``entry``'s informer uses, and its revisions' entries with theirs."""
        for member in entry.revisions.values():
            self._release(member)
        entry.revisions.clear()
        self._unwatch(entry)

    def _unwatch(self, entry: _Entry) -> None:
        """Drop ``entry``'s own informer uses."""
        for resource in entry.resources:
            watched = self._watched.get(group_resource(resource))
            if watched is None:
                continue
            watched.users -= 1
            if watched.users == 0:
                del self._watched[group_resource(resource)]
                watched.informer.remove_handler(watched.handler)
                task = asyncio.ensure_future(self._informers.release(watched.resource))
                self._releases.add(task)
                task.add_done_callback(self._releases.discard)
        entry.resources = ()

    def _watch_namespaces(self) -> Informer:
        if self._namespaces is None:
            self._namespaces = self._informers.acquire(NAMESPACES)
        return self._namespaces

    def _namespace_labels(self, namespace: str) -> dict[str, str] | None:
        if self._namespaces is None or not namespace:
            return None
        ns = self._namespaces.store.get("", namespace)
        return dict(ns.labels) if ns is not None else None

    def _candidates(
        self, resource: Resource, rule: RelatedRule, view: ControllerView, parent: Cached
    ) -> list[Cached]:
        watched = self._watched.get(group_resource(resource))
        if watched is None:
            return []
        store = watched.informer.store
        version = view.customize.version  # type: ignore[union-attr]
        scope = namespace_scope(rule, version=version, parent_namespace=parent.namespace)
        if scope is not None and resource.namespaced:
            return store.in_namespace(scope)
        return list(store)

    def _handler(self, name: str) -> EventHandler:
        def on_event(type: str, old: Cached | None, new: Cached | None, initial: bool) -> None:
            priority = Priority.LOW if initial else Priority.LIVE
            for key in self._affected(name, old, new):
                self._sink.push(key, priority)

        return on_event

    def _affected(self, name: str, old: Cached | None, new: Cached | None) -> set[ParentKey]:
        keys: set[ParentKey] = set()
        for live in self._entries.values():
            for entry in live.family():
                if entry.rules is not None and self._affects(entry, name, old, new):
                    keys.add(
                        entry.view.key(entry.resource, entry.parent.namespace, entry.parent.name)
                    )
                    break
        return keys

    def _affects(self, entry: _Entry, name: str, old: Cached | None, new: Cached | None) -> bool:
        version = entry.view.customize.version  # type: ignore[union-attr]
        assert entry.rules is not None
        for rule, resource in zip(entry.rules, entry.resources, strict=True):
            if group_resource(resource) != name:
                continue
            for obj in (old, new):
                if obj is not None and matches(
                    rule,
                    version=version,
                    parent_namespace=entry.parent.namespace,
                    namespace=obj.namespace,
                    name=obj.name,
                    labels=obj.labels,
                    namespace_labels=self._namespace_labels(obj.namespace),
                ):
                    return True
        return False
