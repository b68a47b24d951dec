"""Turning what a link receives into messages, and accounting for what it drops.

Both link ends (the coordinator's ROUTER, a worker's DEALER) receive multipart messages whose
payload must be exactly one frame. ``Intake.accept(peer, parts)``:
- returns the decoded message of a single valid frame;
- otherwise returns ``None`` after counting the drop in ``counter`` (a prometheus ``Counter``
  named ``DROPPED_FRAMES_METRIC`` with the label ``reason``, a ``FrameError`` reason; a wrong
  part count is ``malformed``; every reason's series exists from the start, at 0) and logging
  a warning, but only the first time a given peer sends a given
  kind of bad frame: a misbehaving peer cannot flood the log, and every drop is still counted;
- never raises: a bad frame never stops a receive loop.

The pairs already logged are kept in insertion order, at most ``remember`` of them; past that
the oldest are forgotten (and may be logged again), so peers with ever-new identities cannot
grow memory without bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

from prometheus_client import CollectorRegistry, Counter

from proto.wire.codec import DEFAULT_MAX_FRAME_SIZE, decode
from proto.wire.errors import FRAME_ERROR_REASONS, FrameError, FrameErrorReason
from proto.wire.messages import Message

DROPPED_FRAMES_METRIC: Final = "metashard_wire_frames_dropped_total"
DROPPED_FRAMES_HELP: Final = "Wire frames received and dropped because they were invalid, by reason"


def dropped_frames_counter(registry: CollectorRegistry) -> Counter:
    """The ``metashard_wire_frames_dropped_total{reason}`` counter; create it once per registry
    and hand it to every link of the process."""
    return Counter(DROPPED_FRAMES_METRIC, DROPPED_FRAMES_HELP, ["reason"], registry=registry)


class WarningLogger(Protocol):
    """The part of a structlog logger the intake uses."""

    def warning(self, event: str, /, **kw: Any) -> Any: ...


class Series(Protocol):
    """One labelled series of a prometheus ``Counter``, as counted here."""

    def inc(self, amount: float = 1) -> None: ...


class DropCounter(Protocol):
    """The part of a labelled prometheus ``Counter`` the intake uses."""

    def labels(self, *values: str) -> Series: ...


class Intake:
    """Decodes the frames one link receives; counts every bad one, logs each kind once per peer."""

    def __init__(
        self,
        *,
        log: WarningLogger,
        counter: DropCounter | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        remember: int = 4096,
    ) -> None:
        self._log = log
        self._series = {
            reason: counter.labels(reason) if counter is not None else None
            for reason in FRAME_ERROR_REASONS
        }
        self._max_frame_size = max_frame_size
        self._remember = remember
        self._logged: dict[tuple[str, FrameErrorReason], None] = {}

    def accept(self, peer: str, parts: Sequence[bytes]) -> Message | None:
        """The message in ``parts`` (the payload frames from ``peer``), or ``None`` if dropped."""
        try:
            if len(parts) != 1:
                raise FrameError("malformed", f"expected 1 frame, got {len(parts)}")
            return decode(parts[0], max_size=self._max_frame_size)
        except FrameError as e:
            self._drop(peer, e, sum(len(p) for p in parts))
            return None

    def _drop(self, peer: str, error: FrameError, size: int) -> None:
        series = self._series[error.reason]
        if series is not None:
            series.inc()
        pair = (peer, error.reason)
        if pair in self._logged:
            return
        if len(self._logged) >= self._remember:
            del self._logged[next(iter(self._logged))]
        self._logged[pair] = None
        self._log.warning(
            "wire frame dropped",
            peer=peer,
            reason=error.reason,
            detail=error.message,
            size=size,
            note="further frames of this reason from this peer are counted, not logged",
        )
