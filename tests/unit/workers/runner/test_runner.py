from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

import pytest
import structlog
from prometheus_client import CollectorRegistry

from proto.runtime.clock import FakeClock
from proto.wire import ControllerDef, ControllerKind, ParentKey, Priority, Snapshot
from workers.reconcile import Claim, Outcome, ReconcileRequest, RequeueAfter
from workers.runner.barriers import BARRIER_TTL
from workers.runner.metrics import PrometheusControllerMetrics
from workers.runner.runner import KeyDropped, OutOfContact, Runner


def definition(name: str = "cc", version: str = "1") -> ControllerDef:
    return ControllerDef(ControllerKind.COMPOSITE, name, "uid", version, b"{}", ())


def key(name: str, controller: str = "cc") -> ParentKey:
    return ParentKey("CompositeController", controller, "things.example.com", "ns", name)


class Script:
    """A reconciler whose behaviour per key is scripted, recording every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Mapping[str, str]]] = []
        self.reconciled: list[str] = []
        self.claims: list[Claim] = []
        self.actions: dict[str, list[object]] = {}
        self.running = 0
        self.peak = 0
        self.release = asyncio.Event()
        self.release.set()
        self.after_write = asyncio.Event()  # a reconcile that wrote waits for this to end
        self.after_write.set()
        self.permits: set[str] = set()  # keys whose snapshots hold a permit
        self.dones: list[tuple[str, int]] = []  # DONE: key, reconciles running then

    async def fetch(self, k: ParentKey, barrier: Mapping[str, str]) -> Snapshot:
        self.calls.append((k.name, dict(barrier)))
        return Snapshot(1, 1, k, b"{}", {}, (), {}, permit=k.name in self.permits)

    async def done(self, k: ParentKey) -> None:
        self.dones.append((k.name, self.running))

    async def reconcile(self, request: ReconcileRequest) -> Outcome:
        self.reconciled.append(request.key.name)
        self.claims.append(request.claim)
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await self.release.wait()
            actions = self.actions.get(request.key.name) or [Outcome()]
            action = actions.pop(0) if len(actions) > 1 else actions[0]
            if isinstance(action, BaseException):
                raise action
            if isinstance(action, dict):
                for resource, rv in action.items():
                    request.wrote(resource, {"metadata": {"resourceVersion": rv}})
                await self.after_write.wait()
                return Outcome()
            assert isinstance(action, Outcome)
            return action
        finally:
            self.running -= 1


class Gate:
    def __init__(self, open: bool = True) -> None:
        self.open = open

    def claim(self, key: ParentKey) -> Claim | None:
        return Claim(3, 9) if self.open else None


class Caches:
    """Records what the runner reports as gone: controllers, and the keys of each discard."""

    def __init__(self, names: Sequence[str] = ()) -> None:
        self.names = names
        self.stopped: list[str] = []
        self.discarded: list[list[str]] = []

    def forget_controller(self, definition: ControllerDef) -> None:
        self.stopped.append(definition.name)

    def discard(self, keys: Callable[[ParentKey], bool]) -> None:
        self.discarded.append([n for n in self.names if keys(key(n))])


def runner(script: Script, *, gate: bool = True, concurrency: int = 2, **kw: object) -> Runner:
    return Runner(
        factory=lambda _: script,
        snapshots=script,
        gate=Gate(gate),
        concurrency=concurrency,
        **kw,  # type: ignore[arg-type]
    )


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_keys_are_reconciled_with_bounded_concurrency() -> None:
    script = Script()
    script.release.clear()
    r = runner(script, concurrency=2)
    r.set_controllers((definition(),))
    for name in "abcde":
        assert r.enqueue(key(name), Priority.LIVE)
    await settle()
    assert script.running == 2 and r.in_flight == 2
    script.release.set()
    await settle()
    assert sorted(name for name, _ in script.calls) == list("abcde")
    assert script.peak == 2
    await r.close()


@pytest.mark.asyncio
async def test_a_reconcile_holding_a_permit_says_done_when_it_ends_however_it_ends() -> None:
    script = Script()
    script.permits = {"a", "b"}
    script.actions["b"] = [RuntimeError("hook failed"), Outcome()]
    r = runner(script, concurrency=1)
    r.set_controllers((definition(),))
    for name in "abc":
        r.enqueue(key(name), Priority.LIVE)
    await settle()
    assert script.dones[:2] == [("a", 0), ("b", 0)]  # after the reconcile, not during it
    await r.close()


@pytest.mark.asyncio
async def test_unknown_controller_keys_are_refused() -> None:
    r = runner(Script())
    assert not r.enqueue(key("a", controller="other"), Priority.LIVE)
    await r.close()


@pytest.mark.asyncio
async def test_outcomes_and_metrics() -> None:
    registry = CollectorRegistry()
    script = Script()
    script.actions = {
        "ok": [Outcome()],
        "later": [Outcome(requeue_after=30.0)],
        "busy": [RequeueAfter(20.0, "hook busy")],
        "bad": [RuntimeError("boom")],
        "gone": [KeyDropped("not owner")],
        "paused": [OutOfContact("past the deadline")],
    }
    r = runner(script, metrics=PrometheusControllerMetrics(registry=registry))
    r.set_controllers((definition(),))
    for name in script.actions:
        r.enqueue(key(name), Priority.LIVE)
    await settle()

    def total(result: str) -> float:
        value = registry.get_sample_value(
            "controller_runtime_reconcile_total",
            {"controller": "CompositeController-cc", "result": result},
        )
        return value or 0.0

    assert total("success") == 1 and total("requeue_after") == 2 and total("error") == 1
    queue = r._controllers["CompositeController-cc"].queue
    assert queue.num_requeues(key("bad")) == 1  # backoff counted for the failure only
    assert queue.num_requeues(key("busy")) == 0
    assert queue.num_requeues(key("paused")) == 1  # retried with backoff, not an error
    assert queue.num_requeues(key("gone")) == 0  # dropped
    assert len(queue) == 0  # the retries wait for their delays
    await r.close()


@pytest.mark.asyncio
async def test_each_reconcile_runs_under_the_gates_claim_with_an_attempt_id_of_its_own() -> None:
    script = Script()
    r = runner(script, worker_id="w-7")
    r.set_controllers((definition(),))
    for name in "aab":
        r.enqueue(key(name), Priority.LIVE)
        await settle()
    assert [(c.epoch, c.generation) for c in script.claims] == [(3, 9)] * 3
    attempts = [c.attempt for c in script.claims]
    assert len(set(attempts)) == 3
    assert all(a.startswith("w-7/") and a.count("/") == 2 for a in attempts)
    await r.close()


@pytest.mark.asyncio
async def test_a_closed_gate_drops_the_key_without_a_fetch() -> None:
    script = Script()
    r = runner(script, gate=False)
    r.set_controllers((definition(),))
    r.enqueue(key("a"), Priority.LIVE)
    await settle()
    assert script.calls == []
    await r.close()


@pytest.mark.asyncio
async def test_writes_become_the_next_fetch_barrier() -> None:
    script = Script()
    script.actions = {"a": [{"configmaps": "41", "things.example.com": "40"}, Outcome()]}
    r = runner(script)
    r.set_controllers((definition(),))
    r.enqueue(key("a"), Priority.LIVE)
    await settle()
    r.enqueue(key("a"), Priority.LIVE)
    await settle()
    r.enqueue(key("a"), Priority.LIVE)
    await settle()
    assert script.calls == [
        ("a", {}),
        ("a", {"configmaps": "41", "things.example.com": "40"}),
        ("a", {}),
    ]
    await r.close()


@pytest.mark.asyncio
async def test_the_echo_of_a_reconciles_writes_waits_behind_parents_not_yet_reconciled() -> None:
    script = Script()
    script.actions = {"a": [{"configmaps": "41"}, Outcome()], "b": [Outcome()]}
    r = runner(script, concurrency=1)
    r.set_controllers((definition(),))
    for name in "abc":  # the initial list: LOW
        r.enqueue(key(name), Priority.LOW)
    await settle()
    assert script.reconciled == ["a", "b", "c"]
    # a wrote; the change seen on the watch meanwhile is its own write coming back
    for name in "bcd":
        r.enqueue(key(name), Priority.LOW)
    r.enqueue(key("a"), Priority.LIVE)
    await settle()
    assert script.reconciled[3:] == ["b", "c", "d", "a"]
    assert script.calls[-1] == ("a", {"configmaps": "41"})
    # the fetch saw a's writes: a change of a is LIVE again, as is one of b, which wrote nothing
    for name in "cd":
        r.enqueue(key(name), Priority.LOW)
    r.enqueue(key("a"), Priority.LIVE)
    r.enqueue(key("b"), Priority.LIVE)
    await settle()
    assert script.reconciled[7:] == ["a", "b", "c", "d"]
    await r.close()


class Later:
    """Takes keys back (a coordinator whose WELCOME said ``defers``), or not."""

    def __init__(self, *, takes: bool) -> None:
        self.takes = takes
        self.handed: list[str] = []

    def later(self, key: ParentKey) -> bool:
        if self.takes:
            self.handed.append(key.name)
        return self.takes


def a_writes(later: Later) -> tuple[Script, Runner]:
    """One reconcile at a time; the first reconcile of ``a`` writes, its next one does not."""
    script = Script()
    script.actions = {"a": [{"configmaps": "41"}, Outcome()]}
    r = runner(script, concurrency=1, later=later)
    r.set_controllers((definition(),))
    return script, r


@pytest.mark.asyncio
async def test_the_echo_of_a_reconciles_writes_goes_back_to_the_coordinator() -> None:
    later = Later(takes=True)
    script, r = a_writes(later)
    r.enqueue(key("a"), Priority.LOW)
    await settle()
    assert script.reconciled == ["a"]
    # a wrote: its echo goes back, to wait behind the keys the coordinator still holds
    assert r.enqueue(key("a"), Priority.LIVE)
    assert r.enqueue(key("b"), Priority.LIVE)  # wrote nothing: no echo
    await settle()
    assert later.handed == ["a"] and script.reconciled == ["a", "b"]
    # the coordinator sends it back (LOW): it runs, and its fetch sees the writes
    r.enqueue(key("a"), Priority.LOW)
    await settle()
    assert script.reconciled == ["a", "b", "a"]
    assert script.calls[-1] == ("a", {"configmaps": "41"})
    await r.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("takes", [True, False])
async def test_an_echo_already_queued_or_not_taken_back_waits_here_at_low(takes: bool) -> None:
    later = Later(takes=takes)
    script, r = a_writes(later)
    r.enqueue(key("a"), Priority.LIVE)
    await settle()
    script.release.clear()
    r.enqueue(key("b"), Priority.LIVE)  # runs, and holds the only slot
    await settle()
    if takes:
        r.enqueue(key("a"), Priority.LOW)  # already queued: the echo stays here
    r.enqueue(key("c"), Priority.LOW)
    r.enqueue(key("a"), Priority.LIVE)
    script.release.set()
    await settle()
    assert later.handed == []
    assert script.reconciled == (["a", "b", "a", "c"] if takes else ["a", "b", "c", "a"])
    await r.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(("written", "order"), [(False, "aab"), (True, "aba")])
async def test_a_change_while_a_reconcile_runs_is_an_echo_only_once_it_wrote(
    written: bool, order: str
) -> None:
    script = Script()
    script.actions = {"a": [{"configmaps": "41"}, Outcome()]}
    script.after_write.clear()
    if not written:
        script.release.clear()  # a waits before it writes anything
    r = runner(script, concurrency=1)
    r.set_controllers((definition(),))
    r.enqueue(key("a"), Priority.LIVE)
    r.enqueue(key("b"), Priority.LOW)
    await settle()
    assert script.reconciled == ["a"]  # running
    r.enqueue(key("a"), Priority.LIVE)
    script.release.set()
    script.after_write.set()
    await settle()
    assert "".join(script.reconciled) == order
    await r.close()


@pytest.mark.asyncio
async def test_cancel_interrupts_running_reconciles_and_drain_waits() -> None:
    script = Script()
    script.release.clear()
    r = runner(script, concurrency=4)
    r.set_controllers((definition(),))
    for name in "abc":
        r.enqueue(key(name), Priority.LIVE)
    await settle()
    assert r.cancel(lambda k: k.name == "a") == 1
    await settle()
    assert r.in_flight == 2
    drained = asyncio.create_task(r.drain(lambda k: k.name in "bc"))
    await settle()
    assert not drained.done()
    script.release.set()
    await asyncio.wait_for(drained, 2)
    assert r.in_flight == 0
    await r.close()


@pytest.mark.asyncio
async def test_a_key_of_a_controller_removed_and_added_again_never_runs_twice_at_once() -> None:
    # A controller object deleted and created again while one of its keys reconciles: the
    # worker handles both CONTROLLERS messages and the key's KEYS in one turn.
    script = Script()
    script.release.clear()
    r = runner(script, concurrency=2)
    r.set_controllers((definition(),))
    r.enqueue(key("a"), Priority.LIVE)
    await settle()
    r.set_controllers(())
    r.set_controllers((definition(),))
    r.enqueue(key("a"), Priority.LIVE)
    await settle()
    assert script.reconciled == ["a", "a"] and script.running == 1 and script.peak == 1
    assert r.in_flight == 1
    drained = asyncio.create_task(r.drain(lambda _: True))  # a slot revoked meanwhile
    await settle()
    assert not drained.done()  # it waits for the new reconcile
    script.release.set()
    await asyncio.wait_for(drained, 2)
    r.enqueue(key("b"), Priority.LIVE)
    await settle()
    assert script.reconciled == ["a", "a", "b"]  # every consumer still works
    assert r.in_flight == 0
    await r.close()


@pytest.mark.asyncio
async def test_a_cancelled_reconcile_leaves_no_backoff_behind() -> None:
    script = Script()
    script.actions["a"] = [RuntimeError("hook 500"), RuntimeError("hook 500"), Outcome()]
    r = runner(script, concurrency=1)
    r.set_controllers((definition(),))
    queue = r._controllers["CompositeController-cc"].queue
    r.enqueue(key("a"), Priority.LIVE)
    for _ in range(100):
        await asyncio.sleep(0.01)
        if len(script.reconciled) == 2 and script.running == 0:
            break
    assert queue.num_requeues(key("a")) == 2
    script.release.clear()
    for _ in range(100):  # the third attempt, after its backoff, now blocks
        await asyncio.sleep(0.01)
        if script.running:
            break
    assert script.running == 1
    assert r.cancel(lambda _: True) == 1  # fenced
    await settle()
    assert queue.num_requeues(key("a")) == 0  # as a dropped key: no backoff, no memory
    await r.close()


@pytest.mark.asyncio
async def test_controllers_come_and_go_and_a_bad_one_is_isolated() -> None:
    script = Script()

    def factory(d: ControllerDef) -> Script:
        if d.name == "broken":
            raise ValueError("no reconciler for this")
        return script

    r = Runner(factory=factory, snapshots=script, gate=Gate(), concurrency=1)
    r.set_controllers((definition("a"), definition("broken")))
    assert r.enqueue(key("x", controller="a"), Priority.LIVE)
    assert not r.enqueue(key("x", controller="broken"), Priority.LIVE)
    await settle()
    r.set_controllers((definition("b"),))
    assert not r.enqueue(key("y", controller="a"), Priority.LIVE)
    assert r.enqueue(key("y", controller="b"), Priority.LIVE)
    await settle()
    assert [name for name, _ in script.calls] == ["x", "y"]
    await r.close()


@pytest.mark.asyncio
async def test_a_removed_controller_is_reported_to_the_caches() -> None:
    caches = Caches()
    r = runner(Script(), concurrency=1, caches=caches)
    r.set_controllers((definition("a"), definition("b")))
    r.set_controllers((definition("b"),))
    assert caches.stopped == ["a"]
    await r.close()
    assert caches.stopped == ["a", "b"]


@pytest.mark.asyncio
async def test_discarded_keys_are_reported_to_the_caches() -> None:
    caches = Caches(["a", "b", "c"])
    r = runner(Script(), caches=caches)
    r.set_controllers((definition(),))
    r.cancel(lambda k: k.name == "a")  # fenced
    await r.drain(lambda k: k.name in "bc")  # a slot revoked
    assert caches.discarded == [["a"], ["b", "c"]]
    await r.close()


@pytest.mark.asyncio
async def test_a_reconcile_that_wrote_is_logged_once_at_info() -> None:
    script = Script()
    script.actions = {"a": [{"configmaps": "41"}, Outcome()]}
    r = runner(script)
    r.set_controllers((definition(),))
    with structlog.testing.capture_logs() as logs:
        r.enqueue(key("a"), Priority.LIVE)
        await settle()
        r.enqueue(key("a"), Priority.LIVE)  # writes nothing the second time
        await settle()
    await r.close()
    done = [e for e in logs if e["event"] == "reconciled"]
    assert [e["log_level"] for e in done] == ["info", "debug"]
    assert done[0]["controller"] == "CompositeController-cc"
    assert done[0]["key"] == "ns/a"
    assert done[0]["result"] == "success"
    assert done[0]["wrote"] == ["update configmaps ?"]
    assert done[1]["wrote"] == []


@pytest.mark.parametrize(
    ("answer", "action", "line"),
    [
        ({"metadata": {"name": "x", "namespace": "ns"}}, "create", "create configmaps ns/x"),
        ({"metadata": {"name": "node-1"}}, "patch", "patch configmaps node-1"),
        ({"kind": "Status", "details": {"name": "gone"}}, "delete", "delete configmaps gone"),
    ],
)
def test_each_write_is_one_readable_line(answer: dict[str, object], action: str, line: str) -> None:
    request = ReconcileRequest(key("a"), Snapshot(1, 1, key("a"), b"{}", {}, (), {}))
    request.wrote("configmaps", answer, action=action)
    assert request.written == [line]
    assert request.writes == {}  # no resourceVersion: no barrier


@pytest.mark.asyncio
async def test_barriers_are_forgotten_after_a_minute_or_with_their_keys() -> None:
    """A worker does not keep a barrier for every key it ever wrote: one whose writes no
    fetch followed goes after ``BARRIER_TTL``; the keys of a dropped slot lose theirs."""
    clock = FakeClock()
    script = Script()
    names = [f"p{i}" for i in range(200)]
    script.actions = {name: [{"configmaps": "7"}] for name in names}
    r = runner(script, clock=clock)
    r.set_controllers((definition(),))
    for name in names:
        r.enqueue(key(name), Priority.LOW)
    for _ in range(100):
        if len(script.reconciled) == 200 and r.in_flight == 0:
            break
        await settle()
    assert len(r._barriers) == 200
    r.cancel(lambda k: k.name.endswith("7"))  # their slot was revoked
    assert len(r._barriers) == 180
    clock.advance(BARRIER_TTL)
    r.enqueue(key("p0"), Priority.LIVE)  # any key queued sweeps the old barriers
    assert len(r._barriers) == 0
    await r.close()
