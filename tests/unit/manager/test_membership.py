from __future__ import annotations

from collections.abc import Iterable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from manager.membership import Membership, Outbox, Timing
from proto.wire import Assign, ParentKey, Revoke, Welcome

SLOTS = 64
TIMING = Timing(heartbeat_interval=1.0, worker_timeout=5.0)
FENCE = TIMING.worker_timeout - 2 * TIMING.heartbeat_interval


def keys_of(slots: Iterable[int]) -> tuple[ParentKey, ...]:
    return tuple(ParentKey("CompositeController", "cc", "things", "ns", f"p{s}") for s in slots)


def table(start_at: float = 0.0) -> Membership:
    return Membership(
        epoch=3,
        coordinator_id="c",
        keys_of=keys_of,
        controllers=tuple,
        start_at=start_at,
        timing=TIMING,
        slot_count=SLOTS,
    )


def granted(out: Outbox) -> dict[str, set[int]]:
    result: dict[str, set[int]] = {}
    for worker, msg in out:
        if isinstance(msg, Assign):
            result.setdefault(worker, set()).update(msg.slots)
    return result


def revoked(out: Outbox) -> dict[str, set[int]]:
    result: dict[str, set[int]] = {}
    for worker, msg in out:
        if isinstance(msg, Revoke):
            result.setdefault(worker, set()).update(msg.slots)
    return result


def test_hello_is_welcomed_and_nothing_is_assigned_before_start() -> None:
    m = table(start_at=10.0)
    hello = m.hello("w1", "i1", 4, now=0.0)
    assert hello is not None
    ((to, welcome),) = hello
    assert to == "w1" and isinstance(welcome, Welcome)
    assert welcome.epoch == 3 and welcome.incarnation == "i1" and welcome.slots == ()
    assert welcome.heartbeat_timeout == 5.0
    m.seen("w1", 5.0)
    m.seen("w1", 9.0)
    assert m.tick(9.0) == []
    out = m.tick(10.0)
    assert granted(out) == {"w1": set(range(SLOTS))}
    (assign,) = (msg for _, msg in out)
    assert isinstance(assign, Assign) and assign.keys == keys_of(assign.slots)
    assert m.settled


def test_a_new_worker_takes_slots_only_after_release() -> None:
    m = table()
    m.hello("w1", "i1", 4, now=0.0)
    m.tick(0.0)
    m.hello("w2", "i2", 4, now=1.0)
    out = m.tick(1.0)
    moving = revoked(out)["w1"]
    assert 0 < len(moving) < SLOTS and "w2" not in granted(out)
    for slot in moving:
        assert m.owner(slot) == "w1" and m.dispatch_target(slot) is None
    out = m.released("w1", moving, now=1.5)
    assert granted(out) == {"w2": moving}
    assert m.settled and all(m.owner(s) == "w2" for s in moving)


def test_bye_frees_slots_at_once_and_silence_after_the_timeout() -> None:
    m = table()
    m.hello("w1", "i1", 4, now=0.0)
    m.hello("w2", "i2", 4, now=0.0)
    m.tick(0.0)
    w1_slots = set(m.slots_of("w1"))
    assert granted(m.leave("w1", now=1.0)) == {"w2": w1_slots}
    m.hello("w3", "i3", 4, now=2.0)
    m.tick(2.0)
    m.released("w2", revoked(m.tick(2.0)).get("w2", set()), now=2.0)
    m.seen("w3", 4.0)
    out = m.tick(7.5)  # w2 silent since 2.0, w3 since 4.0
    assert not m.knows("w2") and m.knows("w3")
    assert set(granted(out)) <= {"w3"}


def test_a_restarted_worker_waits_for_its_previous_process_to_have_fenced() -> None:
    m = table()
    m.hello("w1", "old", 4, now=0.0)
    m.tick(0.0)
    m.seen("w1", 2.0)
    hello = m.hello("w1", "new", 4, now=3.0)
    assert hello is not None
    welcome = hello[0][1]
    assert isinstance(welcome, Welcome) and welcome.slots == ()
    assert m.tick(3.0) == []
    assert m.tick(6.9) == []
    assert granted(m.tick(7.0)) == {"w1": set(range(SLOTS))}


