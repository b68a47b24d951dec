"""workers.link.fencing: writes and hook calls go out only while the worker may act.

Time is a fake clock shared by the worker's standing, the API session and a fake HTTP
transport that lets a test pause "the process" between the fence check and the send, or
while the hook answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson
import pytest
import structlog

from proto.api.controllers import HookName, Webhook
from proto.hooks.client import HookClient, HookEndpoint
from proto.kube.client import Client
from proto.kube.resources import Resource
from proto.runtime.http1 import HttpClient, HttpResponse, Ready
from proto.wire import SLOT_COUNT, Welcome
from tests.unit.proto.kube_fake import FakeApiServer, FakeClock, Reply, serve
from tests.unit.workers.composite_world import World, definition
from workers.link.fencing import Fence
from workers.link.standing import Standing
from workers.runner.runner import OutOfContact

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
PATH = "/api/v1/namespaces/ns/configmaps/c"
INTERVAL, TIMEOUT = 1.0, 5.0  # fence timeout 3 s, safety margin 0.5 s
ENDPOINT = HookEndpoint(HookName.SYNC, Webhook(url="http://hook/sync"), "CompositeController", "cc")


def standing(clock: FakeClock) -> Standing:
    """Joined at ``clock``'s now: deadline 3 s later."""
    s = Standing(clock=clock)
    s.join(Welcome(1, "c", "i", (), SLOT_COUNT, (), INTERVAL, TIMEOUT))
    return s


def throttled(seconds: int) -> Reply:
    status = {"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": "wait"}
    return Reply.json(429, status, headers={"Retry-After": str(seconds)})


@pytest.mark.asyncio
@pytest.mark.parametrize(("retry_after", "sent"), [(2, 2), (3, 1)])
async def test_a_write_is_checked_again_before_every_attempt(retry_after: int, sent: int) -> None:
    """A write checked in time but held back by a 429's Retry-After goes out only if it is
    still at least the safety margin before the deadline when it is sent."""
    clock = FakeClock()
    server = FakeApiServer()
    server.route("PUT", PATH, throttled(retry_after), Reply.json(200, {"kind": "ConfigMap"}))
    body = {"metadata": {"name": "c", "namespace": "ns", "resourceVersion": "1"}}
    async with serve(server, clock=clock) as session:
        writer = Client(session).gated(Fence(standing(clock), clock=clock).write)
        if sent == 2:  # 2 s later: 1 s before the deadline
            assert await writer.replace(CONFIGMAPS, body) == {"kind": "ConfigMap"}
        else:  # 3 s later: at the deadline
            with pytest.raises(OutOfContact):
                await writer.replace(CONFIGMAPS, body)
    assert len(server.received) == sent


@pytest.mark.asyncio
async def test_every_kind_of_write_is_refused_within_the_safety_margin() -> None:
    clock = FakeClock()
    server = FakeApiServer()
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        path = PATH if method != "POST" else PATH.rsplit("/", 1)[0]
        server.route(method, path, Reply.json(200, {"kind": "ConfigMap"}))
    body = {"metadata": {"name": "c", "namespace": "ns"}}
    async with serve(server, clock=clock) as session:
        writer = Client(session).gated(Fence(standing(clock), clock=clock).write)

        def writes() -> list[Any]:
            return [
                writer.create(CONFIGMAPS, body),
                writer.replace(CONFIGMAPS, body),
                writer.patch(CONFIGMAPS, "c", {}, namespace="ns"),
                writer.apply(CONFIGMAPS, body, field_manager="m"),
                writer.delete(CONFIGMAPS, "c", namespace="ns"),
            ]

        for write in writes():
            await write
        clock.time += 2.6  # 0.4 s before the deadline
        for write in writes():
            with pytest.raises(OutOfContact):
                await write
    assert len(server.received) == 5


