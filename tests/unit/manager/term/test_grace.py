"""``manager.term.grace.first_assignment``: a new term waits only as long as a previous term's
workers could still act."""

from __future__ import annotations

import pytest

from manager.election.elector import PreviousTerm
from manager.term.grace import Timings, first_assignment

DEFAULTS = Timings(
    worker_timeout=5.0, heartbeat_interval=1.0, lease_duration=15.0, renew_deadline=10.0
)
SHORT_LEASE = Timings(
    worker_timeout=5.0, heartbeat_interval=1.0, lease_duration=12.0, renew_deadline=10.0
)


@pytest.mark.parametrize(
    ("timings", "previous", "own", "seconds", "expected", "join_within"),
    [
        # No leader election: only a private endpoint rules out other workers.
        (DEFAULTS, None, 0, 4.0, 0, 0.0),
        (DEFAULTS, None, 3, 0.0, 3, 4.0),
        # A new Lease: nobody led before.
        (DEFAULTS, PreviousTerm.NONE, 0, 0.0, 0, 0.0),
        (DEFAULTS, PreviousTerm.NONE, 2, 0.0, 2, 4.0),
        # Expired: the old term ended >= 15 - 10 = 5 s ago, all of the worker timeout.
        (DEFAULTS, PreviousTerm.EXPIRED, 0, 0.0, 0, 0.0),
        # With a shorter lease only 2 s are known to have passed: 3 s are left.
        (SHORT_LEASE, PreviousTerm.EXPIRED, 0, 3.0, 0, 0.0),
        # Handed over: the old leader's workers confirmed they stopped.
        (DEFAULTS, PreviousTerm.HANDED_OVER, 0, 0.0, 0, 0.0),
        # A release or our own old record says nothing about the workers.
        (DEFAULTS, PreviousTerm.RELEASED, 0, 4.0, 0, 0.0),
        (DEFAULTS, PreviousTerm.UNKNOWN, 2, 4.0, 2, 4.0),
    ],
)
def test_the_wait_before_the_first_assignment(
    timings: Timings,
    previous: PreviousTerm | None,
    own: int,
    seconds: float,
    expected: int,
    join_within: float,
) -> None:
    grace = first_assignment(timings, previous=previous, own_workers=own)
    assert (grace.seconds, grace.expected_workers, grace.join_within) == (
        seconds,
        expected,
        join_within,
    )
    assert grace.reason
