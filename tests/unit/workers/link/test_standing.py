"""workers.link.standing: the worker's epoch, slots and contact, on a fake clock."""

from __future__ import annotations

from proto.runtime.clock import FakeClock
from proto.wire import SLOT_COUNT, ParentKey, Welcome, slot_of
from workers.link.standing import Standing

KEY = ParentKey("CompositeController", "cc", "things.example.com", "ns", "p1")
INTERVAL, TIMEOUT = 1.0, 5.0  # fence timeout: 5 - 2 * 1 = 3 s; stall limit 3 + 1 = 4 s


def joined(clock: FakeClock, slots: tuple[int, ...] = (slot_of(KEY),)) -> Standing:
    standing = Standing(clock=clock)
    standing.join(Welcome(7, "c", "inc", (), SLOT_COUNT, slots, INTERVAL, TIMEOUT))
    return standing


def test_a_worker_owns_the_keys_of_its_slots_while_joined_and_not_leaving() -> None:
    clock = FakeClock()
    standing = Standing(clock=clock)
    assert not standing.owns(KEY) and not standing.joined.is_set()
    standing = joined(clock)
    assert standing.owns(KEY) and standing.joined.is_set() and standing.epoch == 7
    standing.revoke((slot_of(KEY),))
    assert not standing.owns(KEY)
    standing.assign((slot_of(KEY),))
    assert standing.owns(KEY)
    standing.leaving = True
    assert not standing.owns(KEY) and standing.in_contact()  # a leave finishes what runs
    standing.leaving = False
    standing.drop()
    assert not standing.owns(KEY) and not standing.joined.is_set() and standing.epoch == 7


def test_contact_ends_after_the_fence_timeout_of_silence() -> None:
    clock = FakeClock()
    standing = joined(clock)
    assert standing.fence_timeout == TIMEOUT - 2 * INTERVAL
    clock.advance(3.0)
    standing.last_tick = clock.now()  # the heartbeat loop keeps running
    assert standing.in_contact()
    clock.advance(0.5)
    standing.last_tick = clock.now()
    assert not standing.in_contact()
    standing.heard()
    assert standing.in_contact()


def test_a_stalled_heartbeat_loop_ends_contact_even_with_fresh_messages() -> None:
    clock = FakeClock()
    standing = joined(clock)
    assert standing.stall_limit == 4.0
    clock.advance(4.5)
    standing.heard()  # read after the stall: sent before it
    assert not standing.in_contact()


def test_the_fence_timeout_is_at_least_one_heartbeat_interval() -> None:
    standing = Standing(clock=FakeClock())
    standing.join(Welcome(1, "c", "inc", (), SLOT_COUNT, (), 2.0, 3.0))
    assert standing.fence_timeout == 2.0
