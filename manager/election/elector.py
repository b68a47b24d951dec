"""Leader election on a ``coordination.k8s.io/v1`` Lease: client-go's algorithm.

``LeaderElector.run()`` is a candidate until cancelled: it acquires the lease, leads while
it renews it, and goes back to candidacy when a renewal misses the deadline.

Algorithm (client-go ``tools/leaderelection``):

- **Candidacy.** Try to acquire at once, then every ``retry_period`` stretched by a random
  factor in [1, 2.2) (``JitterUntil`` with factor 1.2): 2-4.4 s with the defaults.
- **One attempt** (``tryAcquireOrRenew``). Fast path for the current leader: update the
  cached Lease with a new renewTime, the cached resourceVersion as precondition; on any
  failure count ``leader_election_slowpath_total`` and take the slow path. Slow path: GET the
  Lease (CREATE it when missing); when its spec differs from the last one seen, remember it
  and the **local monotonic time** of that observation. If another identity holds it and
  ``observed + leaseDurationSeconds`` lies in the future, give up for this round. Otherwise
  update it with this identity as holder; only one candidate's resourceVersion precondition
  can win.
- **Observed time, not timestamps.** acquireTime/renewTime are written (MicroTime) but never
  compared with the local clock, so clock skew between candidates does not matter; a
  different clock *rate* does (size the lease for it).
- **Leading.** Every ``retry_period`` the leader renews, retrying every ``retry_period`` for
  at most ``renew_deadline`` (each attempt is bounded by what is left of it). Missing the
  deadline, or seeing another holder, ends leadership.
- **Epoch.** The term's ``leaseTransitions``: 0 for the leader that created the Lease, and
  every new term adds one transition. A term is new whenever this elector was not leading,
  including when the Lease still names it (client-go would keep the count there; counting
  it keeps epochs strictly increasing across terms). Deleting the Lease restarts the count:
  don't.
- **Callbacks.** ``on_started_leading(epoch)`` runs as its own task when a term starts, so
  it may run for the whole term. When the term ends, that task is cancelled (if still
  running) and awaited, then ``on_stopped_leading()`` is awaited; exceptions from either are
  logged, never raised. ``is_leader`` is False from the moment the term ends.
- **Release on cancel.** Cancelling ``run()`` while leading ends the term as above, and
  *after* the stopped callback returned (so all work guarded by the lease is over) writes
  the Lease with an empty holder and ``leaseDurationSeconds: 1``, keeping the transition
  count, retrying on conflict for up to ``renew_deadline``. Candidates take it on their next
  try, within about one retry period instead of a whole lease duration. With
  ``release_on_cancel=False`` the lease simply expires.
- ``leader_election_master_status{name}`` is 1 exactly while a term lasts.
- **How the previous term ended** (``previous_term``, set before a term starts): ``NONE`` when
  this elector created the Lease; ``EXPIRED`` when it took over a holder it had observed
  unchanged for that holder's whole lease duration; ``HANDED_OVER`` when the holder released
  it saying the term's workers had stopped (``workers_stopped()`` was true when it released:
  the annotation ``metashard.io/stopped-term`` names the released term's transition count);
  ``RELEASED`` when it released it without saying so; ``UNKNOWN`` when the Lease already
  named this identity. Only ``NONE`` and ``EXPIRED``
  bound when the previous leader stopped acting: ``EXPIRED`` means it stopped renewing at least
  a lease duration ago, so (with the same configuration) its term ended at least
  ``lease_duration - renew_deadline`` ago.

What this needs from the rest of the process: the elector shares the event loop, so a renew
can only be as punctual as the loop. Everything else on the loop must yield often: no
synchronous step may take a sizeable part of ``lease_duration - renew_deadline`` (5 s with
the defaults; CPU-heavy work such as 3-way merges belongs in worker processes, bulk decodes
must be chunked). A stalled loop delays the renewals *and* the stop, and the old leader
may then act after a standby has taken over. Writes guarded by the lease should also carry
resourceVersion preconditions.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import orjson

from manager.election.config import JITTER_FACTOR, ElectionConfig
from manager.election.lease import LeaderRecord, Lease, LeaseLock, micro_time
from manager.election.metrics import NO_LEADER_METRICS, LeaderMetrics
from proto.kube.errors import Conflict, KubeError
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.deadline import within
from proto.runtime.logs import get_logger

STOPPED_TERM = "metashard.io/stopped-term"
"""On a released Lease: the transition count of the term whose workers confirmed they stopped."""


StartedLeading = Callable[[int], Awaitable[None]]
StoppedLeading = Callable[[], Awaitable[None]]


def _wall_now() -> datetime:
    return datetime.now(UTC)


class PreviousTerm(Enum):
    """How the term before the one starting ended (see the module docstring)."""

    NONE = "none"
    EXPIRED = "expired"
    HANDED_OVER = "handed over"
    RELEASED = "released"
    UNKNOWN = "unknown"


class LeaderElector:
    """One candidate for one Lease (see the module docstring)."""

    def __init__(
        self,
        lock: LeaseLock,
        config: ElectionConfig,
        *,
        on_started_leading: StartedLeading,
        on_stopped_leading: StoppedLeading,
        clock: Clock = SYSTEM_CLOCK,
        wall_clock: Callable[[], datetime] = _wall_now,
        metrics: LeaderMetrics = NO_LEADER_METRICS,
        rng: random.Random | None = None,
        workers_stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        self._lock = lock
        self.config = config
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._clock = clock
        self._wall = wall_clock
        self._metrics = metrics
        self._rng = rng if rng is not None else random.Random()
        self._workers_stopped = workers_stopped
        # Built here, not at import: a logger bound before logging is configured ignores it.
        self._log = get_logger(__name__, lease=lock.description, identity=config.identity)
        self._lease: Lease | None = None
        self._record: LeaderRecord | None = None
        self._record_bytes = b""
        self._observed_at = 0.0
        self._leading = False
        self._epoch: int | None = None
        self._candidate_failure: str | None = None
        self._previous = PreviousTerm.UNKNOWN

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def is_leader(self) -> bool:
        """True while a term lasts (between the started and the stopped callback)."""
        return self._leading

    @property
    def epoch(self) -> int | None:
        """The current term's epoch, None when not leading."""
        return self._epoch if self._leading else None

    @property
    def previous_term(self) -> PreviousTerm:
        """How the term before the current (or last) one ended."""
        return self._previous

    async def run(self) -> None:
        """Acquire, lead, repeat; until cancelled (then release, if configured)."""
        self._metrics.leading(False)
        while True:
            await self._acquire()
            await self._lead()

    # --- terms ---------------------------------------------------------------------------

    async def _acquire(self) -> None:
        self._log.info("waiting to acquire the lease")
        retry = self.config.retry_period
        while True:
            if await self._bounded_attempt(self.config.renew_deadline):
                return
            await self._clock.sleep(retry * (1.0 + JITTER_FACTOR * self._rng.random()))

    async def _lead(self) -> None:
        assert self._record is not None
        epoch = self._epoch = self._record.transitions
        self._leading = True
        self._metrics.leading(True)
        self._log.info("started leading", epoch=epoch)
        started = asyncio.get_running_loop().create_task(
            self._started(epoch), name=f"leading {self._lock.description} epoch {epoch}"
        )
        cancelled = False
        try:
            await self._renew()
            self._log.warning("lost the lease; stopped leading", epoch=epoch)
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            self._leading = False
            self._metrics.leading(False)
            await self._stop(started)
            if cancelled and self.config.release_on_cancel:
                await self._release()

    async def _started(self, epoch: int) -> None:
        try:
            await self._on_started(epoch)
        except asyncio.CancelledError:
            raise
        except Exception:
            self._log.exception("the started-leading callback failed", epoch=epoch)

    async def _stop(self, started: asyncio.Task[None]) -> None:
        """End the term's work: the started task, then the stopped callback."""
        if not started.done():
            started.cancel()
        await asyncio.wait((started,))
        try:
            await self._on_stopped()
        except Exception:
            self._log.exception("the stopped-leading callback failed")

    async def _renew(self) -> None:
        """Renew every retry period; return when a renewal misses the deadline."""
        config = self.config
        while True:
            deadline = self._clock.now() + config.renew_deadline
            while True:
                remaining = deadline - self._clock.now()
                if remaining <= 0:
                    return
                if await self._bounded_attempt(remaining):
                    break
                if self._record is not None and self._record.holder != config.identity:
                    return  # somebody else holds it now: stop at once
                await self._clock.sleep(min(config.retry_period, remaining))
            await self._clock.sleep(config.retry_period)

    async def _release(self) -> None:
        """Hand the lease over: empty holder, 1 s duration, same transition count."""
        identity = self.config.identity
        deadline = self._clock.now() + self.config.renew_deadline
        stopped = self._workers_stopped()
        while self._lease is not None and self._record is not None:
            if self._record.holder != identity:
                return
            now = micro_time(self._wall())
            released = LeaderRecord(
                holder="",
                lease_duration_seconds=1,
                acquire_time=now,
                renew_time=now,
                transitions=self._record.transitions,
            )
            remaining = deadline - self._clock.now()
            try:
                if remaining <= 0:
                    raise TimeoutError("the renew deadline passed")
                body = self._lease
                if stopped:
                    body = _annotated(body, STOPPED_TERM, str(self._record.transitions))
                lease = await within(self._clock, remaining, self._lock.update(body, released))
            except Conflict:
                # Someone wrote the lease since we read it: re-read; still ours -> retry.
                if await self._read(remaining) is None:
                    return
                continue
            except (KubeError, TimeoutError) as exc:
                self._log.warning("could not release the lease", error=str(exc))
                return
            self._observe(lease)
            self._log.info("released the lease")
            return

    async def _read(self, remaining: float) -> Lease | None:
        try:
            lease = await within(self._clock, remaining, self._lock.get())
        except (KubeError, TimeoutError) as exc:
            self._log.warning("could not read the lease", error=str(exc))
            return None
        if lease is not None:
            self._observe(lease)
        return lease

    # --- one attempt (tryAcquireOrRenew) ------------------------------------------------

    async def _bounded_attempt(self, seconds: float) -> bool:
        try:
            ok = await within(self._clock, seconds, self._attempt())
        except TimeoutError:
            ok = False
            self._attempt_failed("Timeout", "the attempt outlasted the renew deadline")
        return ok

    async def _attempt(self) -> bool:
        identity = self.config.identity
        duration = int(self.config.lease_duration)
        now = micro_time(self._wall())
        record = self._record
        if self._leading and self._lease is not None and record is not None and self._valid():
            renewed = LeaderRecord(identity, duration, record.acquire_time, now, record.transitions)
            try:
                self._observe(await self._lock.update(self._lease, renewed))
                return True
            except KubeError as exc:
                self._metrics.slowpath()
                self._log.debug("fast-path renewal failed", error=str(exc))
        try:
            lease = await self._lock.get()
            if lease is None:
                created = LeaderRecord(identity, duration, now, now, 0)
                self._observe(await self._lock.create(created))
                self._previous = PreviousTerm.NONE
                self._candidate_ok()
                return True
            self._observe(lease)
            record = self._record
            assert record is not None
            if record.holder and record.holder != identity and self._valid():
                self._candidate_ok()
                return False
            previous = self._previous
            if record.holder == identity and self._leading:
                taken = LeaderRecord(
                    identity, duration, record.acquire_time, now, record.transitions
                )
            else:
                taken = LeaderRecord(identity, duration, now, now, record.transitions + 1)
                if not record.holder:
                    stopped = _annotations(lease).get(STOPPED_TERM) == str(record.transitions)
                    previous = PreviousTerm.HANDED_OVER if stopped else PreviousTerm.RELEASED
                elif record.holder == identity:
                    previous = PreviousTerm.UNKNOWN
                else:
                    previous = PreviousTerm.EXPIRED  # another holder, observed past its duration
            self._observe(await self._lock.update(lease, taken))
            self._previous = previous
        except KubeError as exc:
            self._attempt_failed(type(exc).__name__, str(exc))
            return False
        self._candidate_ok()
        return True

    def _valid(self) -> bool:
        """The observed record is still within its lease duration (local monotonic time)."""
        record = self._record
        if record is None:
            return False
        return self._observed_at + record.lease_duration_seconds > self._clock.now()

    def _observe(self, lease: Lease) -> None:
        self._lease = lease
        spec = lease.get("spec")
        raw = orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)
        if raw != self._record_bytes:
            self._record_bytes = raw
            self._record = LeaderRecord.from_lease(lease)
            self._observed_at = self._clock.now()

    def _attempt_failed(self, reason: str, message: str) -> None:
        """Conflicts are part of the algorithm; anything else is logged once per reason."""
        if reason in ("Conflict", "AlreadyExists"):
            self._log.debug("lost a race for the lease", error=message)
            return
        if reason != self._candidate_failure:
            self._candidate_failure = reason
            self._log.warning("lease attempt failed", reason=reason, error=message)

    def _candidate_ok(self) -> None:
        if self._candidate_failure is not None:
            self._log.info("lease attempts work again")
            self._candidate_failure = None


def _annotations(lease: Lease) -> dict[str, Any]:
    metadata = lease.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return annotations if isinstance(annotations, dict) else {}


def _annotated(lease: Lease, key: str, value: str) -> Lease:
    metadata = lease.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    metadata["annotations"] = {**_annotations(lease), key: value}
    return {**lease, "metadata": metadata}
