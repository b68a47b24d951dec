"""The informer of one resource: list, then watch, into a ``Store``; handlers for each change.

Invariants:

- **One request when the server allows it.** The first list is a streaming list: a watch with
  ``sendInitialEvents=true`` whose ADDED events and ``k8s.io/initial-events-end`` BOOKMARK
  fill the store, and which then goes on as the live watch. A server that refuses it (400,
  405 or 422 before that bookmark, or a stream that ends before it) gets paginated LISTs and
  a watch from the list's resourceVersion, for every relist from then on.
- **Resume, don't relist.** A watch that ends normally, breaks (``TransportError``: reset,
  refused, inactivity deadline) or carries a malformed line (``StreamError``) is re-opened
  from the last resourceVersion seen (events and bookmarks). Only 410 Gone relists.
- **A relist is a diff.** Objects listed but not cached are ADDED, cached ones whose
  resourceVersion changed are MODIFIED, unchanged ones emit nothing, and cached objects not
  listed get a synthetic DELETED (``old`` = the last cached state). Relist events carry
  ``initial=True``; the first list is a relist against an empty store.
- **Back off, jittered.** Every retry after an error, and every relist after the first,
  waits ``Backoff.next()`` (exponential, capped, jittered). A normal end of the watch is
  resumed at once, unless it lasted under a second with no event (client-go's "very short
  watch"), which counts as an error.
- **Never silently stale.** Each failed attempt counts in
  ``metashard_informer_watch_errors_total{reason}``; the health gauge and one log line change
  when the failure reason changes, and one line when the informer recovers, not per retry.
  A list or watch refused with 403 is also told to ``refusals`` (what was refused, to whom:
  ``proto.kube.refusal.Refusal``), and its end once the informer recovers, so the controllers
  that need the resource can say why they cannot run.
- **Handlers** are synchronous and called in registration order as ``(type, old, new,
  initial)``, with ``type`` in ADDED/MODIFIED/DELETED as seen from the store (an ADDED for a
  cached object is a MODIFIED), ``old``/``new`` ``Cached | None``. An exception is logged
  (once per failing streak of that handler) and counted; it never reaches the informer or
  the other handlers. A handler added to a running informer first gets every cached object
  as ADDED with ``initial=True``.
- **resourceVersions.** Kubernetes resourceVersions are etcd revisions (one counter for the
  whole cluster), so the events of one resource's watch carry increasing integers and "this
  informer has seen revision N or later" is an integer comparison, which ``wait_for``
  answers (``manager.informers.watermark``; a version that is not an integer cannot be compared:
  False at once). The per-object versions of a list's items are not in order; only the
  list's (or initial-events-end bookmark's) version counts.
- **Memory.** The store keeps raw JSON bytes and parsed metadata; decoded dicts are dropped
  as soon as an event is applied. A relist keeps aside only the keys cached before it
  (the ones it may have to delete), so the first list holds nothing besides the store: a
  set of every listed key, kept until the list ends, would strand its tuples among the
  cached objects' strings and cost RSS for good (measured: 110 bytes per object after a
  cold start of 400,000 objects, 150 at its peak; ``make bench BENCH=informer``). Bulk
  loads (first list, relists) run inside the process's ``GcGuard`` (collector paused,
  survivors frozen afterwards).
- **Shares the loop.** A streaming list is applied chunk by chunk as it arrives; a paginated
  list, which arrives whole, is applied with a yield to the event loop every
  ``YIELD_EVERY`` objects, so lease renewals and other informers keep running.
- **A label selector**, when given, goes with every list and watch: the store holds only what
  it selects, and the server's DELETED for an object that stops matching takes it out.
  ``reselect`` changes it: the list or watch under way is abandoned and a relist with the new
  selector follows at once (a diff, so objects it no longer selects get a DELETED).
- The informer belongs to one event loop; ``run()`` runs until cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from manager.informers.backoff import Backoff
from manager.informers.gcguard import PROCESS_GC_GUARD, GcGuard
from manager.informers.metrics import NO_INFORMER_METRICS, InformerMetrics
from manager.informers.store import Cached, ObjectKey, Store
from manager.informers.watermark import Watermark
from proto.kube.client import ObjectList
from proto.kube.errors import (
    ApiError,
    BadRequest,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    MethodNotAllowed,
    StreamError,
    TransportError,
)
from proto.kube.refusal import Refusal
from proto.kube.resources import Resource
from proto.kube.watch import ADDED, BOOKMARK, DELETED, MODIFIED, WatchEvent
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger

_REFUSALS = (BadRequest, Invalid, MethodNotAllowed)
"""What a server without streaming lists answers to ``sendInitialEvents``."""

SHORT_WATCH = 1.0
YIELD_EVERY = 500
"""Objects applied between two yields to the event loop when a list arrives in one piece."""


class EventHandler(Protocol):
    """Called for every change of the store; must be cheap and must not block.

    The coordinator's: ``manager.routing.router.Router.handler`` (events to parent keys), the
    customize hooks' (``manager.routing.related``: related objects to parent keys), and the
    hosted controllers' own (a controller object changed)."""

    def __call__(
        self, type: str, old: Cached | None, new: Cached | None, initial: bool
    ) -> None: ...


