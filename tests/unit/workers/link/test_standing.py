"""workers.link.standing: the worker's epoch, slots, claims and fence deadline, on a fake clock."""

from __future__ import annotations

from proto.runtime.clock import FakeClock
from proto.wire import SLOT_COUNT, ParentKey, Welcome, slot_of
from workers.link.standing import Standing
from workers.reconcile import Claim

KEY = ParentKey("CompositeController", "cc", "things.example.com", "ns", "p1")
INTERVAL, TIMEOUT = 1.0, 5.0  # fence timeout: 5 - 2 * 1 = 3 s; safety margin 0.5 s


def joined(clock: FakeClock, slots: tuple[int, ...] = (slot_of(KEY),)) -> Standing:
    standing = Standing(clock=clock)
    standing.join(Welcome(7, "c", "inc", (), SLOT_COUNT, slots, INTERVAL, TIMEOUT, generation=4))
    return standing


def test_a_worker_claims_the_keys_of_its_slots_while_joined_and_not_leaving() -> None:
    clock = FakeClock()
    standing = Standing(clock=clock)
    assert standing.claim(KEY) is None and not standing.joined.is_set()
    standing = joined(clock)
    assert standing.claim(KEY) == Claim(7, 4) and standing.owns(KEY)
    assert standing.joined.is_set() and standing.epoch == 7
    standing.revoke((slot_of(KEY),))
    assert standing.claim(KEY) is None and not standing.owns(KEY)
    standing.assign((slot_of(KEY),), generation=11)
    assert standing.claim(KEY) == Claim(7, 11)
    standing.leaving = True
    assert standing.claim(KEY) is None and standing.in_contact()  # a leave finishes what runs
    standing.leaving = False
    standing.drop()
    assert standing.claim(KEY) is None and not standing.joined.is_set() and standing.epoch == 7


def test_the_deadline_is_the_fence_timeout_after_the_earlier_of_heard_and_sent() -> None:
    clock = FakeClock()
    standing = joined(clock)
    assert standing.fence_timeout == TIMEOUT - 2 * INTERVAL
    assert standing.deadline() == 3.0
    clock.advance(2.0)
    standing.sent(clock.now())  # the heartbeat loop keeps sending...
    assert standing.deadline() == 3.0  # ... but nothing was heard since 0
    standing.heard()
    assert standing.deadline() == 5.0
    clock.advance(1.0)
    standing.heard()  # heard, but the last heartbeat left at 2.0
    assert standing.deadline() == 5.0


def test_nothing_starts_within_the_safety_margin_of_the_deadline_nor_acts_past_it() -> None:
    clock = FakeClock()
    standing = joined(clock)  # deadline 3.0, margin 0.5
    assert standing.safety_margin == INTERVAL / 2
    clock.advance(2.5)
    assert standing.may_start() and standing.in_contact()
    clock.advance(0.01)
    assert not standing.may_start() and standing.in_contact()
    clock.advance(0.5)
    assert not standing.may_start() and not standing.in_contact()
    standing.drop()
    standing.heard()
    standing.sent(clock.now())
    assert not standing.may_start() and not standing.in_contact()  # not joined


def test_a_stalled_heartbeat_loop_ends_contact_even_with_fresh_messages() -> None:
    clock = FakeClock()
    standing = joined(clock)
    clock.advance(3.5)
    standing.heard()  # read after the stall: sent before it
    assert not standing.in_contact() and not standing.may_start()


def test_the_fence_timeout_is_at_least_two_heartbeat_intervals_unless_overridden() -> None:
    standing = Standing(clock=FakeClock())
    standing.join(Welcome(1, "c", "inc", (), SLOT_COUNT, (), 2.0, 6.0))
    assert standing.fence_timeout == 4.0
    broken = Standing(clock=FakeClock(), fence_timeout=30.0)
    broken.join(Welcome(1, "c", "inc", (), SLOT_COUNT, (), 2.0, 6.0))
    assert broken.fence_timeout == 30.0
