"""Helpers for tests on real ZeroMQ sockets (both link ends use them)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import zmq.asyncio

T = TypeVar("T")


async def context() -> AsyncIterator[zmq.asyncio.Context]:
    """A private context for one test, destroyed with linger 0 after it (a fixture body)."""
    ctx = zmq.asyncio.Context()
    yield ctx
    ctx.destroy(linger=0)


async def within(aw: Awaitable[T], seconds: float = 5.0) -> T:
    """``await aw``, failing the test instead of hanging if it takes longer than ``seconds``."""
    return await asyncio.wait_for(aw, seconds)
