"""proto.hooks.answers and the hook client's reuse of answers by TTL (proto.api.ttl)."""

from __future__ import annotations

import orjson
import pytest
from prometheus_client import CollectorRegistry

from proto.api.controllers import ResponseMode
from proto.api.decorator import decode_decorator_response
from proto.api.hooks import decode_sync_response
from proto.hooks.answers import AnswerCache
from proto.hooks.client import HookClient
from proto.hooks.metrics import PrometheusHookMetrics
from proto.runtime.http1 import HttpClient
from tests.unit.proto.test_hook_client import Hooks, endpoint, hooks, session

__all__ = ["hooks", "session"]  # fixtures


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_answer_is_reused_for_the_same_request_until_it_expires() -> None:
    clock = Clock()
    cache = AnswerCache(clock=clock)
    one, two = b'{"parent": 1}', b'{"parent": 2}'
    cache.put("p", one, b"answer", 30.0)
    assert cache.get("p", one) == b"answer"
    assert cache.get("p", two) is None  # another request: the hook is called
    assert cache.get("q", one) is None
    clock.now += 30.0
    assert cache.get("p", one) is None
    assert len(cache) == 0


def test_an_answer_without_ttl_forgets_the_one_kept() -> None:
    cache = AnswerCache(clock=Clock())
    cache.put("p", b"a", b"answer", 30.0)
    cache.put("p", b"b", b"other", None)
    assert cache.get("p", b"a") is None and len(cache) == 0


def test_memory_is_bounded_least_recently_used_first_and_drop_forgets_keys() -> None:
    cache = AnswerCache(max_bytes=10, clock=Clock())
    cache.put("a", b"1", b"xxxx", 60.0)
    cache.put("b", b"1", b"xxxx", 60.0)
    assert cache.get("a", b"1") == b"xxxx"  # a is now the most recent
    cache.put("c", b"1", b"xxxx", 60.0)
    assert cache.get("b", b"1") is None and cache.get("a", b"1") == b"xxxx"
    cache.put("d", b"1", b"x" * 11, 60.0)  # larger than the whole cache: not kept
    assert cache.get("d", b"1") is None
    cache.drop(lambda key: key == "a")
    assert cache.get("a", b"1") is None and cache.get("c", b"1") == b"xxxx"


@pytest.mark.parametrize(
    ("ttl", "seconds", "problem"),
    [
        (30, 30.0, None),
        (0.5, 0.5, None),
        (None, None, None),
        (0, None, None),
        ("30s", None, "ttlSeconds: must be a number of seconds, not string"),
        (True, None, "ttlSeconds: must be a number of seconds, not boolean"),
        (-1, None, "ttlSeconds: must be above 0 and at most 86400, not -1"),
        (1e9, None, "ttlSeconds: must be above 0 and at most 86400, not 1000000000.0"),
    ],
)
def test_ttl_seconds_is_read_and_a_bad_one_is_a_problem_not_a_refusal(
    ttl: object, seconds: float | None, problem: str | None
) -> None:
    body = orjson.dumps({"status": {"a": 1}, "ttlSeconds": ttl})
    for decode in (decode_sync_response, decode_decorator_response):
        answer = decode(body, mode=ResponseMode.STRICT)
        assert answer.ttl_seconds == seconds
        assert answer.status == {"a": 1}
        assert answer.reports.problems == (() if problem is None else (problem,))


def ttl_of(answer: bytes) -> float | None:
    value = orjson.loads(answer)["echo"].get("ttl")
    return float(value) if value is not None else None


@pytest.mark.asyncio
async def test_the_client_does_not_send_a_request_answered_within_its_ttl(
    hooks: Hooks, session: HttpClient
) -> None:
    registry = CollectorRegistry()
    clock = Clock()
    client = HookClient(session, metrics=PrometheusHookMetrics(registry), clock=clock)
    ok = endpoint(f"{hooks.base}/ok")
    body = b'{"ttl": 60, "parent": 1}'

    async def call(request: bytes, key: str = "p") -> bytes:
        return await client.call_decoded(
            ok, request, decode=lambda b: b, cache_key=key, ttl_of=ttl_of
        )

    first = await call(body)
    assert await call(body) == first  # reused: not sent
    assert len(hooks.requests) == 1
    await call(b'{"ttl": 60, "parent": 2}')  # the parent changed: sent
    await call(body, key="q")  # another parent: sent
    assert len(hooks.requests) == 3
    clock.now += 61
    await call(b'{"ttl": 60, "parent": 2}')  # expired: sent
    assert len(hooks.requests) == 4
    labels = {"url": ok.shown_url, "controller_name": "cc"}
    labels |= {"controller_type": "CompositeController", "hook": "sync"}
    assert registry.get_sample_value("metashard_hook_answers_reused_total", labels) == 1.0
    requests = {"code": "200", "method": "post", **labels}
    del requests["hook"]
    assert registry.get_sample_value("metacontroller_sync_requests_total", requests) == 4.0
    client.drop_cached(lambda key: key == "q")
    await call(body, key="q")
    assert len(hooks.requests) == 5
    client.forget(controller_type="CompositeController", controller_name="cc")
    assert registry.get_sample_value("metashard_hook_answers_reused_total", labels) is None
