"""The clock the client waits on: rate limiting, Retry-After waits and token re-reads.

Everything in ``proto.kube`` that waits or measures elapsed time takes a ``Clock`` (default
``SYSTEM_CLOCK``), so tests step a fake clock instead of sleeping.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a monotonic scale."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock's scale."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic`` and ``asyncio.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM_CLOCK = SystemClock()
