from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from manager.controllers.running import ControllerSet
from manager.term.membership import Membership, Outbox, Timing
from proto.wire import Assign, Revoke, Welcome

SLOTS = 64
TIMING = Timing(heartbeat_interval=1.0, worker_timeout=5.0)
FENCE = TIMING.worker_timeout - 2 * TIMING.heartbeat_interval


def table(start_at: float = 0.0) -> Membership:
    return Membership(
        epoch=3,
        coordinator_id="c",
        controllers=ControllerSet(),
        start_at=start_at,
        timing=TIMING,
        slot_count=SLOTS,
    )


def settled(m: Membership, now: float) -> bool:
    """Every slot has an owner, none is in transit, and nothing more moves."""
    owned = all(m.owner(s) is not None for s in range(SLOTS))
    in_transit = any(m.dispatch_target(s) != m.owner(s) for s in range(SLOTS))
    return owned and not in_transit and m.tick(now) == []


def running(m: Membership, start: float, end: float) -> Outbox:
    """The coordinator running from ``start`` to ``end``: a tick every half interval."""
    out: Outbox = []
    now = start
    while now < end:
        out += m.tick(now)
        now += TIMING.heartbeat_interval / 2
    return out + m.tick(end)


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
    assert isinstance(assign, Assign) and assign.keys == ()  # the dispatch queues them
    assert settled(m, 10.0)


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
    assert settled(m, 1.5) and all(m.owner(s) == "w2" for s in moving)


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
    out = running(m, 2.0, 7.5)  # w2 silent since 2.0, w3 since 4.0
    assert "w2" not in m.workers and "w3" in m.workers
    assert set(granted(out)) <= {"w3"}


def test_a_restarted_worker_waits_for_its_previous_process_to_have_fenced() -> None:
    m = table()
    m.hello("w1", "old", 4, now=0.0)
    m.tick(0.0)
    m.seen("w1", 2.0)
    running(m, 0.0, 3.0)
    assert m.hello("w1", "new", 4, now=3.0) is None  # the old process may still run
    assert running(m, 3.0, 6.9) == []
    assert m.hello("w1", "new", 4, now=6.9) is None
    running(m, 6.9, 7.1)  # silent for the timeout: expired, so it has fenced
    hello = m.hello("w1", "new", 4, now=7.2)
    assert hello is not None
    assert granted(hello + m.tick(7.2)) == {"w1": set(range(SLOTS))}


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


def test_a_worker_that_fenced_rejoins_and_gets_every_slot_again() -> None:
    m = table()
    m.hello("w1", "i1", 4, now=0.0, route=b"r1")
    m.tick(0.0)
    # The same process on a new connection: it fenced and dropped its queues.
    out = m.hello("w1", "i1", 4, now=1.0, route=b"r2")
    assert out is not None
    (_, welcome), (_, assign) = out
    assert isinstance(welcome, Welcome) and welcome.slots == ()
    assert isinstance(assign, Assign) and set(assign.slots) == set(range(SLOTS))
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


def test_another_process_with_a_live_members_id_is_refused_and_disturbs_nothing() -> None:
    m = table()
    m.hello("w1", "old", 4, now=0.0, route=b"r1")
    owned = granted(m.tick(0.0))["w1"]
    for now in (1.0, 3.0, 5.0):  # the member keeps heartbeating meanwhile
        m.seen("w1", now)
        assert m.hello("w1", "new", 4, now=now, route=b"r2") is None
        assert m.member_at(b"r2") is None and m.route("w1") == b"r1"
        assert m.tick(now) == []  # no slot moves
    assert {s for s in range(SLOTS) if m.owner(s) == "w1"} == owned


def test_a_restarted_process_joins_once_its_silent_predecessor_expired() -> None:
    m = table()
    m.hello("w1", "old", 4, now=0.0, route=b"r1")
    owned = granted(m.tick(0.0))["w1"]
    assert m.hello("w1", "new", 4, now=1.0, route=b"r2") is None  # the old one may still run
    running(m, 1.0, 5.0)
    # Not yet expired by a tick, but silent for the timeout: the new process replaces it and
    # gets the slots once the old one has surely fenced.
    out = m.hello("w1", "new", 4, now=5.5, route=b"r2")
    assert out is not None and m.route("w1") == b"r2"
    assert granted(m.tick(5.5)).get("w1", set()) == owned
    # The old process, back from a partition, is refused: the new one is live.
    assert m.hello("w1", "old", 4, now=6.0, route=b"r3") is None
    m.leave("w1", now=7.0)
    assert m.hello("w1", "old", 4, now=7.5, route=b"r3") is not None


