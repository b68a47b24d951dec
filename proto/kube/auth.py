"""The ``Authorization`` header of every request, kept fresh.

- A fixed value (kubeconfig token, basic auth) is sent as it is.
- A token file (in-cluster service account; projected tokens rotate, about hourly) is re-read
  every ``period`` seconds (60, like client-go), so a rotated token is picked up within a
  minute; kubeconfig auth plugins (exec, OIDC) are asked again on the same schedule.
- ``invalidate()`` (after a 401) makes the next request re-read at once.
- A failed re-read keeps the last good value and is retried at the next period: a token file
  briefly missing during rotation must not fail requests that would still be accepted.
- Re-reads run in a thread (an exec plugin may take seconds) and one at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from proto.kube.cluster import ClusterConfig
from proto.runtime.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

TOKEN_REREAD_SECONDS = 60.0


def read_token_file(path: str) -> str | None:
    """``Bearer <token>`` from a token file (``None`` when it is empty)."""
    token = Path(path).read_text().strip()
    return f"Bearer {token}" if token else None


class Authorization:
    """Holds the current header value; ``await header()`` before each request."""

    def __init__(
        self,
        *,
        value: str | None = None,
        source: Callable[[], str | None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        period: float = TOKEN_REREAD_SECONDS,
    ) -> None:
        self._value = value
        self._source = source
        self._clock = clock
        self._period = period
        # With a source, the first request reads it (unless a value was given to start with).
        self._next = clock.now() + period if value is not None else float("-inf")
        self._lock = asyncio.Lock()

    @classmethod
    def from_config(cls, config: ClusterConfig, *, clock: Clock = SYSTEM_CLOCK) -> Authorization:
        if config.token_file is not None:
            path = config.token_file
            return cls(source=lambda: read_token_file(path), clock=clock)
        return cls(value=config.authorization, source=config.refresh_authorization, clock=clock)

    async def header(self) -> str | None:
        if self._source is None or self._clock.now() < self._next:
            return self._value
        async with self._lock:
            if self._clock.now() >= self._next:  # not refreshed while we waited
                await self._refresh()
        return self._value

    def invalidate(self) -> bool:
        """Re-read before the next request; ``False`` if there is nothing to re-read."""
        if self._source is None:
            return False
        self._next = float("-inf")
        return True

    async def _refresh(self) -> None:
        assert self._source is not None
        try:
            value = await asyncio.to_thread(self._source)
        except Exception as exc:
            log.warning("could not refresh the API credentials, keeping the last ones: %s", exc)
        else:
            if value is not None:
                self._value = value
        self._next = self._clock.now() + self._period
