"""workers.link.deferrals: keys handed back go out as KEYS, to a coordinator that takes them."""

from __future__ import annotations

import asyncio

import pytest

from proto.wire import SLOT_COUNT, Keys, LinkClosed, Message, ParentKey, Priority, Welcome, slot_of
from workers.link.deferrals import KEYS_BATCH, RETRY, Deferrals
from workers.link.standing import Standing


def key(name: str) -> ParentKey:
    return ParentKey("CompositeController", "cc", "things.example.com", "ns", name)


class Link:
    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.full = False
        self.closed = False

    def send_now(self, msg: Message) -> bool:
        if self.closed:
            raise LinkClosed("closed")
        if self.full:
            return False
        self.sent.append(msg)
        return True


def joined(epoch: int = 5, *, defers: bool = True, low_waiting: bool = True) -> Standing:
    """A worker joined to a coordinator that takes keys back and, unless ``low_waiting`` is
    False, said with its last LOW KEYS that more wait there for this worker."""
    standing = Standing()
    slots = tuple(range(SLOT_COUNT))
    standing.join(Welcome(epoch, "c", "i", (), SLOT_COUNT, slots, 1.0, 3.0, defers=defers))
    standing.low_waiting = low_waiting
    return standing


@pytest.mark.asyncio
async def test_keys_of_one_turn_go_out_once_each_in_batches() -> None:
    link = Link()
    deferrals = Deferrals(link, joined())
    names = [f"p{i}" for i in range(KEYS_BATCH + 1)]
    for name in names + names[:3]:
        assert deferrals.later(key(name))
    assert link.sent == []  # at the end of the turn
    await asyncio.sleep(0)
    assert link.sent == [
        Keys(5, Priority.LOW, tuple(key(n) for n in names[:KEYS_BATCH])),
        Keys(5, Priority.LOW, (key(names[-1]),)),
    ]


@pytest.mark.asyncio
async def test_nothing_is_handed_back_while_no_low_key_waits_at_the_coordinator() -> None:
    link = Link()
    assert not Deferrals(link, joined(low_waiting=False)).later(key("a"))
    standing = joined()
    deferrals = Deferrals(link, standing)
    slots = tuple(range(SLOT_COUNT))
    standing.join(Welcome(6, "c", "i", (), SLOT_COUNT, slots, 1.0, 3.0, defers=True))
    assert not standing.low_waiting  # a new term: nothing heard of its LOW keys yet
    assert not deferrals.later(key("a"))
    await asyncio.sleep(0)
    assert link.sent == []


@pytest.mark.asyncio
async def test_nothing_is_handed_back_to_a_coordinator_that_does_not_take_keys() -> None:
    link = Link()
    assert not Deferrals(link, joined(defers=False)).later(key("a"))
    assert not Deferrals(link, Standing()).later(key("a"))  # not joined
    standing = joined()
    standing.revoke([slot_of(key("a"))])
    assert not Deferrals(link, standing).later(key("a"))  # not ours
    await asyncio.sleep(0)
    assert link.sent == []


@pytest.mark.asyncio
async def test_a_full_link_is_tried_again_and_an_ended_epoch_drops_the_keys() -> None:
    link = Link()
    standing = joined()
    deferrals = Deferrals(link, standing)
    link.full = True
    deferrals.later(key("a"))
    await asyncio.sleep(0)
    assert link.sent == []
    link.full = False
    await asyncio.sleep(2 * RETRY)
    assert link.sent == [Keys(5, Priority.LOW, (key("a"),))]
    link.full = True
    deferrals.later(key("b"))
    await asyncio.sleep(0)
    standing.join(Welcome(6, "c", "i", (), SLOT_COUNT, (), 1.0, 3.0))  # a new term
    link.full = False
    await asyncio.sleep(2 * RETRY)
    assert len(link.sent) == 1  # b was of epoch 5: the new term queues every key anyway


@pytest.mark.asyncio
async def test_keys_are_dropped_once_the_link_closed() -> None:
    link = Link()
    deferrals = Deferrals(link, joined())
    link.closed = True
    deferrals.later(key("a"))
    await asyncio.sleep(0)  # no error escapes the event loop's callback
    link.closed = False
    await asyncio.sleep(2 * RETRY)
    assert link.sent == []
