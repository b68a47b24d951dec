"""``manager.term.grace.first_assignment``: a new term waits only as long as a previous term's
workers could still act."""

from __future__ import annotations

import dataclasses

import pytest

from manager.election.elector import PreviousTerm
from manager.settings import CoordinatorSettings
from manager.term.grace import first_assignment

DEFAULTS = CoordinatorSettings(
    worker_timeout=5.0, heartbeat_interval=1.0, lease_duration=15.0, renew_deadline=10.0
)
SHORT_LEASE = dataclasses.replace(DEFAULTS, lease_duration=12.0)


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
    timings: CoordinatorSettings,
    previous: PreviousTerm | None,
    own: int,
    seconds: float,
    expected: int,
    join_within: float,
) -> None:
    settings = dataclasses.replace(timings, own_workers=own)
    grace = first_assignment(settings, previous=previous)
    assert (grace.seconds, grace.expected_workers, grace.join_within) == (
        seconds,
        expected,
        join_within,
    )
    assert grace.reason
