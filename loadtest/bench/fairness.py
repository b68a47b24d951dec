"""Fair sharing between controllers: one controller flooded, another's fresh edits timed.

One worker's ``Runner`` (``workers.runner``, as shipped: a queue per controller, a FIFO
concurrency limit shared by all), two controllers: ``noisy`` gets ``--flood`` parents queued
at once (LIVE: a flood of edits, the worst case), then ``quiet`` gets one fresh edit every
``GAP`` seconds while the flood drains. The latency of an edit is from its enqueue to the end
of its reconcile; a reconcile is a snapshot fetched from the coordinator's stand-in and a hook
answering after ``--hook-ms``. Three runs, in the same process, one after the other:

- **fair**: the runner as it is;
- **fair, noisy limited**: ``noisy`` has ``metashard.io/max-concurrent-reconciles`` (the
  coordinator's ``manager.term.throttle``, in process: a THROTTLED fetch drops the key, a
  freed permit pushes the next waiting key back to the runner, DONE frees the permit), so
  its flood waits at the coordinator instead of in the worker;
- **baseline, one queue**: the same runner with every key of both controllers in one
  queue, first come first served, as a controller-manager without fair sharing between
  controllers has it.

Printed: the p50 and p99 of the quiet controller's edit latency per run, the ratio of each
against the baseline's, and how long the flood took to drain (so that fairness is not bought
with throughput). The target: p99 under 1 s with 20,000 queued (``--flood 20000``);
``make bench`` runs a smaller flood.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import orjson

from loadtest.bench._report import header, row
from manager.controllers.view import ControllerView
from manager.term.metrics import TermMetrics
from manager.term.throttle import Admission, Throttle
from proto.runtime.logs import configure
from proto.wire import ControllerDef, ControllerKind, ParentKey, Priority, Snapshot
from workers.reconcile import Claim, Outcome, Reconciler, ReconcileRequest
from workers.runner.runner import KeyDropped, Runner

GAP = 0.02  # seconds between two fresh edits of the quiet controller
CONCURRENCY = 16  # the worker's --concurrency
NOISY_LIMIT = 8  # the noisy controller's max-concurrent-reconciles, when limited
ONE_QUEUE = "everything"


@dataclass(frozen=True, slots=True)
class Result:
    p50: float
    p99: float
    drained: float  # seconds until the flood's last key was reconciled
    samples: int


def key(controller: str, name: str) -> ParentKey:
    return ParentKey("CompositeController", controller, "things.example.com", "ns", name)


def definition(name: str) -> ControllerDef:
    return ControllerDef(ControllerKind.COMPOSITE, name, name, "1", b"{}", ())


class Hook:
    """The reconciler: answers after ``seconds``; notes when each key's reconcile ended."""

    def __init__(self, seconds: float, expected: int) -> None:
        self.seconds = seconds
        self.ended: dict[str, float] = {}
        self.expected = expected
        self.all_ended = asyncio.Event()

    async def reconcile(self, request: ReconcileRequest) -> Outcome:
        await asyncio.sleep(self.seconds)
        self.ended[request.key.name] = time.perf_counter()
        if len(self.ended) == self.expected:
            self.all_ended.set()
        return Outcome()


class Coordinator:
    """The coordinator's side of a FETCH: a snapshot, or THROTTLED when the throttle says so;
    the throttle's pushes go back to the runner, as KEYS would."""

    def __init__(self, limited: bool) -> None:
        self.runner: Runner | None = None
        self.throttle: Throttle | None = None
        if limited:
            self.throttle = Throttle(
                sink=self, members=self, metrics=TermMetrics(None), clock=_Clock()
            )
            annotations = {"metashard.io/max-concurrent-reconciles": str(NOISY_LIMIT)}
            view = _View(("CompositeController", "noisy"), annotations)
            views = [cast(ControllerView, view)]
            self.throttle.controllers_changed(views, views)
            self.throttle.joined("w", limits=True)

    async def fetch(self, k: ParentKey, barrier: Mapping[str, str]) -> Snapshot:
        admission = Admission.FREE if self.throttle is None else self.throttle.admit("w", k)
        await asyncio.sleep(0)  # the round trip, at its cheapest
        if admission is Admission.THROTTLED:
            raise KeyDropped("throttled")
        return Snapshot(1, 1, k, b"{}", {}, (), {}, permit=admission is Admission.PERMIT)

    async def done(self, k: ParentKey) -> None:
        if self.throttle is not None:
            self.throttle.release("w", k)

    def push(self, k: ParentKey, priority: Priority) -> None:
        assert self.runner is not None
        self.runner.enqueue(k, priority)

    def route(self, worker_id: str) -> bytes | None:
        return b"w"