def test_undeliverable_control_messages_drop_the_worker() -> None:
    m = table()
    m.hello("w1", "i1", 4, now=0.0)
    m.hello("w2", "i2", 4, now=0.0)
    m.tick(0.0)
    lost = set(m.slots_of("w1"))
    assert m.lost("w1", now=1.0) == []  # its process may still run: wait for its fence
    m.seen("w2", 5.0)
    assert m.tick(4.9) == []
    assert granted(m.tick(6.0)) == {"w2": lost}


def test_a_worker_that_fenced_rejoins_and_gets_every_key_of_its_slots_again() -> None:
    m = table()
    m.hello("w1", "i1", 4, now=0.0, route=b"r1")
    m.tick(0.0)
    # The same process on a new connection: it fenced and dropped its queues.
    out = m.hello("w1", "i1", 4, now=1.0, route=b"r2")
    assert out is not None
    (_, welcome), (_, assign) = out
    assert isinstance(welcome, Welcome) and welcome.slots == ()
    assert isinstance(assign, Assign) and set(assign.slots) == set(range(SLOTS))
    assert assign.keys == keys_of(assign.slots)
    assert m.route("w1") == b"r2" and m.member_at(b"r2") == "w1" and m.member_at(b"r1") is None
    # A repeated HELLO on the same connection is only welcomed again.
    again = m.hello("w1", "i1", 4, now=1.1, route=b"r2")
    assert again is not None and [type(msg) for _, msg in again] == [Welcome]


def test_slots_being_revoked_are_not_handed_back_on_rejoin() -> None:
    m = table()
    m.hello("w1", "i1", 4, now=0.0, route=b"r1")
    m.tick(0.0)
    m.hello("w2", "i2", 4, now=0.5, route=b"r2")
    moving = revoked(m.tick(0.5))["w1"]
    out = m.hello("w1", "i1", 4, now=1.0, route=b"r3")
    assert out is not None
    assert granted(out)["w1"] == set(range(SLOTS)) - moving


def test_a_replaced_process_is_refused_while_its_replacement_is_a_member() -> None:
    m = table()
    m.hello("w1", "old", 4, now=0.0, route=b"r1")
    m.tick(0.0)
    assert m.hello("w1", "new", 4, now=1.0, route=b"r2") is not None
    assert m.hello("w1", "old", 4, now=1.5, route=b"r3") is None
    assert m.route("w1") == b"r2"
    m.leave("w1", now=2.0)
    assert m.hello("w1", "old", 4, now=2.5, route=b"r3") is not None


def test_timing_must_leave_room_for_fencing() -> None:
    try:
        Timing(heartbeat_interval=2.0, worker_timeout=5.0)
    except ValueError:
        return
    raise AssertionError("a timeout under 3 heartbeat intervals must be refused")


WORKERS = st.sampled_from(["w1", "w2", "w3", "w4"])


class Process:
    """One worker process as the coordinator's messages leave it: the slots it may run."""

    def __init__(self, wid: str, incarnation: int, now: float) -> None:
        self.wid = wid
        self.incarnation = incarnation
        self.owned: set[int] = set()
        self.revoked: set[int] = set()  # REVOKEd, finishing reconciles, RELEASED not yet sent
        self.last_contact = now
        self.route = f"r{incarnation}".encode()
        self.connections = 0
        self.silent = False  # partitioned: its heartbeats no longer arrive
        self.stopped = False  # fenced or exited: runs nothing

    def may_run(self) -> set[int]:
        return set() if self.stopped else self.owned | self.revoked


