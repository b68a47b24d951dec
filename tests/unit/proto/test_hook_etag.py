"""The ETag cache: expiry with either number alone, sweeps, the byte bound, drops."""

from __future__ import annotations

import pytest

from proto.api.endpoints import ETag
from proto.hooks.etag import DEFAULT_TTL_SECONDS, ETagCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("config", "ttl"),
    [
        (ETag(True), DEFAULT_TTL_SECONDS),
        (ETag(True, cache_timeout_seconds=30), 30.0),
        (ETag(True, cache_cleanup_seconds=5), DEFAULT_TTL_SECONDS),  # a nil dereference upstream
        (ETag(True, cache_timeout_seconds=30, cache_cleanup_seconds=5), 30.0),
    ],
)
def test_entries_expire_whichever_numbers_are_set(config: ETag, ttl: float) -> None:
    clock = Clock()
    cache = ETagCache(config, clock=clock)
    cache.put("a", '"1"', b"body")
    clock.now += ttl - 0.5
    entry = cache.get("a")
    assert entry is not None and entry.body == b"body" and entry.etag == '"1"'
    clock.now += 1
    assert cache.get("a") is None and len(cache) == 0


def test_expired_entries_are_swept_on_the_cleanup_interval() -> None:
    clock = Clock()
    cache = ETagCache(
        ETag(True, cache_timeout_seconds=10, cache_cleanup_seconds=60), max_bytes=31, clock=clock
    )
    for key in "abc":
        cache.put(key, "e", b"x" * 10)
    clock.now += 20
    cache.put("d", "e", b"y")
    assert len(cache) == 4  # not yet time to sweep
    clock.now += 41
    cache.put("e", "e", b"z")
    assert len(cache) == 1  # a, b, c and d expired and swept
    cache.put("f", "e", b"f" * 30)  # their bytes were given back: e and f fit in 31
    assert cache.get("e") is not None and cache.get("f") is not None


def test_the_byte_bound_evicts_the_least_recently_used() -> None:
    cache = ETagCache(ETag(True), max_bytes=100, clock=Clock())
    cache.put("a", "e", b"a" * 40)
    cache.put("b", "e", b"b" * 40)
    assert cache.get("a") is not None  # a is now more recent than b
    cache.put("c", "e", b"c" * 40)
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    cache.put("huge", "e", b"h" * 101)
    assert cache.get("huge") is None
    cache.put("d", "e", b"d" * 20)  # a and c (80 bytes) stay: the refused body took no room
    assert cache.get("a") is not None and cache.get("c") is not None


def test_drop_removes_matching_keys() -> None:
    cache = ETagCache(ETag(True), max_bytes=3, clock=Clock())
    for key in ("ns1/a", "ns1/b", "ns2/a"):
        cache.put(key, "e", b"x")
    cache.drop(lambda key: str(key).startswith("ns1/"))
    assert len(cache) == 1 and cache.get("ns2/a") is not None
    cache.put("ns3/a", "e", b"yy")  # the dropped bytes were given back: 1 + 2 fit in 3
    assert cache.get("ns2/a") is not None
