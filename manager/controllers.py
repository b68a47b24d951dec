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
- Informers are shared and reference-counted per resource: when controllers change, the
  informers of the new set are acquired before those no longer used are released, so editing
  one controller never restarts an informer another one uses.
- ``on_change(views, added)`` is called after every change with the full set of valid
  controllers and the names of those that started (or changed) in this change.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from manager.informer import Informer
from manager.informers import Informers
from manager.routing import Handler
from manager.store import Cached
from manager.views import ControllerView, group_resource
from proto.api import names
from proto.api.controllers import parse_composite_controller
from proto.api.errors import InvalidControllerError
from proto.clock import SYSTEM_CLOCK, Clock
from proto.kube.errors import KubeError, ResourceNotFound, TransportError
from proto.kube.events import NORMAL, WARNING, EventRecorder
from proto.kube.resources import Discovery, Resource
from proto.logs import get_logger

log = get_logger("metashard.controllers")

OnChange = Callable[[dict[str, ControllerView], set[str]], Awaitable[None]]


def _why(error: KubeError) -> str:
    if isinstance(error, ResourceNotFound):
        return "is the CRD installed?"
    if isinstance(error, TransportError):
        return "the API server is unreachable"
    return "discovery failed"


class _Unusable(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


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
        self._changed = asyncio.Event()
        self._source: Informer | None = None
        self._loaded = asyncio.Event()

    @property
    def loaded(self) -> bool:
        """The controller objects have been read once (their informers may still sync)."""
        return self._loaded.is_set()

    async def run(self) -> None:
        source = await self._watch_controllers()
        try:
            while True:
                await source.wait_synced()
                await self._sync(source)
                self._loaded.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), self._retry_interval)
                self._changed.clear()
        finally:
            await self._release_all()

    async def _watch_controllers(self) -> Informer:
        while True:
            try:
                resource = await self._discovery.resolve(
                    names.API_VERSION, resource=names.COMPOSITE_CONTROLLERS
                )
                break
            except KubeError as e:
                log.error(
                    f"cannot watch CompositeControllers: {_why(e)}",
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
        for cached in source.store:
            view = await self._view(cached)
            if view is not None:
                wanted[view.name] = view
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
            return current
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
        if "status" not in parent.subresources:
            raise _Unusable(
                names.REASON_SYNC_ERROR,
                f"parent resource {spec.parent.resource}.{parent.group or 'core'} "
                f"{parent.version} must have the status subresource enabled",
            )
        return ControllerView(spec, cached.raw, cached.resource_version, parent, children)

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