class _View:
    def __init__(self, ident: tuple[str, str], annotations: dict[str, str]) -> None:
        self.id = ident
        self.raw = orjson.dumps({"metadata": {"annotations": annotations}})


class _Clock:
    def now(self) -> float:
        return time.perf_counter()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Gate:
    def claim(self, key: ParentKey) -> Claim | None:
        return Claim(1, 1)


async def run(*, flood: int, hook_seconds: float, mode: str, edits: int) -> Result:
    hook = Hook(hook_seconds, flood + edits)
    coordinator = Coordinator(limited=mode == "limited")
    runner = Runner(
        factory=lambda _: cast(Reconciler, hook),
        snapshots=coordinator,
        gate=_Gate(),
        concurrency=CONCURRENCY,
    )
    coordinator.runner = runner
    one_queue = mode == "one queue"
    names = (ONE_QUEUE,) if one_queue else ("noisy", "quiet")
    runner.set_controllers(tuple(definition(n) for n in names))
    started = time.perf_counter()
    for i in range(flood):
        runner.enqueue(key(ONE_QUEUE if one_queue else "noisy", f"noisy-{i}"), Priority.LIVE)
    sent: dict[str, float] = {}
    for i in range(edits):
        name = f"quiet-{i}"
        sent[name] = time.perf_counter()
        runner.enqueue(key(ONE_QUEUE if one_queue else "quiet", name), Priority.LIVE)
        await asyncio.sleep(GAP)
    await hook.all_ended.wait()
    await runner.close()
    latencies = sorted(hook.ended[name] - at for name, at in sent.items())
    return Result(
        p50=statistics.median(latencies),
        p99=latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))],
        drained=max(t for n, t in hook.ended.items() if n.startswith("noisy")) - started,
        samples=len(latencies),
    )


def report(*, flood: int, hook_ms: float, edits: int) -> dict[str, Result]:
    header(
        f"fresh edits of one controller while another has {flood:,} parents queued "
        f"(concurrency {CONCURRENCY}, hook {hook_ms:g} ms, {edits} edits {GAP * 1000:g} ms apart)"
    )
    results: dict[str, Result] = {}
    for mode in ("one queue", "fair", "limited"):
        results[mode] = asyncio.run(
            run(flood=flood, hook_seconds=hook_ms / 1000, mode=mode, edits=edits)
        )
    base = results["one queue"]
    labels = {
        "one queue": "baseline, one queue",
        "fair": "fair (a queue per controller)",
        "limited": f"fair, noisy limited to {NOISY_LIMIT} at once",
    }
    for mode, label in labels.items():
        r = results[mode]
        row(f"{label}: edit p50", r.p50 * 1000, "ms")
        row(f"{label}: edit p99", r.p99 * 1000, "ms", target="" if r is base else "< 1000 ms")
        row(f"{label}: flood drained in", r.drained, "s")
        if r is not base:
            row(f"{label}: baseline p99 / this p99", base.p99 / r.p99, "x")
    return results


def main(quick: bool = False) -> None:
    configure(fmt="console", level="warning")
    report(flood=500 if quick else 2_000, hook_ms=5.0, edits=20 if quick else 50)


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench.fairness")
    parser.add_argument("--flood", type=int, default=20_000, help="parents queued at once")
    parser.add_argument("--hook-ms", type=float, default=5.0, help="hook answer time")
    parser.add_argument("--edits", type=int, default=100, help="fresh edits timed")
    args = parser.parse_args(argv)
    configure(fmt="console", level="warning")
    report(flood=args.flood, hook_ms=args.hook_ms, edits=args.edits)


if __name__ == "__main__":
    cli()