class ExclusivityMachine(RuleBasedStateMachine):
    """No slot may ever be runnable by two processes at once, whatever happens."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.m = table(start_at=2.0)
        self.processes: list[Process] = []
        self.current: dict[str, Process] = {}
        self.incarnations = 0

    def deliver(self, out: Outbox) -> None:
        for wid, msg in out:
            proc = self.current.get(wid)
            if proc is None or proc.stopped or proc.silent:
                continue
            proc.last_contact = self.now
            if isinstance(msg, Assign):
                proc.owned |= set(msg.slots)
            elif isinstance(msg, Revoke):
                proc.owned -= set(msg.slots)
                proc.revoked |= set(msg.slots)

    @rule(wid=WORKERS)
    def start(self, wid: str) -> None:
        old = self.current.get(wid)
        if old is not None and not old.stopped:
            old.silent = True  # its connection was taken over; it no longer hears anything
        self.incarnations += 1
        proc = Process(wid, self.incarnations, self.now)
        self.processes.append(proc)
        self.current[wid] = proc
        self.deliver(self.m.hello(wid, str(proc.incarnation), 4, self.now, proc.route) or [])

    @rule(wid=WORKERS)
    def fence_and_rejoin(self, wid: str) -> None:
        """The process fenced (a stall) but the coordinator has not timed it out: it drops
        its queues, reconnects and says HELLO again with the same incarnation."""
        proc = self.current.get(wid)
        if proc is None or proc.stopped or proc.silent:
            return
        proc.owned = set()  # running reconciles cancelled, queues dropped
        proc.connections += 1
        proc.route = f"r{proc.incarnation}.{proc.connections}".encode()
        proc.last_contact = self.now
        self.deliver(self.m.hello(wid, str(proc.incarnation), 4, self.now, proc.route) or [])

    @rule(wid=WORKERS)
    def release(self, wid: str) -> None:
        proc = self.current.get(wid)
        if proc is None or proc.stopped or proc.silent or not proc.revoked:
            return
        slots, proc.revoked = proc.revoked, set()
        self.deliver(self.m.released(wid, slots, self.now))

    @rule(wid=WORKERS)
    def bye(self, wid: str) -> None:
        proc = self.current.get(wid)
        if proc is None or proc.stopped or proc.silent:
            return
        proc.stopped = True  # drained: nothing runs any more
        self.deliver(self.m.leave(wid, self.now))

    @rule(wid=WORKERS)
    def partition(self, wid: str) -> None:
        proc = self.current.get(wid)
        if proc is not None:
            proc.silent = True

    @rule(wid=WORKERS)
    def undeliverable(self, wid: str) -> None:
        proc = self.current.get(wid)
        if proc is not None:
            proc.silent = True
            self.deliver(self.m.lost(wid, self.now))

    @precondition(lambda self: self.processes)
    @rule(dt=st.sampled_from([0.5, 1.0, 2.5]))
    def advance(self, dt: float) -> None:
        self.now += dt
        for proc in self.processes:
            if proc.stopped:
                continue
            if not proc.silent and self.current.get(proc.wid) is proc:
                proc.last_contact = self.now  # coordinator heartbeats reach it
                self.m.seen(proc.wid, self.now)
            elif self.now - proc.last_contact > FENCE:
                proc.stopped = True
        self.deliver(self.m.tick(self.now))

    @invariant()
    def exclusive(self) -> None:
        seen: dict[int, Process] = {}
        for proc in self.processes:
            for slot in proc.may_run():
                other = seen.get(slot)
                assert other is None, (
                    f"slot {slot} runnable by {other.wid}#{other.incarnation} "
                    f"and {proc.wid}#{proc.incarnation} at t={self.now}"
                )
                seen[slot] = proc

    @invariant()
    def nothing_is_lost(self) -> None:
        """Every slot the coordinator dispatches to a live process is one it knows it owns."""
        for wid, proc in self.current.items():
            if proc.stopped or proc.silent:
                continue
            kept = {s for s in range(SLOTS) if self.m.dispatch_target(s) == wid}
            assert kept <= proc.owned, (wid, sorted(kept - proc.owned)[:5], self.now)

    @invariant()
    def one_owner_per_slot(self) -> None:
        for slot in range(SLOTS):
            owner = self.m.owner(slot)
            assert owner is None or self.m.knows(owner)


TestExclusivity = ExclusivityMachine.TestCase
TestExclusivity.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