class RefusalSink(Protocol):
    """Hears which informers the API server refuses (403), and when that ends
    (``manager.controllers.refusals.Refusals``)."""

    def refused(self, resource: Resource, refusal: Refusal) -> None: ...

    def allowed(self, resource: Resource) -> None: ...


class _NoRefusals:
    def refused(self, resource: Resource, refusal: Refusal) -> None:
        pass

    def allowed(self, resource: Resource) -> None:
        pass


NO_REFUSALS: RefusalSink = _NoRefusals()


class ListerWatcher(Protocol):
    """The client calls an informer makes (``proto.kube.Client`` conforms)."""

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = ...,
        label_selector: str | None = ...,
        limit: int = ...,
    ) -> ObjectList: ...

    def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = ...,
        label_selector: str | None = ...,
        resource_version: str | None = ...,
        allow_bookmarks: bool = ...,
        send_initial_events: bool = ...,
        timeout_seconds: int | None = ...,
        inactivity_timeout: float | None = ...,
    ) -> AsyncGenerator[WatchEvent, None]: ...


@dataclass(frozen=True, slots=True)
class InformerOptions:
    """Tunables shared by the informers of a process."""

    min_watch_timeout: int = 300
    """Each watch asks for ``timeoutSeconds`` uniform in [min, 2*min] (client-go: 5-10 min)."""
    inactivity_timeout: float = 120.0
    """A watch silent this long (no event, no bookmark) is cut and resumed (2x the ~60 s
    bookmark interval)."""
    page_size: int = 500
    """``limit`` of paginated lists."""
    streaming_list: bool = True
    """Try streaming lists first."""
    backoff_initial: float = 0.8
    backoff_cap: float = 30.0
    backoff_reset: float = 120.0
    """Retry and relist delays: exponential from ``backoff_initial`` to ``backoff_cap``,
    jittered, restarting after ``backoff_reset`` quiet seconds (client-go's reflector:
    0.8 s, 30 s, 2 min). See ``manager.informers.backoff``."""

    def __post_init__(self) -> None:
        if self.min_watch_timeout < 1 or self.inactivity_timeout <= 0 or self.page_size < 1:
            raise ValueError(
                "informer options need min_watch_timeout >= 1, inactivity_timeout > 0 "
                "and page_size >= 1"
            )


def resource_label(resource: Resource) -> str:
    """``deployments.v1.apps``, ``pods.v1``: how logs and metrics name a resource."""
    label = f"{resource.name}.{resource.version}"
    return f"{label}.{resource.group}" if resource.group else label


