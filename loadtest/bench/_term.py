"""A coordinator's term in this process, over stores the benchmark fills, with worker links.

``term_over(stores, parent=...)`` builds the real ``Term`` as the coordinator does, with one
CompositeController (``composite_controller``, seen through ``composite_view``: parent
``parent``, ConfigMap children, ``generateSelector``) and informers that are the given stores
(already synced). ``running_term(stores, parent=..., workers=...)`` also binds it on ipc,
runs its receive and send loops, connects ``workers`` ``DealerLink``s (``w0``, ``w1``...),
assigns every slot and reads each link's WELCOME and ASSIGN; ``assigned(term, workers)`` only
gives every slot to workers that joined without a socket (what the term queues for them stays
in its dispatch). What the benchmark then does with the term (events into the router, keys
into the dispatch, FETCHes) is its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import orjson
import zmq
import zmq.asyncio

from manager.informers.store import Store
from manager.kinds.composite import CompositeView
from manager.link.router import RouterLink
from manager.settings import CoordinatorSettings
from manager.term.grace import Grace
from manager.term.term import Term
from proto.api.controllers import parse_composite_controller
from proto.kube.resources import Resource
from proto.wire import Hello, Welcome
from workers.link.dealer import DealerLink

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)


def composite_controller(parent: Resource) -> dict[str, Any]:
    """The CompositeController ``bench`` of ``parent`` with ConfigMap children, as an object."""
    api_version = f"{parent.group}/{parent.version}" if parent.group else parent.version
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": "bench", "uid": "cc-uid"},
        "spec": {
            "generateSelector": True,
            "parentResource": {"apiVersion": api_version, "resource": parent.name},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:9/unused"}}},
        },
    }


def composite_view(parent: Resource) -> CompositeView:
    """``composite_controller(parent)`` as the coordinator's kind sees it."""
    controller = composite_controller(parent)
    spec = parse_composite_controller(controller)
    return CompositeView(spec, orjson.dumps(controller), "1", parent, (CONFIGMAPS,))


class _Informer:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.last_resource_version = "1"
        self.synced = True


class Informers:
    """Synced informers that are the given stores, by resource name."""

    def __init__(self, stores: Mapping[str, Store]) -> None:
        self._informers = {name: _Informer(s) for name, s in stores.items()}
        self.synced = True

    def get(self, resource: Resource) -> _Informer | None:
        return self._informers.get(resource.name)

    def store(self, resource: Resource) -> Store | None:
        informer = self._informers.get(resource.name)
        return informer.store if informer is not None else None


async def _worker(ctx: zmq.asyncio.Context, endpoint: str, wid: str) -> DealerLink:
    link = DealerLink(wid, endpoint, context=ctx)
    for _ in range(100):
        if await link.send(Hello(wid, f"inc-{wid}", 16, os.getpid())):
            break
        await asyncio.sleep(0.01)
    return link


def term_over(
    stores: Mapping[str, Store],
    *,
    parent: Resource,
    endpoint: str = "",
    link: RouterLink | None = None,
) -> Term:
    """The term over ``stores`` (see the module docstring), not running; ``link``: its
    socket, when not a real one."""
    unused: Any = None  # the term is driven directly: no discovery, events or hooks
    term = Term(
        epoch=1,
        coordinator_id="bench",
        settings=CoordinatorSettings(bind=endpoint or "ipc:///unused"),
        grace=Grace(4.0),
        discovery=unused,
        informers=Informers(stores),  # type: ignore[arg-type]
        recorder=unused,
        hooks=unused,
        link=link,
    )
    view = composite_view(parent)
    term.controllers.views = {view.id: view}
    term.router.controllers_changed([view], [view])
    return term


def assigned(term: Term, workers: Sequence[str]) -> None:
    """Every slot of ``term`` given to ``workers``, which join without a socket."""
    now = time.monotonic()
    for worker in workers:
        welcome = term.membership.hello(worker, f"inc-{worker}", 16, now, worker.encode())
        term.dispatch.emit(welcome or [])
    term.membership.start_at = 0
    term.dispatch.emit(term.membership.tick(now))


@contextlib.asynccontextmanager
async def running_term(
    stores: Mapping[str, Store], *, parent: Resource, workers: int
) -> AsyncIterator[tuple[Term, list[DealerLink]]]:
    """The term and its worker links (see the module docstring)."""
    endpoint = f"ipc://{tempfile.mkdtemp()}/bench.sock"
    term = term_over(stores, parent=parent, endpoint=endpoint)
    term.link.bind(endpoint)
    ctx = zmq.asyncio.Context()
    tasks = [
        asyncio.create_task(term.sessions.receive()),
        asyncio.create_task(term.sessions.send()),
    ]
    links = [await _worker(ctx, endpoint, f"w{i}") for i in range(workers)]
    try:
        for link in links:
            assert isinstance(await link.recv(), Welcome)
        term.membership.start_at = 0
        term.dispatch.emit(term.membership.tick(time.monotonic()))
        for link in links:
            await link.recv()  # ASSIGN
        yield term, links
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for link in links:
            link.close()
        term.link.close()
        ctx.destroy(linger=0)
