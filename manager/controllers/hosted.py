"""The hosted controllers: controller objects of every kind turned into running routes.

Contract:
- Watches the controller objects of every kind in ``manager.kinds`` (CompositeControllers,
  DecoratorControllers). A kind that cannot be watched is retried every ``retry_interval``
  (``--discovery-interval``, from the coordinator's ``settings`` as everything here);
  the log says why (its CRD missing, the API server unreachable, discovery timing out
  or failing);
  the other kinds run meanwhile.
- Only controllers whose labels match ``selector`` (``--target-label-selector``) are run;
  the others are left to the installation they belong to: no event, no log line but a debug
  one, no finalizer touched.
- Each object is parsed, validated and resolved through discovery by its kind
  (``manager.kinds``, given a ``Context``: discovery and the coordinator's ``settings``). An
  invalid controller (bad spec, unknown resource, Composite parent without the status
  subresource) is not run: a Warning event on the controller object
  (reason ``CreateError``, or ``SyncError`` with Metacontroller's words, ``does not have
  subresource 'Status' enabled``, for the missing status subresource) and a log line say why,
  once per distinct reason for each version of the object (a later, different reason is
  reported too); the others keep running.
- A resource is reported missing only once discovery has read its group/version after the
  controller asked for it (``proto.kube.resources``: a miss re-reads at once, rate-limited per
  group/version). While discovery cannot tell yet (``ResourceNotFoundYet``), nothing is
  reported and the controller is tried again as soon as discovery may read again, so a
  controller whose CRD was created a moment before starts at once, without a warning. A
  controller whose resource is missing is retried after 0.5 s, doubling up to
  ``retry_interval``, so one whose CRD is created a moment after it starts within a second
  or so; other failed controllers are retried every ``retry_interval``.
- A transient API error while resolving a controller (a 5xx or 429 from discovery, a timeout)
  is not a verdict on the controller: it is logged, no event is written, the controller keeps
  running as it was if it ran, and it is tried again after a backoff of 1 s doubling up to
  ``retry_interval``. Nothing from the API ends ``run()``.
- A controller that runs but sets fields metashard does not act on
  (``proto.api.unsupported``) gets one Warning event (``UnsupportedField``) and one log line
  per field, when it is loaded (again after each change of the object).
- A controller loaded with ``metashard.io/paused: "true"`` gets a Normal ``Paused`` event
  saying its parents' syncs are paused (the workers skip them, the resyncs leave them:
  ``manager.term.resync``); one whose value is neither ``"true"`` nor ``"false"`` a Warning
  ``InvalidAnnotation`` event naming it, and runs unpaused. Both when loaded (again after
  each change of the object), with a log line.
- Each annotation of its limits (``manager.controllers.limits``) whose value does not parse
  gets an ``InvalidAnnotation`` Warning event: the controller runs, without that limit.
- Informers are shared and reference-counted per resource: when controllers change, the
  informers of the new set are acquired before those no longer used are released, so editing
  one controller never restarts an informer another one uses.
- Watches are narrowed on the server (``settings.narrow_watches``, on unless
  ``--narrow-watches=false``): a resource that controllers use only as parents, each with a
  ``watch_selector`` for it, is listed and watched with the cover of those selectors
  (``manager.informers.shared.combine``), so objects no controller selects never reach the
  coordinator. A child resource, and a parent of a controller without one, is watched whole.
  When the selectors change, the informer relists with the new cover.
- When a running controller object is deleted, its finalizer is removed from the parents
  that still carry it (``manager.controllers.finalizers``), before its informers are released.
- A list or watch of a running controller's parents or children that the API server refuses
  (403, told by the informers to ``refusals``), and a refused finalizer removal, is a Warning
  event (``Forbidden``) on the controller object naming who may not do what, and a log line,
  once per refusal while it lasts (``manager.controllers.refusals``), at once.
- ``ControllerSet.stalled`` says, after every change, why each selected controller object does
  not do its job: the last reason it cannot run, or the refusals it meets.
- Each controller that starts is logged (``controller started``), and again once the informers
  of its parents and children have all synced (``controller informers synced``, with the
  seconds it took): its parents are pushed to workers from then on.
- After every change the ``ControllerSet`` (``manager.controllers.running``) holds the full set
  of valid controllers, and then each of ``listeners`` is told, in order
  (``ControllerListener.controllers_changed``), with those that started (or changed) in this
  change. The informers of every controller's parents and children carry the handler
  ``routes`` gives for their resource (``manager.routing.router.Router``).
- Hook connections, for every kind: the Secrets and ConfigMaps a controller's webhooks (or its
  ``endpointConfigs``) name are read one by one (``manager.controllers.hookrefs``: a GET per
  object, never a list of all Secrets) and re-read every few seconds; each hook's resolved TLS
  material and credentials go into the controller's definition (``ControllerView.connections``).
  When they change the controller counts as changed (a new view), so workers get the new material
  without any edit of the controller. A missing object or key, or material that does not
  load, is a Warning event (``CreateError``) on the controller naming the object and the key
  (never a value), once per distinct problem; that hook carries the problem instead of
  credentials, and its calls fail (``SyncError`` on the parent) without reaching the hook
  server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from manager.controllers import finalizers
from manager.controllers.finalizers import FinalizerWriter
from manager.controllers.hookrefs import HookReferences, resolve_connections
from manager.controllers.limits import limits_of
from manager.controllers.refusals import RefusalReports, Refusals
from manager.controllers.running import ControllerSet
from manager.controllers.view import ControllerId, ControllerView, Unusable, group_resource
from manager.informers.informer import EventHandler, Informer
from manager.informers.shared import Informers, combine
from manager.informers.store import Cached
from manager.kinds import Context, Kind, registry
from manager.settings import CoordinatorSettings
from proto.api import names
from proto.api.endpoints import object_refs
from proto.api.interventions import PAUSED, annotations_of, pause_of
from proto.api.selectors import Selector
from proto.api.unsupported import unsupported
from proto.kube.errors import KubeError, ResourceNotFound, ResourceNotFoundYet, TransportError
from proto.kube.events import NORMAL, WARNING, EventRecorder
from proto.kube.resources import Discovery, Resource
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger

log = get_logger("metashard.controllers")


class Routes(Protocol):
    def handler(self, resource: Resource) -> EventHandler:
        """The informer event handler for ``resource`` (``manager.routing.router.Router``)."""
        ...


class ControllerListener(Protocol):
    def controllers_changed(
        self, views: Sequence[ControllerView], added: Sequence[ControllerView]
    ) -> None:
        """The running controllers are now ``views``; ``added`` started or changed."""
        ...


def _why(error: KubeError | TimeoutError) -> str:
    """Why a kind's controller objects cannot be watched, as far as the error tells."""
    if isinstance(error, ResourceNotFound):
        return "is the CRD installed?"
    if isinstance(error, TransportError):
        return "the API server is unreachable"
    if isinstance(error, TimeoutError):
        return "discovery timed out"
    return "discovery failed"


