from __future__ import annotations

import pytest

from manager.settings import from_args


def test_defaults_follow_metacontroller_and_client_go() -> None:
    s = from_args([])
    assert s.metrics_address == ":9999" and s.qps == 0 and s.burst == 0
    assert not s.leader_election and s.leader_election_id == "metashard"
    assert (s.lease_duration, s.renew_deadline, s.retry_period) == (15.0, 10.0, 2.0)
    assert s.discovery_interval == 30.0 and s.cache_flush_interval == 1800.0


def test_go_durations_and_flags() -> None:
    s = from_args(
        [
            "--leader-election",
            "--discovery-interval",
            "20s",
            "--cache-flush-interval",
            "30m",
            "--client-go-qps",
            "50",
            "--heartbeat-interval",
            "500ms",
            "--worker-timeout",
            "2s",
        ]
    )
    assert s.leader_election and s.discovery_interval == 20.0
    assert s.cache_flush_interval == 1800.0 and s.qps == 50 and s.burst == 100
    assert (s.heartbeat_interval, s.worker_timeout) == (0.5, 2.0)
    assert from_args(["--leader-election=false"]).leader_election is False


@pytest.mark.parametrize(
    "argv",
    [
        ["--discovery-interval", "soon"],
        ["--worker-timeout", "1s"],
        ["--client-go-qps", "-1"],
        ["--bind", "0.0.0.0:7070"],
        ["--bind", "tcp://"],
        ["--leader-election", "--bind", "http://x:1"],
    ],
)
def test_bad_values_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        from_args(argv)


def test_metacontroller_flags_reach_the_coordinator_settings() -> None:
    s = from_args(
        [
            "--zap-log-level=4",
            "--zap-encoder=json",
            "--health-probe-bind-address=:8081",
            "--metrics-address=:9999",
            "--leader-election",
            "--leader-election-id=metacontroller",
            "--leader-election-resource-lock=leases",
            "--discovery-interval=20s",
            "--workers=5",
        ]
    )
    assert (s.log_level, s.log_format) == ("debug", "json")
    assert (s.metrics_address, s.health_address) == (":9999", ":8081")
    assert s.leader_election and s.leader_election_id == "metacontroller"
    assert s.discovery_interval == 20.0
    assert s.notices == (
        "--workers/--concurrency has no effect on a coordinator (workers reconcile)",
    )
