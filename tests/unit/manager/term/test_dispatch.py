"""manager.term.dispatch: KEYS batched per loop turn; LOW KEYS wait until nothing else does."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from manager.routing.router import KeyIndex
from manager.term.dispatch import KEYS_BATCH, LOW_WINDOW, Dispatch, Target
from manager.term.metrics import TermMetrics
from proto.wire import (
    SLOT_COUNT,
    Assign,
    Keys,
    Message,
    ParentKey,
    Priority,
    Revoke,
    Snapshot,
    slot_of,
)

EPOCH = 3


class Owners:
    """Every slot is owned by ``w``, except those in transit (and those ``owned`` says)."""

    def __init__(self) -> None:
        self.moving: set[int] = set()
        self.owned: dict[int, str] = {}
        self.members = {"w"}

    def owner(self, slot: int) -> str | None:
        return self.owned.get(slot, "w")

    def dispatch_target(self, slot: int) -> str | None:
        return None if slot in self.moving else self.owner(slot)

    def route(self, worker_id: str) -> bytes | None:
        return worker_id.encode() if worker_id in self.members else None


def key(name: str) -> ParentKey:
    return ParentKey("CompositeController", "cc", "things.example.com", "ns", name)


def dispatch(
    owners: Owners | None = None,
    keys: KeyIndex | None = None,
    metrics: TermMetrics | None = None,
) -> Dispatch:
    owners = owners or Owners()
    return Dispatch(
        epoch=EPOCH,
        owners=owners,
        members=owners,
        slots=keys or KeyIndex(),
        metrics=metrics or TermMetrics(None),
    )


async def queued(d: Dispatch) -> list[tuple[Target, Message]]:
    """Everything queued, in the order ``next()`` hands it out (after this loop turn)."""
    await asyncio.sleep(0)
    out = []
    while True:
        try:
            out.append(await asyncio.wait_for(d.next(), 0.01))
        except TimeoutError:
            return out


def snapshot(request_id: int) -> Snapshot:
    return Snapshot(EPOCH, request_id, key("p"), b"{}", {}, (), {})


@pytest.mark.asyncio
async def test_keys_go_out_in_batches_each_once_and_a_live_push_takes_a_waiting_low_key() -> None:
    d = dispatch()
    names = [f"p{i}" for i in range(KEYS_BATCH + 2)]
    for name in names + names:
        d.push(key(name), Priority.LOW)
        if name == "p1":
            d.push(key(name), Priority.LIVE)
    sent = await queued(d)
    assert [(m.priority, len(m.keys)) for _, m in sent if isinstance(m, Keys)] == [
        (Priority.LIVE, 1),
        (Priority.LOW, KEYS_BATCH),
        (Priority.LOW, 1),
    ]
    low = [k for _, m in sent if isinstance(m, Keys) and m.priority is Priority.LOW for k in m.keys]
    assert low == [key(name) for name in names if name != "p1"]


@pytest.mark.asyncio
async def test_each_low_keys_says_whether_more_low_keys_wait_for_that_worker() -> None:
    owners = Owners()
    other = ParentKey("DecoratorController", "dc", "things.example.com", "ns", "o")
    owners.owned[slot_of(key("v"))] = "v"
    owners.members.add("v")
    d = dispatch(owners)
    names = (f"p{i}" for i in itertools.count())
    mine = (n for n in names if slot_of(key(n)) != slot_of(key("v")))
    for name in itertools.islice(mine, KEYS_BATCH + 1):
        d.push(key(name), Priority.LOW)
    d.push(other, Priority.LOW)
    d.push(key("v"), Priority.LOW)  # another worker's: says nothing of w's
    d.push(key("fresh"), Priority.LIVE)
    sent = await queued(d)
    flags = [(t, m.priority, len(m.keys), m.more) for t, m in sent if isinstance(m, Keys)]
    assert flags == [
        ("w", Priority.LIVE, 1, False),
        ("w", Priority.LOW, KEYS_BATCH, True),  # cc's next batch and dc's key wait
        ("v", Priority.LOW, 1, False),
        ("w", Priority.LOW, 1, True),  # dc's turn: cc's last key still waits
        ("w", Priority.LOW, 1, False),  # the last one
    ]
    low = [
        k
        for t, m in sent
        if t == "w" and isinstance(m, Keys) and m.priority is Priority.LOW
        for k in m.keys
    ]
    assert low[KEYS_BATCH] == other


@pytest.mark.asyncio
async def test_keys_are_counted_as_they_go_into_keys_messages() -> None:
    registry = CollectorRegistry()
    keys = KeyIndex()
    keys.add(key("behind"), behind=True)
    d = dispatch(keys=keys, metrics=TermMetrics(registry))
    for name in ("a", "b", "a"):
        d.push(key(name), Priority.LIVE)
        d.push(key(name), Priority.LOW)
    d.push(key("c"), Priority.LOW)
    d.emit([("w", Assign(EPOCH, (slot_of(key("behind")),), ()))])
    await queued(d)

    def counted(priority: str) -> float | None:
        name = "metashard_coordinator_keys_pushed_total"
        return registry.get_sample_value(name, {"priority": priority})

    assert (counted("live"), counted("low")) == (2.0, 2.0)  # a, b; c and the assigned slot's


@pytest.mark.asyncio
async def test_a_waiting_low_key_of_a_slot_that_moved_is_dropped() -> None:
    owners = Owners()
    d = dispatch(owners)
    d.reported("w", LOW_WINDOW)  # the LOW keys wait
    d.push(key("stays"), Priority.LOW)
    d.push(key("moves"), Priority.LOW)
    owners.moving.add(slot_of(key("moves")))
    d.reported("w", 0)
    assert [m.keys for _, m in await queued(d) if isinstance(m, Keys)] == [(key("stays"),)]


@pytest.mark.asyncio
async def test_every_key_of_an_assigned_slot_waits_as_low_those_behind_first() -> None:
    keys = KeyIndex()
    names = [f"p{i}" for i in range(3 * KEYS_BATCH)]
    for i, name in enumerate(names):
        keys.add(key(name), behind=i % 2 == 0)
    slots = sorted({slot_of(key(name)) for name in names})
    mine, others = slots[: len(slots) // 2], slots[len(slots) // 2 :]
    d = dispatch(keys=keys)
    d.push(key("waiting"), Priority.LOW)  # already waiting: the behind keys go before it
    d.emit([("w", Assign(EPOCH, tuple(mine), ()))])
    d.push(key("fresh"), Priority.LIVE)
    sent = [m for _, m in await queued(d)]
    assert isinstance(sent[0], Assign)
    assert sent[1] == Keys(EPOCH, Priority.LIVE, (key("fresh"),))  # fresh work first
    low = [m for m in sent[2:] if isinstance(m, Keys)]
    assert len(low) == len(sent) - 2 and all(m.priority is Priority.LOW for m in low)
    assert all(len(m.keys) <= KEYS_BATCH for m in low)
    order = [k for m in low for k in m.keys]
    behind = sorted(
        key(name) for i, name in enumerate(names) if i % 2 == 0 and slot_of(key(name)) in mine
    )
    assert order[: len(behind)] == behind
    assert order[len(behind)] == key("waiting")
    assert set(order[len(behind) + 1 :]) == set(keys.keys_of(mine)) - set(behind)
    assert not set(order) & set(keys.keys_of(others))


@pytest.mark.asyncio
async def test_an_assigned_slot_goes_out_against_the_window() -> None:
    keys = KeyIndex()
    for i in range(3 * LOW_WINDOW):
        keys.add(key(f"p{i}"), behind=True)
    d = dispatch(keys=keys)
    d.emit([("w", Assign(EPOCH, tuple(range(SLOT_COUNT)), ()))])
    sent = [m for _, m in await queued(d) if isinstance(m, Keys)]
    assert sum(len(m.keys) for m in sent) == LOW_WINDOW  # the rest waits for FETCHes
    d.reported("w", 0)
    more = [m for _, m in await queued(d) if isinstance(m, Keys)]
    assert sum(len(m.keys) for m in more) == LOW_WINDOW


@pytest.mark.asyncio
async def test_keys_a_worker_defers_wait_behind_every_low_key_already_waiting() -> None:
    keys = KeyIndex()
    names = [f"p{i}" for i in range(2 * LOW_WINDOW)]
    for name in names:
        keys.add(key(name), behind=True)
    d = dispatch(keys=keys)
    d.emit([("w", Assign(EPOCH, tuple(range(SLOT_COUNT)), ()))])
    first = [k for _, m in await queued(d) if isinstance(m, Keys) for k in m.keys]
    assert len(first) == LOW_WINDOW
    # the echoes of the first reconciles come back over the wire (equal keys, new objects),
    # with a key the index does not hold
    echoes = [ParentKey(*k) for k in first[:3]]
    d.deferred([*echoes, key("unknown")])
    rest = []
    for _ in range(2):
        d.reported("w", 0)
        rest += [k for _, m in await queued(d) if isinstance(m, Keys) for k in m.keys]
    assert rest[:LOW_WINDOW] == sorted(set(keys.keys_of(range(SLOT_COUNT))) - set(first))
    assert rest[LOW_WINDOW:] == echoes  # after the parents not yet reconciled
    assert all(k is keys.held(k) for k in rest)  # the index's copies: no memory per echo


@pytest.mark.asyncio
async def test_a_key_of_a_slot_in_transit_is_dropped() -> None:
    owners = Owners()
    d = dispatch(owners)
    owners.moving.add(slot_of(key("moving")))
    d.push(key("moving"), Priority.LIVE)
    assert await queued(d) == []


@pytest.mark.asyncio
async def test_a_live_key_pushed_after_100000_low_keys_is_sent_first() -> None:
    d = dispatch()
    for i in range(100_000):
        d.push(key(f"low-{i}"), Priority.LOW)
    await asyncio.sleep(0)  # a turn later: the LOW keys are queued KEYS messages
    d.push(key("live"), Priority.LIVE)
    await asyncio.sleep(0)
    target, first = await d.next()
    assert target == "w" and isinstance(first, Keys)
    assert first.priority is Priority.LIVE and first.keys == (key("live"),)
    rest: list[tuple[Target, Message]] = []
    while batch := await queued(d):  # the worker reports an empty queue: more may go
        rest.extend(batch)
        d.reported("w", 0)
    assert sum(len(m.keys) for _, m in rest if isinstance(m, Keys)) == 100_000
    assert all(isinstance(m, Keys) and m.priority is Priority.LOW for _, m in rest)


@pytest.mark.asyncio
async def test_only_low_keys_wait_everything_else_keeps_its_order() -> None:
    d = dispatch()
    d.emit([("w", Assign(EPOCH, (1,), ()))])
    d.push(key("low"), Priority.LOW)
    await asyncio.sleep(0)
    d.send("w", snapshot(1))
    d.push(key("live"), Priority.LIVE)
    await asyncio.sleep(0)
    d.emit([("w", Revoke(EPOCH, (2,)))])
    kinds = [
        (type(m).__name__, m.priority.name if isinstance(m, Keys) else "")
        for _, m in await queued(d)
    ]
    assert kinds == [
        ("Assign", ""),
        ("Snapshot", ""),
        ("Keys", "LIVE"),
        ("Revoke", ""),
        ("Keys", "LOW"),
    ]


# What may happen: a control message queued (a snapshot), a key pushed LIVE or LOW, the end
# of the loop turn (LIVE keys are flushed), the send loop taking one message.
STEPS = st.lists(
    st.sampled_from(["send", "live", "low", "turn", "take"]),
    max_size=50,
)


@settings(max_examples=200, deadline=None)
@given(STEPS)
def test_low_keys_only_ever_go_out_later_never_before_what_was_queued_first(
    steps: list[str],
) -> None:
    async def run() -> None:
        d = dispatch()
        model: list[tuple[str, object]] = []  # what is queued, in order; LIVE keys per turn
        live: list[tuple[str, object]] = []  # pushed LIVE this turn
        sent: list[tuple[str, object]] = []
        names = itertools.count()

        def took(msg: Message) -> None:
            if isinstance(msg, Keys):
                sent.extend((msg.priority.name, k) for k in msg.keys)
            else:
                assert isinstance(msg, Snapshot)
                sent.append(("send", msg.request_id))

        async def turn() -> None:
            await asyncio.sleep(0)
            model.extend(live)
            live.clear()

        for step in steps:
            if step == "send":
                request_id = next(names)
                d.send("w", snapshot(request_id))
                model.append(("send", request_id))
            elif step == "live":
                k = key(f"k{next(names)}")
                d.push(k, Priority.LIVE)
                live.append(("LIVE", k))
            elif step == "low":
                k = key(f"k{next(names)}")
                d.push(k, Priority.LOW)
                model.append(("LOW", k))
            elif step == "turn":
                await turn()
            elif len(sent) < len(model) + len(live):  # something is queued: next() won't wait
                await turn()  # the send loop runs in turns of its own
                took((await d.next())[1])
        await turn()
        for _, msg in await queued(d):
            took(msg)

        assert sorted(map(repr, sent)) == sorted(map(repr, model))  # each once, nothing lost
        low = [item for item in model if item[0] == "LOW"]
        assert [item for item in sent if item[0] == "LOW"] == low
        assert [item for item in sent if item[0] != "LOW"] == [i for i in model if i not in low]
        for item in low:  # nothing queued before it goes out after it
            before = model[: model.index(item)]
            assert all(sent.index(i) < sent.index(item) for i in before)

    asyncio.run(run())


async def low_sent(d: Dispatch) -> list[str]:
    """The workers of the LOW KEYS ``next()`` hands out now, in order."""
    return [str(t) for t, m in await queued(d) if isinstance(m, Keys)]


def keys_of(worker: str, owners: Owners, count: int) -> list[ParentKey]:
    """``count`` keys of slots that ``owners`` gives to ``worker`` (and to no other)."""
    keys: list[ParentKey] = []
    names = (key(f"{worker}-{i}") for i in itertools.count())
    while len(keys) < count:
        k = next(names)
        if owners.owned.setdefault(slot_of(k), worker) == worker:
            keys.append(k)
    return keys


@pytest.mark.asyncio
async def test_low_keys_go_to_a_worker_only_while_its_backlog_is_under_the_window() -> None:
    owners = Owners()
    d = dispatch(owners)
    for k in keys_of("w", owners, LOW_WINDOW + 2 * KEYS_BATCH):
        d.push(k, Priority.LOW)
    assert len(await low_sent(d)) == LOW_WINDOW // KEYS_BATCH  # then the window is full
    d.fetched("w")  # one key taken: the backlog is one key under the window
    assert len(await low_sent(d)) == 1
    assert await low_sent(d) == []
    d.reported("w", LOW_WINDOW)  # a heartbeat: that many still queued
    assert await low_sent(d) == []
    d.reported("w", 0)
    assert len(await low_sent(d)) == 1
    d.push(key("live"), Priority.LIVE)  # LIVE keys know no window
    assert [type(m) for _, m in await queued(d)] == [Keys]


@pytest.mark.asyncio
async def test_workers_take_turns_and_a_full_one_does_not_hold_up_the_others() -> None:
    owners = Owners()
    owners.members |= {"a", "b"}
    d = dispatch(owners)
    d.reported("a", LOW_WINDOW)
    for k in keys_of("a", owners, 3 * KEYS_BATCH) + keys_of("b", owners, 3 * KEYS_BATCH):
        d.push(k, Priority.LOW)
    assert await low_sent(d) == ["b", "b", "b"]
    d.reported("a", 0)
    for k in keys_of("b", owners, 2 * KEYS_BATCH):
        d.push(k, Priority.LOW)
    assert await low_sent(d) == ["a", "b", "a", "b", "a"]


@pytest.mark.asyncio
async def test_the_low_keys_of_a_worker_that_left_are_dropped() -> None:
    owners = Owners()
    owners.members.add("gone")
    d = dispatch(owners)
    d.reported("gone", LOW_WINDOW)
    for k in keys_of("gone", owners, 10):
        d.push(k, Priority.LOW)
    assert await low_sent(d) == []
    owners.members.discard("gone")
    d.push(key("w-live"), Priority.LIVE)  # anything that wakes the dispatch
    await queued(d)
    owners.members.add("gone")  # joins again, with another queue: the old keys are gone
    d.reported("gone", 0)
    assert await low_sent(d) == []


@pytest.mark.asyncio
async def test_controllers_take_turns_with_their_low_keys() -> None:
    d = dispatch()
    flood = [key(f"a{i}") for i in range(3 * KEYS_BATCH)]
    other = [k._replace(controller="other") for k in (key("b0"), key("b1"))]
    for k in flood + other:
        d.push(k, Priority.LOW)
    d.push(other[1], Priority.LIVE)  # goes LIVE: no longer waits
    sent = [m for _, m in await queued(d) if isinstance(m, Keys)]
    assert [(m.priority, m.keys[0].controller, len(m.keys)) for m in sent] == [
        (Priority.LIVE, "other", 1),
        (Priority.LOW, "cc", KEYS_BATCH),
        (Priority.LOW, "other", 1),  # after one batch of the flood, not after all of it
        (Priority.LOW, "cc", KEYS_BATCH),
        (Priority.LOW, "cc", KEYS_BATCH),
    ]
    assert [k for m in sent[1:] for k in m.keys if k.controller == "cc"] == flood
