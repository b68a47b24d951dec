"""The hosted controllers: CompositeController objects turned into running routes.

Contract:
- Watches ``compositecontrollers.metacontroller.k8s.io`` (its CRD must be installed; until it
  is, the registry retries every ``retry_interval`` and says why in the log).
- Each object is parsed and validated (``proto.api.controllers``) and its parent and child
  resources are resolved through discovery. An invalid controller (bad spec, unknown
  resource, parent without the status subresource) is not run: a Warning event on the
  controller object (reason ``CreateError``, or ``SyncError`` for the missing status
  subresource, as Metacontroller does) and a log line say why; the others keep running.
  Failed controllers are retried every ``retry_interval`` (a CRD may appear later).
- A transient API error while resolving a controller (a 5xx or 429 from discovery, a timeout)
  is not a verdict on the controller: it is logged, no event is written, and the controller
  is tried again after a backoff of 1 s doubling up to ``retry_interval``. Nothing from the
  API ends ``run()``.
- Informers are shared and reference-counted per resource: when controllers change, the
  informers of the new set are acquired before those no longer used are released, so editing
  one controller never restarts an informer another one uses.
- ``on_change(views, added)`` is called after every change with the full set of valid
  controllers and the names of those that started (or changed) in this change.
- Hook connections: the Secrets and ConfigMaps a controller's webhooks (or its
  ``endpointConfigs``) name are read one by one (``manager.hookrefs``: a GET per object, never
  a list of all Secrets) and re-read every few seconds; each hook's resolved TLS material and
  credentials go into the controller's definition (``ControllerView.connections``). When they
  change the controller counts as changed, so workers get the new material without any edit
  of the controller. A missing object or key, or material that does not load, is a Warning
  event (``CreateError``) on the controller naming the object and the key (never a value),
  once per distinct problem; that hook carries the problem instead of credentials, and its
  calls fail (``SyncError`` on the parent) without reaching the hook server.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from manager.hookrefs import HookReferences, resolve_connections
from manager.informer import Informer
from manager.informers import Informers
from manager.routing import Handler
from manager.store import Cached
from manager.views import ControllerView, group_resource
from proto.api import names
from proto.api.controllers import CompositeController, parse_composite_controller
from proto.api.endpoints import object_refs
from proto.api.errors import InvalidControllerError
from proto.clock import SYSTEM_CLOCK, Clock
from proto.kube.errors import KubeError, ResourceNotFound
from proto.kube.events import NORMAL, WARNING, EventRecorder
from proto.kube.resources import Discovery, Resource
from proto.logs import get_logger

log = get_logger("metashard.controllers")

OnChange = Callable[[dict[str, ControllerView], set[str]], Awaitable[None]]


class _Unusable(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _Transient(Exception):
    """Resolving failed for a reason that is not the controller's: try again soon."""


