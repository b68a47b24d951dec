"""manager.routing.related: when the customize hook is called (per generation, per revision under
rolling updates, again once an answer is 20 minutes old) and what its answers select.

Fakes at the seams ``Related`` is given (hook client, discovery, informers, recorder, clock);
the hook selects the ConfigMap ``config-<spec.config>`` of the parent it is asked about.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeVar

import orjson
import pytest
import pytest_asyncio
import structlog

from manager.informers.informer import EventHandler
from manager.informers.store import Cached, Store
from manager.kinds.composite import CompositeView
from manager.routing.related import Related
from proto.api.controllers import parse_composite_controller
from proto.api.errors import HookResponseError
from proto.hooks.client import HookEndpoint
from proto.kube.resources import Resource
from proto.runtime.clock import FakeClock
from proto.wire import ParentKey, Priority

THINGS = Resource("example.com", "v1", "things", "Thing", True, subresources=("status",))
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
REVISIONS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "controllerrevisions", "ControllerRevision", True
)
T = TypeVar("T")
PODS = [{"apiGroup": "", "kind": "ConfigMap", "names": ["p-0"]}]


def view() -> CompositeView:
    obj = {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": "cc", "uid": "cc-uid"},
        "spec": {
            "generateSelector": True,
            "parentResource": {"apiVersion": "example.com/v1", "resource": "things"},
            "childResources": [
                {
                    "apiVersion": "v1",
                    "resource": "configmaps",
                    "updateStrategy": {"method": "RollingRecreate"},
                }
            ],
            "hooks": {
                "sync": {"webhook": {"url": "http://hook/sync"}},
                "customize": {"webhook": {"url": "http://hook/customize"}},
            },
        },
    }
    spec = parse_composite_controller(obj)
    return CompositeView(spec, orjson.dumps(obj), "1", THINGS, (CONFIGMAPS, REVISIONS), REVISIONS)


def cached(obj: dict[str, Any]) -> Cached:
    return Cached.from_object(obj, orjson.dumps(obj))


def thing(config: str, generation: int | None = 1) -> Cached:
    """The parent ``p``; ``generation=None``: one without ``metadata.generation``, as a
    ConfigMap or a Secret, whose changes no generation counts."""
    metadata: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "uid-p"}
    if generation is not None:
        metadata |= {"generation": generation, "resourceVersion": str(generation)}
    return cached(
        {
            "apiVersion": "example.com/v1",
            "kind": "Thing",
            "metadata": metadata,
            "spec": {"config": config},
        }
    )


def revision(name: str, config: str, *, children: bool = True) -> bytes:
    obj: dict[str, Any] = {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "ControllerRevision",
        "metadata": {"name": name, "namespace": "ns"},
        "parentPatch": {"spec": {"config": config}},
    }
    if children:
        obj["children"] = PODS
    return orjson.dumps(obj)


def configmap(name: str) -> Cached:
    return cached(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        }
    )


class Hooks:
    """The hook client's ``call_decoded``: the answer goes through the caller's decoder, and
    each call is counted as the real client counts it (``"200"``, or ``invalid-response``
    when the decoder refuses the answer)."""

    def __init__(self) -> None:
        self.asked: list[str] = []  # spec.config of each parent the hook was called with
        self.forgotten: list[tuple[str, str]] = []
        self.extra: dict[str, Any] = {}  # more fields of every answer
        self.codes: list[str] = []  # the code each call was counted under
        self.headers: list[Mapping[str, str]] = []

    async def call_decoded(
        self,
        endpoint: HookEndpoint,
        body: bytes,
        *,
        decode: Callable[[bytes], T],
        headers: Mapping[str, str],
    ) -> T:
        self.headers.append(headers)
        config = orjson.loads(body)["parent"]["spec"]["config"]
        self.asked.append(config)
        rule = {"apiVersion": "v1", "resource": "configmaps", "names": [f"config-{config}"]}
        try:
            decoded = decode(orjson.dumps({"relatedResources": [rule], **self.extra}))
        except HookResponseError:
            self.codes.append("invalid-response")
            raise
        self.codes.append("200")
        return decoded

    def forget(self, *, controller_type: str, controller_name: str) -> None:
        self.forgotten.append((controller_type, controller_name))


class Discovery:
    async def resolve(self, api_version: str, *, resource: str) -> Resource:
        assert resource == "configmaps"
        return CONFIGMAPS


class Informer:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.listed = asyncio.Event()
        self.listed.set()
        self.handlers: list[EventHandler] = []

    @property
    def synced(self) -> bool:
        return self.listed.is_set()

    def add_handler(self, handler: EventHandler) -> None:
        self.handlers.append(handler)

    def remove_handler(self, handler: EventHandler) -> None:
        self.handlers.remove(handler)

    async def wait_synced(self) -> None:
        await self.listed.wait()


class Informers:
    def __init__(self) -> None:
        store = Store()
        for name in ("config-a", "config-b", "config-c"):
            store.upsert(configmap(name))
        self.informer = Informer(store)
        self.users = 0

    def acquire(self, resource: Resource) -> Informer:
        self.users += 1
        return self.informer

    async def release(self, resource: Resource) -> None:
        self.users -= 1


class Events:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str]] = []

    def emit(self, obj: Any, type: str, reason: str, message: str) -> None:
        self.emitted.append((reason, message))


class World:
    def __init__(self) -> None:
        self.hooks = Hooks()
        self.informers = Informers()
        self.events = Events()
        self.pushed: list[Any] = []
        self.clock = FakeClock()
        self.related = Related(
            epoch=4,
            hooks=self.hooks,  # type: ignore[arg-type]
            discovery=Discovery(),  # type: ignore[arg-type]
            informers=self.informers,  # type: ignore[arg-type]
            recorder=self.events,  # type: ignore[arg-type]
            sink=self,
            clock=self.clock,
        )
        self.view = view()

    def push(self, key: ParentKey, priority: Priority) -> None:
        self.pushed.append(key)

    async def ready(self, parent: Cached, revisions: tuple[bytes, ...]) -> None:
        versions = self.view.revision_parents(parent, revisions)
        assert await self.related.wait_ready(self.view, THINGS, parent, 5.0, versions)
        assert self.related.ready(self.view, THINGS, parent, versions)

    def related_names(self, groups: dict[str, tuple[bytes, ...]]) -> list[str]:
        return [orjson.loads(raw)["metadata"]["name"] for raw in groups["ConfigMap.v1"]]


@pytest_asyncio.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    task = asyncio.create_task(w.related.run())
    yield w
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.mark.asyncio
async def test_one_revision_costs_nothing_more(world: World) -> None:
    parent = thing("b")
    await world.ready(parent, (revision("rev-b", "b"), revision("rev-a", "a", children=False)))
    assert world.hooks.asked == ["b"]
    assert world.related_names(world.related.related_of(world.view, parent)) == ["config-b"]
    assert world.related.revision_related_of(world.view, parent) == {}


@pytest.mark.asyncio
async def test_customize_requests_carry_the_attempt_headers(world: World) -> None:
    await world.ready(thing("b", generation=3), (revision("rev-b", "b"), revision("rev-a", "a")))
    first, second = world.hooks.headers
    for headers in (first, second):
        assert headers["X-Metashard-Epoch"] == "4"
        assert headers["X-Metashard-Slot-Generation"] == "0"
        assert headers["X-Metashard-Parent-Uid"] == "uid-p"
        assert headers["X-Metashard-Parent-Resource-Version"] == "3"
        assert headers["X-Metashard-Parent-Generation"] == "3"
    assert first["X-Metashard-Attempt"] != second["X-Metashard-Attempt"]


@pytest.mark.asyncio
async def test_each_older_revision_with_children_gets_its_own_related_objects(
    world: World,
) -> None:
    parent = thing("b")
    await world.ready(parent, (revision("rev-b", "b"), revision("rev-a", "a")))
    assert sorted(world.hooks.asked) == ["a", "b"]
    assert world.related_names(world.related.related_of(world.view, parent)) == ["config-b"]
    per_revision = world.related.revision_related_of(world.view, parent)
    assert list(per_revision) == ["rev-a"]
    assert world.related_names(per_revision["rev-a"]) == ["config-a"]

    # Asked again, the answers are reused: no new call.
    await world.ready(parent, (revision("rev-b", "b"), revision("rev-a", "a")))
    assert sorted(world.hooks.asked) == ["a", "b"]

    # A related object of the older revision's rules wakes the parent.
    world.pushed.clear()
    (handler,) = world.informers.informer.handlers
    handler("MODIFIED", configmap("config-a"), configmap("config-a"), False)
    handler("MODIFIED", configmap("config-c"), configmap("config-c"), False)
    assert [key.name for key in world.pushed] == ["p"]

    # Once the older revision owns no children, its answer is dropped.
    await world.ready(parent, (revision("rev-b", "b"), revision("rev-a", "a", children=False)))
    assert world.related.revision_related_of(world.view, parent) == {}
    assert world.informers.users == 1


@pytest.mark.asyncio
async def test_a_new_generation_drops_the_revisions_answers_too(world: World) -> None:
    parent = thing("b")
    await world.ready(parent, (revision("rev-b", "b"), revision("rev-a", "a")))
    assert world.informers.users == 1  # one informer, shared by every answer naming it
    newer = thing("c", generation=2)
    world.related.parent_changed(world.view, THINGS, newer, parent)
    await world.ready(newer, (revision("rev-c", "c"), revision("rev-b", "b")))
    assert sorted(world.hooks.asked) == ["a", "b", "b", "c"]
    per_revision = world.related.revision_related_of(world.view, newer)
    assert list(per_revision) == ["rev-b"]
    assert world.related_names(per_revision["rev-b"]) == ["config-b"]
    await asyncio.sleep(0)
    assert world.informers.users == 1
    world.related.parent_changed(world.view, THINGS, None, newer)
    await asyncio.sleep(0)
    assert world.informers.users == 0


@pytest.mark.asyncio
async def test_an_answer_counts_once_its_informer_has_listed(world: World) -> None:
    world.informers.informer.listed.clear()
    parent = thing("b")
    assert not world.related.ready(world.view, THINGS, parent)
    assert not await world.related.wait_ready(world.view, THINGS, parent, 0.2)
    assert world.hooks.asked == ["b"]
    world.informers.informer.listed.set()
    assert await world.related.wait_ready(world.view, THINGS, parent, 5.0)
    assert world.related_names(world.related.related_of(world.view, parent)) == ["config-b"]


def test_a_controller_that_goes_is_forgotten_by_the_hook_client() -> None:
    """Its hook metric series, ETag caches and TLS contexts go with it (``HookClient.forget``)."""
    w = World()
    w.related.controllers_changed([w.view], [w.view])
    w.related.controllers_changed([w.view], [w.view])
    assert w.hooks.forgotten == []
    w.related.controllers_changed([], [])
    assert w.hooks.forgotten == [("CompositeController", "cc")]


@pytest.mark.asyncio
async def test_loose_answers_problems_are_logged_once_per_controller(world: World) -> None:
    """A v1 customize hook is decoded in loose mode: its unknown fields are used as before,
    and each is logged once, not at every call."""
    world.hooks.extra = {"relatedResource": [], "Extra": 1}
    with structlog.testing.capture_logs() as logs:
        first = thing("b")
        await world.ready(first, ())
        newer = thing("c", generation=2)
        world.related.parent_changed(world.view, THINGS, newer, first)
        await world.ready(newer, ())
    assert world.hooks.asked == ["b", "c"]
    assert world.related_names(world.related.related_of(world.view, newer)) == ["config-c"]
    warned = [e for e in logs if e["event"] == "loose decoding of a customize hook answer"]
    assert sorted(e["problem"] for e in warned) == [
        'unknown field "Extra"',
        'unknown field "relatedResource"',
    ]
    assert {e["controller"] for e in warned} == {"cc"}


@pytest.mark.asyncio
async def test_an_answer_that_cannot_be_decoded_counts_as_invalid_response(world: World) -> None:
    """The hook client decodes the answer, so a 200 of the wrong shape is counted as
    ``invalid-response``, not ``"200"``; the parent gets a ``SyncError`` naming the problem."""
    world.hooks.extra = {"relatedResources": "nope"}
    parent = thing("b")
    assert not await world.related.wait_ready(world.view, THINGS, parent, 0.5)
    assert world.hooks.codes == ["invalid-response"]
    ((reason, message),) = world.events.emitted
    assert reason == "SyncError"
    assert "relatedResources" in message


TTL = 20 * 60.0  # how long an answer is kept, as Metacontroller's customize cache


@pytest.mark.asyncio
async def test_an_answer_is_asked_again_at_the_first_event_once_20_minutes_old(
    world: World,
) -> None:
    parent = thing("b", generation=None)
    await world.ready(parent, ())
    changed = thing("c", generation=None)  # e.g. a label the hook reads: no new generation

    # Younger than 20 minutes, the answer stands whatever the parent's events.
    world.clock.advance(TTL - 1)
    world.related.parent_changed(world.view, THINGS, changed, parent)
    await world.ready(changed, ())
    assert world.hooks.asked == ["b"]
    assert world.related_names(world.related.related_of(world.view, changed)) == ["config-b"]

    # Once 20 minutes old, the next event asks again, as a new generation does: snapshots
    # wait for the new answer meanwhile.
    world.clock.advance(1)
    world.related.parent_changed(world.view, THINGS, changed, changed)
    assert not world.related.ready(world.view, THINGS, changed)
    await world.ready(changed, ())
    assert world.hooks.asked == ["b", "c"]
    assert world.related_names(world.related.related_of(world.view, changed)) == ["config-c"]
    await asyncio.sleep(0)
    assert world.informers.users == 1

    # The new answer is kept 20 minutes from when it came.
    world.clock.advance(TTL - 1)
    world.related.parent_changed(world.view, THINGS, changed, changed)
    await world.ready(changed, ())
    assert world.hooks.asked == ["b", "c"]


@pytest.mark.asyncio
async def test_a_resync_asks_again_for_an_expired_answer_and_its_revisions(world: World) -> None:
    """A periodic resync is no informer event: it reaches the parent as a snapshot, which asks
    again for every answer of the parent's family once one of them is 20 minutes old."""
    parent = thing("b", generation=None)
    revisions = (revision("rev-b", "b"), revision("rev-a", "a"))
    await world.ready(parent, revisions)
    assert sorted(world.hooks.asked) == ["a", "b"]
    world.clock.advance(TTL)
    versions = world.view.revision_parents(parent, revisions)
    assert not world.related.ready(world.view, THINGS, parent, versions)
    await world.ready(parent, revisions)
    assert sorted(world.hooks.asked) == ["a", "a", "b", "b"]
    per_revision = world.related.revision_related_of(world.view, parent)
    assert world.related_names(per_revision["rev-a"]) == ["config-a"]
    await asyncio.sleep(0)
    assert world.informers.users == 1