class _Transient(Exception):
    """Resolving failed for a reason that is not the controller's: try again soon."""


class _NotYet(Exception):
    """Discovery cannot tell yet whether a resource exists: ask again in ``retry_after``."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


MISSING_RETRY = 0.5
"""Seconds before the first retry of a controller whose resource is missing (then doubling)."""
SOONEST = 0.05
"""The shortest wait before the controller objects are looked at again."""


@dataclass(slots=True)
class _Failure:
    """A controller object that cannot run, in one version of it."""

    resource_version: str
    reported: set[str] = field(default_factory=set)
    """The reasons reported (event and log line) for this version."""
    missing: bool = False
    """The last attempt failed because a resource is missing: retried soon."""
    reason: str = ""
    """Why the last attempt failed."""


@dataclass(slots=True)
class _Held:
    """An informer the controllers use, and the label selector they acquired it with."""

    resource: Resource
    informer: Informer
    handler: EventHandler
    selector: Selector | None


class Controllers:
    def __init__(
        self,
        *,
        discovery: Discovery,
        informers: Informers,
        recorder: EventRecorder,
        controllers: ControllerSet,
        routes: Routes,
        listeners: Sequence[ControllerListener],
        writer: FinalizerWriter | None = None,
        kinds: tuple[Kind, ...] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        references: HookReferences | None = None,
        settings: CoordinatorSettings = CoordinatorSettings(),  # noqa: B008 (immutable)
        refusals: Refusals | None = None,
    ) -> None:
        self._refusals = refusals if refusals is not None else Refusals()
        self._refusal_reports = RefusalReports(self._refusals, recorder)
        self._discovery = discovery
        self._informers = informers
        self._recorder = recorder
        self._controllers = controllers
        self._routes = routes
        self._listeners = tuple(listeners)
        self._writer = writer
        self._selector = settings.selector
        self._kinds = kinds if kinds is not None else registry()
        self._clock = clock
        self._retry_interval = settings.discovery_interval
        self._context = Context(discovery, settings)
        self._failed: dict[ControllerId, _Failure] = {}
        self._skipped: set[ControllerId] = set()  # not selected by the target label selector
        self._acquired: dict[str, _Held] = {}  # group-resource -> what this holds of it
        self._narrow = settings.narrow_watches
        self._references = references
        self._reported: dict[ControllerId, set[str]] = {}  # id -> connection problems reported
        self._changed = asyncio.Event()
        self._sources: dict[str, Informer] = {}  # kind -> informer of its controller objects
        self._tasks: set[asyncio.Task[None]] = set()
        self._backoff = 0.0  # > 0 while a transient error waits to be retried
        self._missing = 0.0  # > 0 while a controller's resource is missing
        self._soon: float | None = None  # discovery can tell in this many seconds

    async def run(self) -> None:
        if self._references is not None:
            self._spawn(self._references.run(self._changed.set))
        self._spawn(self._follow_refusals())
        try:
            while True:
                answered = await self._watch_controllers()
                for source in list(self._sources.values()):
                    await source.wait_synced()
                await self._sync()
                if answered:
                    # Every kind watched, or known to have no CRD: not while the API server
                    # cannot be reached (the informers may still sync).
                    self._controllers.loaded = True
                wait = self._next_pass()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), wait)
                self._changed.clear()
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._release_all()

    def _next_pass(self) -> float:
        """Seconds until the controller objects are looked at again without a change."""
        waits = [w for w in (self._backoff, self._missing, self._soon) if w]
        return min(waits, default=self._retry_interval)

    async def _watch_controllers(self) -> bool:
        """Watch the kinds not watched yet; whether the API server answered for every kind
        (watched, or its CRD is not installed) rather than failing."""
        answered = True
        for kind in self._kinds:
            if kind.kind.value in self._sources:
                continue
            try:
                resource = await self._discovery.resolve(names.API_VERSION, resource=kind.resource)
            except (KubeError, TimeoutError) as e:
                # A missing CRD is an answer; anything else (a timeout too) is tried again
                # after the retry interval, without ending the loop.
                answered = answered and type(e) is ResourceNotFound
                log.error(
                    f"cannot watch {kind.kind.value}s: {_why(e)}",
                    error=str(e) or type(e).__name__,
                    retry_in=self._retry_interval,
                )
                continue
            informer = self._informers.acquire(resource)
            informer.add_handler(lambda *_: self._changed.set())
            self._sources[kind.kind.value] = informer
        return answered

    async def _sync(self) -> None:
        running = self._controllers.views
        wanted: dict[ControllerId, ControllerView] = {}
        present: set[ControllerId] = set()
        transient = False
        self._soon = None
        missing = False
        for kind in self._kinds:
            source = self._sources.get(kind.kind.value)
            if source is None:
                continue
            for cached in source.store:
                ident = (kind.kind.value, cached.name)
                present.add(ident)  # exists: not deleted, whoever runs it
                if not self._selector.matches(cached.labels):
                    if ident not in self._skipped:
                        self._skipped.add(ident)
                        log.debug("controller not selected by --target-label-selector", id=ident)
                    continue
                self._skipped.discard(ident)
                try:
                    view = await self._view(kind, cached)
                except _Transient as e:
                    transient = True
                    log.warning(
                        "controller not resolved: API error, retrying",
                        controller=cached.name,
                        kind=ident[0],
                        error=str(e),
                    )
                    view = running.get(ident)  # keep running what ran: not its fault
                except _NotYet as e:
                    soon = max(e.retry_after, SOONEST)
                    self._soon = soon if self._soon is None else min(self._soon, soon)
                    view = running.get(ident)  # no verdict yet
                failure = self._failed.get(ident)
                missing = missing or (failure is not None and failure.missing)
                if view is not None:
                    wanted[ident] = view
        if transient:
            self._backoff = min(max(2 * self._backoff, 1.0), self._retry_interval)
        else:
            self._backoff = 0.0
        if missing:
            self._missing = min(max(2 * self._missing, MISSING_RETRY), self._retry_interval)
        else:
            self._missing = 0.0
        if self._references is not None:
            self._references.use(
                object_refs(s for v in wanted.values() for s in v.connection_settings().values())
            )
        for ident in set(self._reported) - set(wanted):
            del self._reported[ident]
        for ident in set(self._failed) - present:
            del self._failed[ident]
        added = {i for i, v in wanted.items() if running.get(i) is not v}
        removed = set(running) - set(wanted)
        if not added and not removed:
            self._report_refusals()
            return
        cleanups = [
            (running[i], finalizers.holding(running[i], self._informers))
            for i in removed
            if i not in present and i[0] in self._sources
        ]
        await self._use(wanted)
        for ident in added:
            self._spawn(self._report_synced(wanted[ident]))
        self._controllers.replace(wanted)
        for ident in removed:
            log.info("controller stopped", controller=running[ident].name, kind=ident[0])
        for view, held in cleanups:
            if held and self._writer is not None:
                self._spawn(self._remove_finalizers(self._writer, view, held))
        views, started = list(wanted.values()), [wanted[i] for i in added]
        for listener in self._listeners:
            listener.controllers_changed(views, started)
        self._report_refusals()

    async def _follow_refusals(self) -> None:
        while True:
            await self._refusals.wait_changed()
            self._report_refusals()

    def _report_refusals(self) -> None:
        """Report the refusals of running controllers; publish why each selected controller
        does not do its job."""
        stalled = {ident: failure.reason for ident, failure in self._failed.items()}
        stalled.update(self._refusal_reports.report(self._controllers.views))
        self._controllers.stalled = stalled

    async def _remove_finalizers(
        self, writer: FinalizerWriter, view: ControllerView, held: list[finalizers.Held]
    ) -> None:
        removal = await finalizers.remove(writer, held, view.finalizer)
        self._refusal_reports.finalizers_left(view, removal)

    async def _report_synced(self, view: ControllerView) -> None:
        """Log once every informer ``view`` uses has synced (it may be stopped first)."""
        started = self._clock.now()
        for resource in (*view.parents, *view.children):
            informer = self._informers.get(resource)
            if informer is None:
                return  # released meanwhile: the controller is gone or changed
            await informer.wait_synced()
        log.info(
            "controller informers synced",
            controller=view.name,
            kind=view.definition.kind.value,
            seconds=round(self._clock.now() - started, 3),
        )

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _view(self, kind: Kind, cached: Cached) -> ControllerView | None:
        ident = (kind.kind.value, cached.name)
        current = self._controllers.get(ident)
        if current is not None and current.resource_version == cached.resource_version:
            connections = await self._connections(current, orjson.loads(cached.raw))
            if connections == current.connections:
                return current
            log.info("hook connection material changed", controller=current.name, kind=ident[0])
            return current.with_connections(connections)
        obj: dict[str, Any] = orjson.loads(cached.raw)
        try:
            view = await self._resolve(kind, obj, cached)
        except Unusable as e:
            failure = self._failed.get(ident)
            if failure is None or failure.resource_version != cached.resource_version:
                failure = self._failed[ident] = _Failure(cached.resource_version)
            failure.missing = isinstance(e.__cause__, ResourceNotFound)
            failure.reason = str(e)
            if str(e) not in failure.reported:
                failure.reported.add(str(e))
                log.warning(
                    "controller not started", controller=cached.name, kind=ident[0], error=str(e)
                )
                self._recorder.emit(obj, WARNING, e.reason, str(e))
            return None
        self._failed.pop(ident, None)
        view = view.with_connections(await self._connections(view, obj))
        log.info(
            "controller started",
            controller=view.name,
            kind=ident[0],
            parents=[group_resource(p) for p in view.parents],
        )
        self._recorder.emit(obj, NORMAL, names.REASON_STARTED, "controller started")
        for finding in unsupported(kind.kind.value, obj):
            log.warning(
                "controller field not acted on",
                controller=view.name,
                kind=ident[0],
                field=finding.path,
                effect=finding.effect,
            )
            self._recorder.emit(obj, WARNING, names.REASON_UNSUPPORTED_FIELD, str(finding))
        self._report_pause(view, obj)
        for problem in limits_of(obj)[1]:
            log.warning(
                "controller annotation not acted on",
                controller=view.name,
                kind=ident[0],
                annotation=problem.annotation,
                value=problem.value,
            )
            self._recorder.emit(obj, WARNING, names.REASON_INVALID_ANNOTATION, str(problem))
        return view

    def _report_pause(self, view: ControllerView, obj: dict[str, Any]) -> None:
        pause = pause_of(annotations_of(obj))
        if pause.problem is not None:
            log.warning(
                "controller annotation not understood",
                controller=view.name,
                kind=view.kind.value,
                problem=pause.problem,
            )
            self._recorder.emit(obj, WARNING, names.REASON_INVALID_ANNOTATION, pause.problem)
        elif pause.paused:
            log.info("controller paused", controller=view.name, kind=view.kind.value)
            self._recorder.emit(
                obj,
                NORMAL,
                names.REASON_PAUSED,
                f'the syncs of its parents are paused ({PAUSED}: "true"); a parent being '
                "deleted is still finalized",
            )

    async def _resolve(self, kind: Kind, obj: dict[str, Any], cached: Cached) -> ControllerView:
        """``kind.view``, with API errors sorted: ``Unusable`` for an unknown resource,
        ``_NotYet`` while discovery cannot tell, ``_Transient`` for any other API error or a
        timeout."""
        try:
            return await kind.view(obj, cached, self._context)
        except ResourceNotFoundYet as e:
            raise _NotYet(e.retry_after) from e
        except ResourceNotFound as e:
            raise Unusable(names.REASON_CREATE_ERROR, f"cannot resolve a resource: {e}") from e
        except (KubeError, TimeoutError) as e:
            raise _Transient(str(e) or type(e).__name__) from e

    async def _connections(self, view: ControllerView, obj: dict[str, Any]) -> bytes:
        """The hooks' resolved connections; new problems become Warning events."""
        settings = {hook.value: chosen for hook, chosen in view.connection_settings().items()}
        connections, problems = await resolve_connections(settings, self._references)
        reported = self._reported.get(view.id, set())
        for problem in problems:
            if problem not in reported:
                message = f"hook connection unusable, its calls will fail: {problem}"
                log.warning(
                    "hook connection unusable",
                    controller=view.name,
                    kind=view.kind.value,
                    problem=problem,
                )
                self._recorder.emit(obj, WARNING, names.REASON_CREATE_ERROR, message)
        self._reported[view.id] = set(problems)
        return connections

    def _needs(
        self, views: dict[ControllerId, ControllerView]
    ) -> dict[str, tuple[Resource, Selector | None]]:
        """Per group-resource, the resource and the label selector its watch may carry."""
        resources: dict[str, Resource] = {}
        needs: dict[str, list[Selector | None]] = {}
        for view in views.values():
            narrowed = [(r, view.watch_selector(r) if self._narrow else None) for r in view.parents]
            for resource, need in (*narrowed, *((r, None) for r in view.children)):
                key = group_resource(resource)
                resources[key] = resource
                needs.setdefault(key, []).append(need)
        return {key: (resources[key], combine(needs[key])) for key in resources}

    async def _use(self, views: dict[ControllerId, ControllerView]) -> None:
        needed = self._needs(views)
        for key, (resource, selector) in needed.items():
            held = self._acquired.get(key)
            if held is None:
                informer = self._informers.acquire(resource, selector=selector)
                handler = self._routes.handler(resource)
                informer.add_handler(handler)
                self._acquired[key] = _Held(resource, informer, handler, selector)
            elif held.selector != selector:
                self._informers.reselect(resource, held.selector, selector)
                held.selector = selector
        for key in set(self._acquired) - set(needed):
            await self._release(self._acquired.pop(key))

    async def _release(self, held: _Held) -> None:
        held.informer.remove_handler(held.handler)
        await self._informers.release(held.resource, selector=held.selector)

    async def _release_all(self) -> None:
        for held in self._acquired.values():
            await self._release(held)
        self._acquired.clear()
        for source in self._sources.values():
            await self._informers.release(source.resource)
        self._sources.clear()
