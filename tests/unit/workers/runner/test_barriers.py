"""Read-your-writes barriers are kept until a fetch returned after them, at most a TTL."""

from __future__ import annotations

from proto.runtime.clock import FakeClock
from proto.wire import ParentKey
from workers.runner.barriers import Barriers


def key(name: str) -> ParentKey:
    return ParentKey("CompositeController", "cc", "things.example.com", "ns", name)


def test_a_taken_barrier_is_gone_and_one_put_back_stays() -> None:
    barriers = Barriers(clock=FakeClock())
    barriers.put(key("a"), {"configmaps": 41})
    assert key("a") in barriers
    taken = barriers.take(key("a"))
    assert taken == {"configmaps": 41} and key("a") not in barriers
    assert barriers.take(key("a")) == {}
    barriers.put(key("a"), taken)  # the fetch failed
    assert len(barriers) == 1


def test_barriers_expire_after_the_ttl_oldest_first() -> None:
    clock = FakeClock()
    barriers = Barriers(clock=clock, ttl=60)
    barriers.put(key("a"), {"configmaps": 1})
    barriers.put(key("b"), {"configmaps": 2})
    clock.advance(30)
    barriers.put(key("a"), {"configmaps": 3})  # a again: now the newest
    clock.advance(29.5)
    barriers.sweep()
    assert key("a") in barriers and key("b") in barriers
    clock.advance(1)
    barriers.sweep()
    assert key("b") not in barriers and key("a") in barriers
    clock.advance(30)
    barriers.put(key("c"), {"configmaps": 4})  # a put sweeps too
    assert list(map(barriers.take, (key("a"), key("c")))) == [{}, {"configmaps": 4}]


def test_many_keys_written_once_leave_only_the_last_ttls() -> None:
    clock = FakeClock()
    barriers = Barriers(clock=clock, ttl=60)
    for i in range(10_000):
        barriers.put(key(f"p-{i}"), {"configmaps": i})
        clock.advance(0.1)  # 10 writes a second
    assert len(barriers) == 600


def test_discard_forgets_the_matching_keys() -> None:
    barriers = Barriers(clock=FakeClock())
    for name in "abc":
        barriers.put(key(name), {"configmaps": 1})
    barriers.discard(lambda k: k.name != "b")
    assert len(barriers) == 1 and key("b") in barriers