def test_a_paused_coordinator_does_not_count_its_own_pause_as_the_workers_silence() -> None:
    m = table()
    m.hello("w1", "i1", 4, now=0.0)
    m.hello("w2", "i2", 4, now=0.0)
    running(m, 0.0, 2.0)
    m.seen("w1", 2.0)
    m.seen("w2", 2.0)
    # Stopped from 2.0 to 9.0: the heartbeats sent meanwhile wait in the socket. The tick
    # that runs first after the pause expires nobody...
    assert m.tick(9.0) == [] and set(m.workers) == {"w1", "w2"}
    # ... nor does a HELLO claiming w1's id replace it.
    assert m.hello("w1", "other", 4, now=9.05) is None
    previous = 9.0
    for now in (9.1, 11.0, 13.0, 14.5):  # w1's heartbeats; w2's never come: it died meanwhile
        running(m, previous, now)
        m.seen("w1", now)
        previous = now
    assert m.workers.keys() == {"w1"}  # silent for the timeout while the coordinator ran
    assert {m.owner(s) for s in range(SLOTS)} == {"w1"}


def test_generations_grow_with_every_welcome_and_assign_of_the_term() -> None:
    m = table()
    generations: list[int] = []

    def of(out: Outbox) -> list[int]:
        return [msg.generation for _, msg in out if isinstance(msg, Welcome | Assign)]

    for out in (
        m.hello("w1", "i1", 4, now=0.0, route=b"r1"),
        m.tick(0.0),
        m.hello("w2", "i2", 4, now=0.5, route=b"r2"),
    ):
        assert out is not None
        generations += of(out)
    moving = revoked(m.tick(0.5))["w1"]
    (given,) = (msg for _, msg in m.released("w1", moving, now=0.6) if isinstance(msg, Assign))
    rejoined = m.hello("w1", "i1", 4, now=0.7, route=b"r3")  # w1 fenced: a new connection
    assert rejoined is not None
    generations += [given.generation, *of(rejoined)]
    assert generations == sorted(set(generations)) and len(generations) == 6


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
        self.joining: dict[str, Process] = {}  # started, not welcomed yet
        self.incarnations = 0
        self.generations: dict[int, int] = {}  # slot -> generation of its latest grant

    def deliver(self, out: Outbox) -> None:
        for _, msg in out:
            if isinstance(msg, Assign):  # every grant of a slot outranks the earlier ones
                for slot in msg.slots:
                    assert msg.generation > self.generations.get(slot, 0)
                    self.generations[slot] = msg.generation
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
        """A new process with this id (a restart, or a second process by mistake), the old one
        alive or not: it says HELLO now and at every step until it is welcomed."""
        self.incarnations += 1
        proc = Process(wid, self.incarnations, self.now)
        self.processes.append(proc)
        self.joining[wid] = proc
        self.try_joining(wid)

    def try_joining(self, wid: str) -> None:
        proc = self.joining[wid]
        out = self.m.hello(wid, str(proc.incarnation), 4, self.now, proc.route)
        if out is None:
            return  # refused: a live process has the id
        del self.joining[wid]
        old = self.current.get(wid)
        if old is not None and not old.stopped:
            old.silent = True  # no longer the member: nothing reaches it any more
        self.current[wid] = proc
        self.deliver(out)

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
        joining = set(map(id, self.joining.values()))
        for proc in self.processes:
            if proc.stopped or id(proc) in joining:
                continue
            if not proc.silent and self.current.get(proc.wid) is proc:
                proc.last_contact = self.now  # coordinator heartbeats reach it
                self.m.seen(proc.wid, self.now)
            elif self.now - proc.last_contact > FENCE:
                proc.stopped = True
        self.deliver(self.m.tick(self.now))
        for wid in list(self.joining):
            self.try_joining(wid)

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
            assert owner is None or owner in self.m.workers


TestExclusivity = ExclusivityMachine.TestCase
TestExclusivity.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
