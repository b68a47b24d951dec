"""The leader election's timings and identity (``manager.election.elector`` runs it).

Kept apart from the elector so that command lines can check the flags before the Kubernetes
client is imported.
"""

from __future__ import annotations

import math
import socket
import uuid
from dataclasses import dataclass, field

JITTER_FACTOR = 1.2


def default_identity() -> str:
    """``<hostname>_<uuid4>``: unique even for two processes of one pod."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class ElectionConfig:
    """Timings (seconds) and identity; defaults are client-go's 15 / 10 / 2 s."""

    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if self.retry_period <= 0:
            raise ValueError(f"retry_period must be positive, got {self.retry_period}")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(
                f"lease_duration ({self.lease_duration} s) must be greater than "
                f"renew_deadline ({self.renew_deadline} s)"
            )
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(
                f"renew_deadline ({self.renew_deadline} s) must be greater than "
                f"{JITTER_FACTOR} x retry_period ({self.retry_period} s)"
            )
        if self.lease_duration != math.floor(self.lease_duration):
            raise ValueError(
                f"lease_duration must be a whole number of seconds (leaseDurationSeconds), "
                f"got {self.lease_duration}"
            )