class Controllers:
    def __init__(
        self,
        *,
        discovery: Discovery,
        informers: Informers,
        recorder: EventRecorder,
        handler: Callable[[Resource], Handler],
        on_change: OnChange,
        clock: Clock = SYSTEM_CLOCK,
        retry_interval: float = 30.0,
        references: HookReferences | None = None,
    ) -> None:
        self._discovery = discovery
        self._informers = informers
        self._recorder = recorder
        self._handler = handler
        self._on_change = on_change
        self._clock = clock
        self._retry_interval = retry_interval
        self.views: dict[str, ControllerView] = {}
        self._failed: dict[str, str] = {}  # name -> resourceVersion reported
        self._acquired: dict[str, tuple[Resource, Informer, Handler]] = {}
        self._references = references
        self._reported: dict[str, set[str]] = {}  # name -> connection problems reported
        self._changed = asyncio.Event()
        self._source: Informer | None = None
        self._loaded = asyncio.Event()
        self._backoff = 0.0  # > 0 while a transient error waits to be retried

    @property
    def loaded(self) -> bool:
        """The controller objects have been read once (their informers may still sync)."""
        return self._loaded.is_set()

    async def run(self) -> None:
        source = await self._watch_controllers()
        refresher = None
        if self._references is not None:
            refresher = asyncio.create_task(
                self._references.run(self._changed.set), name="hook-references"
            )
        try:
            while True:
                await source.wait_synced()
                await self._sync(source)
                self._loaded.set()
                wait = self._backoff or self._retry_interval
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), wait)
                self._changed.clear()
        finally:
            if refresher is not None:
                refresher.cancel()
                await asyncio.gather(refresher, return_exceptions=True)
            await self._release_all()

    async def _watch_controllers(self) -> Informer:
        while True:
            try:
                resource = await self._discovery.resolve(
                    names.API_VERSION, resource=names.COMPOSITE_CONTROLLERS
                )
                break
            except (ResourceNotFound, KubeError) as e:
                log.error(
                    "cannot watch CompositeControllers: is the CRD installed?",
                    error=str(e),
                    retry_in=self._retry_interval,
                )
                await self._clock.sleep(self._retry_interval)
        informer = self._informers.acquire(resource)
        informer.add_handler(lambda *_: self._changed.set())
        self._source = informer
        return informer

    async def _sync(self, source: Informer) -> None:
        wanted: dict[str, ControllerView] = {}
        transient = False
        for cached in source.store:
            try:
                view = await self._view(cached)
            except _Transient as e:
                transient = True
                log.warning(
                    "controller not resolved: API error, retrying",
                    controller=cached.name,
                    error=str(e),
                )
                current = self.views.get(cached.name)
                if current is not None:  # keep running what ran: the error is not its fault
                    wanted[current.name] = current
                continue
            if view is not None:
                wanted[view.name] = view
        if transient:
            self._backoff = min(max(2 * self._backoff, 1.0), self._retry_interval)
        else:
            self._backoff = 0.0
        if self._references is not None:
            self._references.use(
                object_refs(
                    s for v in wanted.values() for s in v.spec.connection_settings().values()
                )
            )
        for name in set(self._reported) - set(wanted):
            del self._reported[name]
        added = {n for n, v in wanted.items() if self.views.get(n) is not v}
        removed = set(self.views) - set(wanted)
        if not added and not removed:
            return
        await self._use(wanted)
        self.views = wanted
        for name in removed:
            log.info("controller stopped", controller=name)
        await self._on_change(wanted, added)

    async def _view(self, cached: Cached) -> ControllerView | None:
        current = self.views.get(cached.name)
        if current is not None and current.resource_version == cached.resource_version:
            connections = await self._connections(current.spec, orjson.loads(cached.raw))
            if connections == current.connections:
                return current
            log.info("hook connection material changed", controller=current.name)
            return dataclasses.replace(current, connections=connections)
        obj: dict[str, Any] = orjson.loads(cached.raw)
        try:
            view = await self._resolve(obj, cached)
        except _Unusable as e:
            if self._failed.get(cached.name) != cached.resource_version:
                log.warning("controller not started", controller=cached.name, error=str(e))
                self._recorder.emit(obj, WARNING, e.reason, str(e))
            self._failed[cached.name] = cached.resource_version
            return None
        self._failed.pop(cached.name, None)
        log.info("controller started", controller=view.name, parent=view.parent_group_resource)
        self._recorder.emit(obj, NORMAL, names.REASON_STARTED, "controller started")
        return view

    async def _resolve(self, obj: dict[str, Any], cached: Cached) -> ControllerView:
        try:
            spec = parse_composite_controller(obj)
        except InvalidControllerError as e:
            raise _Unusable(names.REASON_CREATE_ERROR, f"invalid CompositeController: {e}") from e
        try:
            parent = await self._discovery.resolve(
                spec.parent.api_version, resource=spec.parent.resource
            )
            children = tuple(
                [
                    await self._discovery.resolve(c.api_version, resource=c.resource)
                    for c in spec.children
                ]
            )
        except ResourceNotFound as e:
            raise _Unusable(names.REASON_CREATE_ERROR, f"cannot resolve a resource: {e}") from e
        except (KubeError, TimeoutError) as e:
            raise _Transient(str(e) or type(e).__name__) from e
        if "status" not in parent.subresources:
            raise _Unusable(
                names.REASON_SYNC_ERROR,
                f"parent resource {spec.parent.resource}.{parent.group or 'core'} "
                f"{parent.version} must have the status subresource enabled",
            )
        connections = await self._connections(spec, obj)
        return ControllerView(
            spec, cached.raw, cached.resource_version, parent, children, connections
        )

    async def _connections(self, spec: CompositeController, obj: dict[str, Any]) -> bytes:
        """The hooks' resolved connections; new problems become Warning events."""
        settings = {hook.value: chosen for hook, chosen in spec.connection_settings().items()}
        connections, problems = await resolve_connections(settings, self._references)
        reported = self._reported.get(spec.name, set())
        for problem in problems:
            if problem not in reported:
                message = f"hook connection unusable, its calls will fail: {problem}"
                log.warning("hook connection unusable", controller=spec.name, problem=problem)
                self._recorder.emit(obj, WARNING, names.REASON_CREATE_ERROR, message)
        self._reported[spec.name] = set(problems)
        return connections

    async def _use(self, views: dict[str, ControllerView]) -> None:
        needed: dict[str, Resource] = {}
        for view in views.values():
            for resource in (view.parent, *view.children):
                needed[group_resource(resource)] = resource
        for key, resource in needed.items():
            if key not in self._acquired:
                informer = self._informers.acquire(resource)
                handler = self._handler(resource)
                informer.add_handler(handler)
                self._acquired[key] = (resource, informer, handler)
        for key in set(self._acquired) - set(needed):
            resource, informer, handler = self._acquired.pop(key)
            informer.remove_handler(handler)
            await self._informers.release(resource)

    async def _release_all(self) -> None:
        for resource, informer, handler in self._acquired.values():
            informer.remove_handler(handler)
            await self._informers.release(resource)
        self._acquired.clear()
        if self._source is not None:
            await self._informers.release(self._source.resource)
            self._source = None
