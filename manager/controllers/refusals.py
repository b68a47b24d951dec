"""The requests the API server refuses now (403), per resource: ``Refusals`` (state).

The coordinator's informers tell it (``manager.informers.informer.RefusalSink``): ``refused``
when a list or watch of a resource is refused, ``allowed`` once it succeeds again. The hosted
controllers (``manager.controllers.hosted``) read it to report, on each controller that needs a
refused resource, why it cannot run, and wait on ``wait_changed`` to do so at once.

- ``get(resource)``: the refusal of that resource now (group, version and plural name), or
  None. A resource refused again with other words (another verb, namespace or user) holds the
  latest.
- ``credentials``: who the process's credentials are, when they say so
  (``proto.kube.refusal.identity``: a ServiceAccount's token), named in ``describe``.
- ``describe(refusal)``: ``ServiceAccount ns/sa may not watch things.example.com at the
  cluster scope (403 Forbidden)``: the start of every message about a refusal.
- ``of_group(group)``: the refusals of one API group's resources (``metacontroller.k8s.io``:
  the controller objects themselves), for ``/readyz``.

``RefusalReports`` says so where operators look, on the controller objects:

- ``report(views)``: for each running controller, a Warning event (reason ``Forbidden``,
  aggregated as every event is) and a log line per refusal of a resource it watches (its
  parents and children), once while the refusal lasts (again if it ends and comes back); it
  returns why each of those controllers cannot run.
- ``finalizers_left(view, removal)``: a Warning event on a deleted controller whose finalizer
  could not be removed from its parents because a request was refused.

Every message names who is refused what (``describe``) and that ``metashard rbac`` prints the
rules the controllers need. Must be used from one event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

import orjson

from manager.controllers.finalizers import Removal
from manager.controllers.view import ControllerId, ControllerView
from proto.kube.events import WARNING
from proto.kube.refusal import Refusal
from proto.kube.resources import Resource
from proto.runtime.logs import get_logger

log = get_logger("metashard.controllers")

REASON_FORBIDDEN = "Forbidden"
"""The reason of the Warning events about refused requests."""
RULES_HINT = "`metashard rbac` prints the rules the controllers need"

_Key = tuple[str, str, str]


def _key(resource: Resource) -> _Key:
    return (resource.group, resource.version, resource.name)


class Refusals:
    def __init__(self, *, credentials: str | None = None) -> None:
        self.credentials = credentials
        self._refused: dict[_Key, Refusal] = {}
        self._changed = asyncio.Event()

    def refused(self, resource: Resource, refusal: Refusal) -> None:
        if self._refused.get(_key(resource)) != refusal:
            self._refused[_key(resource)] = refusal
            self._notify()

    def allowed(self, resource: Resource) -> None:
        if self._refused.pop(_key(resource), None) is not None:
            self._notify()

    def get(self, resource: Resource) -> Refusal | None:
        return self._refused.get(_key(resource))

    def of_group(self, group: str) -> list[Refusal]:
        return [r for (g, _, _), r in sorted(self._refused.items()) if g == group]

    def describe(self, refusal: Refusal) -> str:
        return f"{refusal.who(self.credentials)} may not {refusal.what} (403 Forbidden)"

    async def wait_changed(self) -> None:
        """Return at the next ``refused`` or ``allowed`` that changes something."""
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


class EventSink(Protocol):
    """``proto.kube.events.EventRecorder`` conforms."""

    def emit(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None: ...


class RefusalReports:
    """Reports ``refusals`` on the controller objects (see the module docstring)."""

    def __init__(self, refusals: Refusals, recorder: EventSink) -> None:
        self._refusals = refusals
        self._recorder = recorder
        self._reported: dict[ControllerId, set[Refusal]] = {}  # reported, still refused

    def report(self, views: Mapping[ControllerId, ControllerView]) -> dict[ControllerId, str]:
        stalled: dict[ControllerId, str] = {}
        for ident, view in views.items():
            refusals = {
                refusal: None
                for resource in (*view.parents, *view.children)
                if (refusal := self._refusals.get(resource)) is not None
            }
            reported = self._reported.get(ident, set())
            for refusal in refusals:
                if refusal in reported:
                    continue
                described = self._refusals.describe(refusal)
                log.warning(
                    "controller cannot run: the API server refuses a request it needs",
                    controller=view.name,
                    kind=ident[0],
                    refused=described,
                )
                message = f"{described}, so the controller cannot run; {RULES_HINT}"
                self._recorder.emit(orjson.loads(view.raw), WARNING, REASON_FORBIDDEN, message)
            self._reported[ident] = set(refusals)  # a refusal that ends and returns is new
            if refusals:
                stalled[ident] = "; ".join(self._refusals.describe(r) for r in refusals)
        for ident in set(self._reported) - set(views):
            del self._reported[ident]
        return stalled

    def finalizers_left(self, view: ControllerView, removal: Removal) -> None:
        for refusal in removal.refused:
            message = (
                f"{self._refusals.describe(refusal)}, so the finalizer {view.finalizer} stays on "
                f"{removal.left} objects; {RULES_HINT}"
            )
            self._recorder.emit(orjson.loads(view.raw), WARNING, REASON_FORBIDDEN, message)
