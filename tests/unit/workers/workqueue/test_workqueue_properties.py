"""Work queue invariants, checked by Hypothesis against a plain reference model.

The model keeps the contract in the simplest form (lists, sets, a dict of parked items); the
machine drives the real queue and the model with the same operations and checks after every
step that:

- ``get`` hands out exactly the model's next item: LIVE line before LOW line, FIFO within a
  line, promoted items at the back of the LIVE line; never an item being processed;
- an item added while processing comes back after ``done``;
- parked items come back when the fake clock reaches their (earliest) ready time;
- ``workqueue_depth`` equals the number of dirty items, ``adds_total`` and ``retries_total``
  count what the contract says, ``len()`` is the number of ready items;
- nothing is lost: at the end, after finishing in-flight work and letting every delay run
  out, everything still owed is handed out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from prometheus_client import CollectorRegistry

from proto.runtime.clock import FakeClock
from proto.wire import Priority
from workers.workqueue import PrometheusMetricsProvider, ShutDown, WorkQueue
from workers.workqueue.ratelimiters import ItemExponentialFailureRateLimiter

ITEMS = st.sampled_from(["a", "b", "c", "d"])
PRIORITIES = st.sampled_from(list(Priority))
DELAYS = st.sampled_from([-1.0, 0.0, 1.0, 2.0, 5.0])
STEPS = st.sampled_from([0.5, 1.0, 3.0])
LABELS = {"name": "machine", "controller": "machine"}


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


class WorkQueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.registry = CollectorRegistry()
        self.queue: WorkQueue[str] = WorkQueue(
            "machine",
            rate_limiter=ItemExponentialFailureRateLimiter(base_delay=1.0, max_delay=4.0),
            clock=self.clock,
            metrics=PrometheusMetricsProvider(registry=self.registry),
        )
        # The model.
        self.lines: dict[Priority, list[str]] = {Priority.LIVE: [], Priority.LOW: []}
        self.dirty: dict[str, Priority] = {}
        self.processing: set[str] = set()
        self.parked: dict[str, tuple[float, int, Priority]] = {}
        self.parked_seq = 0
        self.failures: dict[str, int] = {}
        self.shut = False
        self.adds = 0
        self.retries = 0

    # -- helpers -------------------------------------------------------------------------

    def run_in_loop(self, call: Callable[[], object]) -> None:
        async def inside() -> None:
            call()

        self.loop.run_until_complete(inside())

    def expect_add(self, item: str, priority: Priority) -> None:
        if self.shut:
            return
        current = self.dirty.get(item)
        if current is None:
            self.dirty[item] = priority
            self.adds += 1
            if item not in self.processing:
                self.lines[priority].append(item)
        elif priority < current:  # more urgent (lower first)
            self.dirty[item] = priority
            if item not in self.processing:
                self.lines[current].remove(item)
                self.lines[priority].append(item)

    def expect_add_after(self, item: str, seconds: float, priority: Priority) -> None:
        if self.shut:
            return
        self.retries += 1
        if seconds <= 0:
            self.expect_add(item, priority)
            return
        ready_at = self.clock.now() + seconds
        parked = self.parked.get(item)
        if parked is not None:
            parked_at, parked_seq, parked_priority = parked
            if parked_at <= ready_at:
                self.parked[item] = (parked_at, parked_seq, min(priority, parked_priority))
                return
            priority = min(priority, parked_priority)
        self.parked_seq += 1
        self.parked[item] = (ready_at, self.parked_seq, priority)

    def expect_done(self, item: str) -> None:
        self.processing.remove(item)
        if item in self.dirty:
            self.lines[self.dirty[item]].append(item)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.loop.run_until_complete(settle())
        due = sorted(
            (ready_at, seq, item, priority)
            for item, (ready_at, seq, priority) in self.parked.items()
            if ready_at <= self.clock.now()
        )
        for _, _, item, priority in due:
            del self.parked[item]
            self.expect_add(item, priority)

    def ready(self) -> int:
        return len(self.lines[Priority.LIVE]) + len(self.lines[Priority.LOW])

    def take(self) -> str:
        expected = (self.lines[Priority.LIVE] or self.lines[Priority.LOW]).pop(0)
        item = self.loop.run_until_complete(self.queue.get())
        assert item == expected
        assert item not in self.processing, "two consumers would hold the same item"
        del self.dirty[item]
        self.processing.add(item)
        return item

    # -- rules ---------------------------------------------------------------------------

    @rule(item=ITEMS, priority=PRIORITIES)
    def add(self, item: str, priority: Priority) -> None:
        self.queue.add(item, priority=priority)
        self.expect_add(item, priority)

    @precondition(lambda self: self.ready() > 0)
    @rule()
    def get(self) -> None:
        self.take()

    @precondition(lambda self: self.ready() == 0)
    @rule()
    def get_when_nothing_is_ready(self) -> None:
        getter = self.loop.create_task(self.queue.get())
        self.loop.run_until_complete(settle())
        if self.shut:
            assert getter.done()
            assert isinstance(getter.exception(), ShutDown)
        else:
            assert not getter.done(), "get() returned with nothing ready"
            getter.cancel()
            self.loop.run_until_complete(settle())

    @precondition(lambda self: self.processing)
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        item = data.draw(st.sampled_from(sorted(self.processing)))
        self.queue.done(item)
        self.expect_done(item)

    @rule(item=ITEMS, seconds=DELAYS, priority=PRIORITIES)
    def add_after(self, item: str, seconds: float, priority: Priority) -> None:
        self.run_in_loop(lambda: self.queue.add_after(item, seconds, priority=priority))
        self.expect_add_after(item, seconds, priority)

    @rule(item=ITEMS)
    def add_rate_limited(self, item: str) -> None:
        failures = self.failures.get(item, 0)
        self.failures[item] = failures + 1
        self.run_in_loop(lambda: self.queue.add_rate_limited(item))
        self.expect_add_after(item, min(2.0**failures, 4.0), Priority.LIVE)

    @rule(item=ITEMS)
    def forget(self, item: str) -> None:
        self.queue.forget(item)
        self.failures.pop(item, None)

    @rule(seconds=STEPS)
    def advance_clock(self, seconds: float) -> None:
        self.advance(seconds)

    @rule(doomed=st.frozensets(ITEMS))
    def discard(self, doomed: frozenset[str]) -> None:
        dropped = self.queue.discard(lambda item: item in doomed)
        expected = {item for item in [*self.dirty, *self.parked] if item in doomed}
        assert dropped == len(expected)
        for item in expected:
            if item in self.dirty:
                priority = self.dirty.pop(item)
                if item not in self.processing:
                    self.lines[priority].remove(item)
            self.parked.pop(item, None)
            self.failures.pop(item, None)

    @rule()
    def shut_down(self) -> None:
        self.queue.shut_down()
        self.shut = True
        self.parked.clear()

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def counts_match_the_model(self) -> None:
        sample = self.registry.get_sample_value
        assert sample("workqueue_depth", LABELS) == len(self.dirty)
        assert sample("workqueue_adds_total", LABELS) == self.adds
        assert sample("workqueue_retries_total", LABELS) == self.retries
        assert len(self.queue) == self.ready()
        for item in "abcd":
            assert self.queue.num_requeues(item) == self.failures.get(item, 0)

    def teardown(self) -> None:
        try:
            # Nothing is lost: finish what is in flight, let every delay run out, and
            # everything still owed comes out, in the model's order.
            for item in sorted(self.processing):
                self.queue.done(item)
                self.expect_done(item)
            self.advance(60.0)
            owed = self.lines[Priority.LIVE] + self.lines[Priority.LOW]
            handed_out = [self.take() for _ in range(self.ready())]
            assert handed_out == owed
            assert len(self.queue) == 0
        finally:
            self.queue.shut_down()
            self.loop.run_until_complete(settle())
            self.loop.close()


WorkQueueMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
test_work_queue_keeps_its_invariants = WorkQueueMachine.TestCase