class Informer:
    """List+watch of one resource (all namespaces, or only ``namespace``; what
    ``label_selector`` selects, "" for everything) into ``store`` (see the module
    docstring)."""

    def __init__(
        self,
        client: ListerWatcher,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str = "",
        options: InformerOptions | None = None,
        clock: Clock = SYSTEM_CLOCK,
        metrics: InformerMetrics = NO_INFORMER_METRICS,
        gc_guard: GcGuard = PROCESS_GC_GUARD,
        rng: random.Random | None = None,
        refusals: RefusalSink = NO_REFUSALS,
    ) -> None:
        self.resource = resource
        self._refusals = refusals
        self._verb = "list"  # of the request under way: what a 403 refused
        self._refused = False  # told ``refusals`` of a 403 not followed by a success yet
        self.namespace = namespace
        self.label_selector = label_selector
        self.store = Store()
        self._client = client
        self._options = options if options is not None else InformerOptions()
        self._clock = clock
        self._metrics = metrics
        self._gc = gc_guard
        self._rng = rng if rng is not None else random.Random()
        opts = self._options
        self._backoff = Backoff(
            initial=opts.backoff_initial,
            cap=opts.backoff_cap,
            reset_after=opts.backoff_reset,
            clock=self._clock,
            rng=self._rng,
        )
        # Built here, not at import: a logger bound before logging is configured ignores it.
        self._log = get_logger(__name__, resource=resource_label(resource))
        self._handlers: list[EventHandler] = []
        self._failing_handlers: set[EventHandler] = set()
        self._streaming = opts.streaming_list
        self._running = False
        self._attempt: asyncio.Future[None] | None = None  # the list or watch under way
        # Where to resume the watch; None when a (re)list is needed.
        self._resume_rv: str | None = None
        self._relist_reason = "initial"
        self._seen = Watermark(clock=clock)
        self._synced = asyncio.Event()
        self._synced_callbacks: list[Callable[[], None]] = []
        self._failure: str | None = None
        self._failures = 0
        metrics.observe(
            objects=self.store.__len__, resource_version=lambda: max(self._seen.revision, 0)
        )

    # --- observers -----------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        """The first list is in the store."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Return once the first list is in the store."""
        await self._synced.wait()

    def add_synced_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the first list is in the store (at once if it is)."""
        if self.synced:
            callback()
        else:
            self._synced_callbacks.append(callback)

    @property
    def healthy(self) -> bool:
        """False while list/watch attempts fail."""
        return self._failure is None

    @property
    def last_resource_version(self) -> str:
        """The newest integer resourceVersion seen (events, bookmarks, lists), as a string;
        "" before the first."""
        revision = self._seen.revision
        return str(revision) if revision >= 0 else ""

    async def wait_for(self, resource_version: str, timeout: float) -> bool:  # noqa: ASYNC109
        """Wait until this informer has seen ``resource_version`` or a later one.

        True once it has; False after ``timeout`` seconds (on the informer's clock), at once
        for a resourceVersion that is not an integer, and when the informer stops first.
        """
        return await self._seen.wait_for(resource_version, timeout)

    # --- handlers ------------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> None:
        """Register ``handler``; it first receives every cached object as an initial ADDED."""
        self._handlers.append(handler)
        for cached in self.store:
            self._call(handler, ADDED, None, cached, True)

    def remove_handler(self, handler: EventHandler) -> None:
        self._handlers.remove(handler)
        self._failing_handlers.discard(handler)

    def reselect(self, label_selector: str) -> None:
        """List and watch only what ``label_selector`` selects ("": everything) from now on;
        nothing happens when it is the selector in use (see the module docstring)."""
        if label_selector == self.label_selector:
            return
        self._log.info("label selector changed; relisting", label_selector=label_selector)
        self.label_selector = label_selector
        self._resume_rv = None
        self._relist_reason = "selector"
        if self._attempt is not None:
            self._attempt.cancel()

    # --- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled."""
        if self._running:
            raise RuntimeError(f"the informer of {self.resource} is already running")
        self._running = True
        try:
            while True:
                try:
                    await self._once()
                    continue
                except Gone as exc:
                    self._resume_rv = None
                    self._relist_reason = "expired"
                    self._log.info("resourceVersion expired; relisting", error=str(exc))
                except Forbidden as exc:
                    self._failed(exc.reason, exc)
                    refusal = Refusal.of(exc, verb=self._verb, resource=self.resource)
                    self._refusals.refused(self.resource, refusal)
                    self._refused = True
                except ApiError as exc:
                    self._failed(exc.reason, exc)
                except KubeError as exc:
                    self._failed(type(exc).__name__, exc)
                except Exception as exc:
                    # A defect, or an object this code cannot read: report it, start over.
                    self._failed(type(exc).__name__, exc, traceback=True)
                    self._resume_rv = None
                    self._relist_reason = "error"
                await self._clock.sleep(self._backoff.next())
        finally:
            self._running = False
            self._seen.close()

    async def _once(self) -> None:
        """One list or watch; returns early when ``reselect`` abandons it."""
        if self._resume_rv is None:
            attempt = asyncio.ensure_future(self._relist())
        else:
            attempt = asyncio.ensure_future(self._watch(self._resume_rv))
        self._attempt = attempt
        try:
            await asyncio.wait([attempt])
        except asyncio.CancelledError:
            attempt.cancel()
            await asyncio.wait([attempt])
            raise
        finally:
            self._attempt = None
        if not attempt.cancelled():
            attempt.result()

    async def _relist(self) -> None:
        self._metrics.relist(self._relist_reason)
        if self._streaming:
            try:
                await self._stream()
                return
            except _Refused as refused:
                self._streaming = False
                self._log.info(
                    "the server refuses streaming lists; using paginated lists", reason=str(refused)
                )
        self._verb = "list"
        with self._gc.bulk():
            listed = await self._client.list(
                self.resource,
                namespace=self.namespace,
                label_selector=self.label_selector or None,
                limit=self._options.page_size,
            )
            unseen = self.store.keys()
            for index, (obj, raw) in enumerate(zip(listed.items, listed.raws, strict=True)):
                self._relisted(unseen, obj, raw)
                if index % YIELD_EVERY == YIELD_EVERY - 1:
                    await asyncio.sleep(0)  # let the lease renewals and other informers run
            self._end_relist(unseen, listed.resource_version)

    async def _stream(self) -> None:
        """A streaming list, continued as the live watch; raises ``_Refused`` when the
        server does not do streaming lists."""
        events = self._open(None, send_initial_events=True)
        async with contextlib.aclosing(events):
            try:
                await self._initial_events(events)
            except _REFUSALS as exc:
                raise _Refused(str(exc)) from exc
            async for event in events:
                self._apply(event)

    async def _initial_events(self, events: AsyncGenerator[WatchEvent, None]) -> None:
        """Apply a streaming list's events up to its initial-events-end bookmark."""
        unseen = self.store.keys()
        with self._gc.bulk():
            async for event in events:
                if event.type == BOOKMARK:
                    if event.initial_events_end:
                        self._end_relist(unseen, event.resource_version)
                        return
                elif event.type == DELETED:
                    self._relist_deleted(unseen, event)
                else:
                    self._relisted(unseen, event.object, event.raw)
        raise _Refused("the stream ended before the initial-events-end bookmark")

    async def _watch(self, resource_version: str) -> None:
        started = self._clock.now()
        count = 0
        events = self._open(resource_version, send_initial_events=False)
        async with contextlib.aclosing(events):
            async for event in events:
                count += 1
                self._apply(event)
        if count == 0 and self._clock.now() - started < SHORT_WATCH:
            raise VeryShortWatch("the watch lasted less than a second and delivered nothing")
        self._recovered()

    def _open(
        self, resource_version: str | None, *, send_initial_events: bool
    ) -> AsyncGenerator[WatchEvent, None]:
        low = self._options.min_watch_timeout
        self._verb = "watch"
        return self._client.watch(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector or None,
            resource_version=resource_version,
            allow_bookmarks=True,
            send_initial_events=send_initial_events,
            timeout_seconds=self._rng.randint(low, 2 * low),
            inactivity_timeout=self._options.inactivity_timeout,
        )

    # --- applying changes ----------------------------------------------------------------

    def _apply(self, event: WatchEvent) -> None:
        """One live watch event."""
        if self._failure is not None:
            self._recovered()
        kind = event.type
        if kind == BOOKMARK:
            self._advance(event.resource_version)
            self._metrics.event(BOOKMARK)
            return
        cached = Cached.from_object(event.object, event.raw)
        store = self.store
        if kind == DELETED:
            old = store.delete(cached.namespace, cached.name)
            self._emit(DELETED, old if old is not None else cached, None, False)
        else:
            old = store.upsert(cached)
            self._emit(ADDED if old is None else MODIFIED, old, cached, False)
        self._advance(event.resource_version)

    def _relisted(self, unseen: set[ObjectKey], obj: dict[str, Any], raw: bytes) -> None:
        """One object of a list; its own resourceVersion says nothing about the list's."""
        cached = Cached.from_object(obj, raw)
        key = cached.key
        unseen.discard(key)
        old = self.store.get(*key)
        if old is not None and old.version == cached.version:
            return
        self.store.upsert(cached)
        self._emit(ADDED if old is None else MODIFIED, old, cached, True)

    def _relist_deleted(self, unseen: set[ObjectKey], event: WatchEvent) -> None:
        cached = Cached.from_object(event.object, event.raw)
        unseen.discard(cached.key)
        old = self.store.delete(*cached.key)
        if old is not None:
            self._emit(DELETED, old, None, True)

    def _end_relist(self, unseen: set[ObjectKey], resource_version: str) -> None:
        """The list is complete at ``resource_version``: drop what it did not contain
        (``unseen``: the keys cached before it began that it has neither listed nor seen
        deleted)."""
        if not resource_version:
            raise StreamError(f"the list of {self.resource} carried no resourceVersion")
        self._recovered()
        for namespace, name in unseen:
            old = self.store.delete(namespace, name)
            self._emit(DELETED, old, None, True)
        self._resume_rv = resource_version
        self._advance(resource_version)
        if not self.synced:
            self._synced.set()
            self._log.info("synced", objects=len(self.store))
            callbacks, self._synced_callbacks = self._synced_callbacks, []
            for callback in callbacks:
                callback()
        self._metrics.state(synced=True, healthy=self._failure is None)

    def _emit(self, kind: str, old: Cached | None, new: Cached | None, initial: bool) -> None:
        self._metrics.event(kind)
        for handler in self._handlers:
            self._call(handler, kind, old, new, initial)

    def _call(
        self,
        handler: EventHandler,
        kind: str,
        old: Cached | None,
        new: Cached | None,
        initial: bool,
    ) -> None:
        try:
            handler(kind, old, new, initial)
        except Exception:
            self._metrics.handler_error()
            if handler in self._failing_handlers:
                self._log.debug("event handler failed again", handler=repr(handler))
            else:
                self._failing_handlers.add(handler)
                self._log.exception("event handler failed", handler=repr(handler), type=kind)
            return
        if self._failing_handlers:
            self._failing_handlers.discard(handler)

    def _advance(self, resource_version: str) -> None:
        """A watch event or a complete list at ``resource_version``."""
        if not resource_version:
            return
        self._resume_rv = resource_version
        self._seen.advance(resource_version)

    # --- health --------------------------------------------------------------------------

    def _failed(self, reason: str, exc: BaseException, *, traceback: bool = False) -> None:
        self._metrics.watch_error(reason)
        self._failures += 1
        if reason != self._failure:
            self._failure = reason
            self._metrics.state(synced=self.synced, healthy=False)
            self._log.warning(
                "list/watch failing; retrying",
                reason=reason,
                error=str(exc),
                exc_info=exc if traceback else None,
            )

    def _recovered(self) -> None:
        if self._failure is None:
            return
        self._log.info("list/watch recovered", failed_attempts=self._failures)
        if self._refused:
            self._refused = False
            self._refusals.allowed(self.resource)
        self._failure = None
        self._failures = 0
        self._metrics.state(synced=self.synced, healthy=True)


class _Refused(Exception):
    """The server does not serve streaming lists."""


class VeryShortWatch(TransportError):
    """A watch that ended at once with nothing in it: retried with backoff, not in a loop."""
