"""Work queue and rate limiter throughput, each against a plain baseline run alongside.

What is counted: one *op* is one call of ``add``, ``get`` or ``done`` (a deduplicated add
counts as an op too), so a full add + get + done cycle is 3 ops. The target is 100k ops/s.

- Cycle, one consumer: ``add(key)``, ``await get()``, ``done(key)``, keys distinct. Baseline:
  ``asyncio.Queue`` with a set for dedup (``put_nowait`` if not in the set, ``await get()``,
  discard from the set), the least a deduplicating queue must do.
- Fan-out, four consumers: a burst of keys, each added twice (the second add deduplicated),
  drained by four tasks that yield once between get and done, as a reconcile would. Same
  baseline with four consumers.
- Both work-queue figures are printed with no-op metrics and with Prometheus metrics.
- ``default_controller_rate_limiter().when(key)`` calls/s over 1000 keys. Baseline: a
  per-key failure counter bump plus one monotonic clock read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from prometheus_client import CollectorRegistry

from loadtest.bench._report import header, rate, row
from workers.workqueue import PrometheusMetricsProvider, WorkQueue
from workers.workqueue.ratelimiters import default_controller_rate_limiter

BATCH = 1000
CONSUMERS = 4
KEYS = [("CompositeController", "demo", f"ns-{i % 7}", f"parent-{i}") for i in range(BATCH)]


class DedupQueue:
    """The baseline: an asyncio.Queue plus a set so a queued key is not queued twice."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[str, ...]] = asyncio.Queue()
        self.queued: set[tuple[str, ...]] = set()

    def add(self, key: tuple[str, ...]) -> None:
        if key not in self.queued:
            self.queued.add(key)
            self.queue.put_nowait(key)

    async def get(self) -> tuple[str, ...]:
        key = await self.queue.get()
        self.queued.discard(key)
        return key

    def done(self, key: tuple[str, ...]) -> None:
        pass

    def __len__(self) -> int:
        return self.queue.qsize()


def work_queue(metrics: bool) -> WorkQueue[tuple[str, ...]]:
    provider = PrometheusMetricsProvider(registry=CollectorRegistry()) if metrics else None
    return WorkQueue("bench", metrics=provider)


async def cycles(queue: Any) -> None:
    for key in KEYS:
        queue.add(key)
        got = await queue.get()
        queue.done(got)


async def fan_out(queue: Any) -> None:
    async def consume() -> None:
        while len(queue):
            key = await queue.get()
            await asyncio.sleep(0)
            queue.done(key)

    for key in KEYS:
        queue.add(key)
    for key in KEYS:
        queue.add(key)
    await asyncio.gather(*(consume() for _ in range(CONSUMERS)))


def compare(
    loop: asyncio.AbstractEventLoop,
    scenario: Callable[[Any], Coroutine[Any, Any, None]],
    *,
    ops_per_key: int,
    seconds: float,
    repeat: int,
    target: str = "",
) -> None:
    """Print the ops/s of ``scenario`` on the baseline, then on work queues."""

    def ops(queue: Any) -> float:
        batches = rate(
            lambda: loop.run_until_complete(scenario(queue)), seconds=seconds, repeat=repeat
        )
        return batches * BATCH * ops_per_key

    base = ops(DedupQueue())
    row("asyncio.Queue + dedup set (baseline)", base, "ops/s")
    for metrics in ("no-op", "Prometheus"):
        queue = work_queue(metrics == "Prometheus")
        row(f"WorkQueue, {metrics} metrics", ops(queue), "ops/s", baseline=base, target=target)
        queue.shut_down()


def main(quick: bool) -> None:
    seconds, repeat = (0.2, 3) if quick else (1.0, 5)
    loop = asyncio.new_event_loop()
    try:
        header("work queue, one consumer: add + get + done (3 ops per cycle)")
        compare(
            loop, cycles, ops_per_key=3, seconds=seconds, repeat=repeat, target=">= 100,000 ops/s"
        )
        header(f"work queue, {CONSUMERS} consumers, each key added twice (4 ops per key)")
        compare(loop, fan_out, ops_per_key=4, seconds=seconds, repeat=repeat)
    finally:
        loop.close()

    header("rate limiter: when(key) over 1000 keys")
    failures: dict[tuple[str, ...], int] = {}

    def bump() -> None:
        for key in KEYS:
            failures[key] = failures.get(key, 0) + 1
            time.monotonic()

    base = rate(bump, seconds=seconds, repeat=repeat) * BATCH
    row("failure counter + clock read (baseline)", base, "calls/s")
    limiter = default_controller_rate_limiter()

    def when() -> None:
        for key in KEYS:
            limiter.when(key)

    row(
        "default_controller_rate_limiter().when()",
        rate(when, seconds=seconds, repeat=repeat) * BATCH,
        "calls/s",
        baseline=base,
    )
