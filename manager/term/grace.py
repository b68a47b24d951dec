"""How long a new term waits before its first assignment: only as long as workers of a previous
term could still act.

A worker stops starting reconciles and writes (it fences) once it has heard nothing from its
coordinator for ``worker_timeout``; a coordinator whose term ended stops talking to it. So a
new term must wait until ``worker_timeout`` has passed since the previous term ended, unless
it knows no previous term's worker can reach it. ``first_assignment(...)`` says how long, in
seconds from the start of the term:

- leader election, Lease created by this coordinator (``PreviousTerm.NONE``): 0;
- leader election, Lease taken over after it expired (``PreviousTerm.EXPIRED``): the previous
  leader stopped renewing at least ``lease_duration`` ago and its term ended at most
  ``renew_deadline`` after its last renewal (same configuration assumed), so what is left of
  ``worker_timeout`` after ``lease_duration - renew_deadline``, at least 0;
- leader election, Lease handed over (``PreviousTerm.HANDED_OVER``: released by a leader
  whose workers all confirmed they had stopped): 0;
- leader election, Lease released without that, or still naming this identity: the full
  ``worker_timeout - heartbeat_interval``;
- no leader election: 0 when the workers are this process's own children on a private endpoint
  (``metashard run``: no other worker can connect), else the full wait.

``Grace.expected_workers``: with its own workers, the first assignment also waits until that
many have joined, for at most ``join_within`` seconds, so that slots are spread once instead
of handed to the first worker and then moved.
"""

from __future__ import annotations

from dataclasses import dataclass

from manager.election.elector import PreviousTerm
from manager.settings import CoordinatorSettings


@dataclass(frozen=True, slots=True)
class Grace:
    seconds: float
    """From the start of the term before the first assignment."""
    expected_workers: int = 0
    """Wait (at most ``join_within``) until this many workers joined; 0: do not wait."""
    join_within: float = 0.0
    reason: str = ""
    """Why, for the log."""


def first_assignment(settings: CoordinatorSettings, *, previous: PreviousTerm | None) -> Grace:
    """The wait before a term's first assignment, given the coordinator's timings and how
    many workers it started on a private endpoint (``own_workers``; 0: workers are separate
    deployments). ``previous``: how the previous term ended (``None``: no leader election)."""
    own_workers = settings.own_workers
    full = max(0.0, settings.worker_timeout - settings.heartbeat_interval)
    if previous is None and own_workers:
        seconds, reason = 0.0, "the workers are this process's own"
    elif previous is None:
        seconds, reason = full, "no leader election: a previous coordinator's workers may act"
    elif previous is PreviousTerm.NONE:
        seconds, reason = 0.0, "the Lease is new: there was no previous term"
    elif previous is PreviousTerm.HANDED_OVER:
        seconds, reason = 0.0, "the previous leader's workers confirmed they stopped"
    elif previous is PreviousTerm.EXPIRED:
        ended = settings.lease_duration - settings.renew_deadline
        seconds = max(0.0, settings.worker_timeout - ended)
        reason = f"the previous term ended at least {ended:g} s ago (its Lease expired)"
    else:
        seconds = full
        reason = f"the Lease was {previous.value}: the previous term's workers may still act"
    return Grace(seconds, own_workers, full if own_workers else 0.0, reason)