class Transport:
    """An ``HttpClient`` stand-in: runs the ready check, lets time pass as a test says (before
    the send, or while the hook answers), then answers with ``answer(request)``."""

    def __init__(self, clock: FakeClock, answer: Callable[[dict[str, Any]], Any]) -> None:
        self.clock = clock
        self.answer = answer
        self.pause_before_send = 0.0
        self.hook_seconds = 0.0
        self.sent: list[Mapping[str, str]] = []

    def discard(self, ssl_context: object) -> None:
        pass

    async def request(
        self, method: str, url: str, *, headers: Mapping[str, str], body: bytes, **kw: Any
    ) -> HttpResponse:
        ready: Ready = kw["ready"]
        after = ready()
        self.clock.time += self.pause_before_send
        self.sent.append(headers)
        if after is not None:
            after()
        self.clock.time += self.hook_seconds
        return HttpResponse(200, {}, orjson.dumps(self.answer(orjson.loads(body))))


def fenced_hooks(clock: FakeClock, transport: Transport) -> HookClient:
    http: HttpClient = transport  # type: ignore[assignment]
    return HookClient(http, gate=Fence(standing(clock), clock=clock))


@pytest.mark.asyncio
async def test_a_hook_call_goes_out_only_before_the_safety_margin() -> None:
    clock = FakeClock()
    transport = Transport(clock, lambda _: {})
    hooks = fenced_hooks(clock, transport)
    assert await hooks.call(ENDPOINT, b"{}") == b"{}"
    clock.time += 2.6
    with pytest.raises(OutOfContact):
        await hooks.call(ENDPOINT, b"{}")
    assert len(transport.sent) == 1


@pytest.mark.asyncio
async def test_a_hook_answer_that_comes_past_the_deadline_is_discarded() -> None:
    clock = FakeClock()
    transport = Transport(clock, lambda _: {})
    hooks = fenced_hooks(clock, transport)
    transport.hook_seconds = 2.9  # sent in time; the answer comes 0.1 s before the deadline
    assert await hooks.call(ENDPOINT, b"{}") == b"{}"
    clock.time -= 2.9  # back to the start: the same call, answered just past the deadline
    transport.hook_seconds = 3.1
    with pytest.raises(OutOfContact, match="answer discarded"):
        await hooks.call(ENDPOINT, b"{}")


@pytest.mark.asyncio
async def test_a_request_sent_after_a_pause_past_the_deadline_is_reported() -> None:
    clock = FakeClock()
    transport = Transport(clock, lambda _: {})
    hooks = fenced_hooks(clock, transport)
    transport.pause_before_send = 0.4  # still before the deadline: nothing to say
    with structlog.testing.capture_logs() as logs:
        await hooks.call(ENDPOINT, b"{}", headers={"X-Metashard-Attempt": "w/a/1"})
    assert logs == []
    clock.time = 1000.0
    transport.pause_before_send = 3.5  # checked at 0, sent 0.5 s past the deadline
    with structlog.testing.capture_logs() as logs, pytest.raises(OutOfContact):
        await hooks.call(ENDPOINT, b"{}", headers={"X-Metashard-Attempt": "w/a/2"})
    (warning,) = logs
    assert warning["log_level"] == "warning" and "after the fence deadline" in warning["event"]
    assert (warning["hook"], warning["attempt"]) == ("sync", "w/a/2")
    assert warning["paused"] == 3.5 and warning["late"] == 0.5


@pytest.mark.asyncio
async def test_a_sync_whose_hook_answered_past_the_deadline_writes_nothing() -> None:
    clock = FakeClock()
    world = World()
    await world.parent("p")
    transport = Transport(clock, world.answer)
    world.hooks = fenced_hooks(clock, transport)  # type: ignore[assignment]
    world.reconciler = world.built(definition(world.cc))
    transport.hook_seconds = 3.5
    with pytest.raises(OutOfContact):
        await world.sync("p")
    assert world.writes() == []  # not even the finalizer-free parent's status
    clock.time = 1000.0
    world.hooks = fenced_hooks(clock, transport)  # type: ignore[assignment]
    world.reconciler = world.built(definition(world.cc))
    transport.hook_seconds = 0.1
    await world.sync("p")
    assert world.writes() != []
