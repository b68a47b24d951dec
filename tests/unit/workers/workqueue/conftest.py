"""Fixtures for the work queue tests: a fake clock, a private registry, a queue on both."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry

from proto.runtime.clock import FakeClock
from workers.workqueue import PrometheusMetricsProvider, WorkQueue

Settle = Callable[[], Awaitable[None]]


async def _settle() -> None:
    # Let every task that can run do so: a released item travels through a few hops
    # (clock sleeper -> asyncio.wait -> releaser -> getter); this is far more than enough.
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.fixture
def settle() -> Settle:
    return _settle


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1000.0)


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest_asyncio.fixture
async def queue(clock: FakeClock, registry: CollectorRegistry) -> AsyncIterator[WorkQueue[str]]:
    q: WorkQueue[str] = WorkQueue(
        "test", clock=clock, metrics=PrometheusMetricsProvider(registry=registry)
    )
    yield q
    q.shut_down()
    await _settle()
