from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from manager.settings import CoordinatorSettings, add_arguments, from_args, from_namespace
from proto.runtime.curve import generate, server_keys


def test_defaults_follow_metacontroller_and_client_go() -> None:
    s = from_args(["--insecure-worker-link"])
    assert s.bind == "tcp://0.0.0.0:7070" and s.curve is None
    assert s.common.metrics_address == ":9999" and s.common.qps == 0 and s.common.burst == 0
    assert not s.leader_election and s.leader_election_id == "metashard"
    assert (s.lease_duration, s.renew_deadline, s.retry_period) == (15.0, 10.0, 2.0)
    assert s.discovery_interval == 30.0 and s.cache_flush_interval == 1800.0
    assert s.narrow_watches


def test_go_durations_and_flags() -> None:
    s = from_args(
        [
            "--insecure-worker-link",
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
    assert s.cache_flush_interval == 1800.0 and s.common.qps == 50 and s.common.burst == 100
    assert (s.heartbeat_interval, s.worker_timeout) == (0.5, 2.0)
    assert from_args(["--leader-election=false", "--insecure-worker-link"]).leader_election is False
    assert not from_args(["--narrow-watches=false", "--insecure-worker-link"]).narrow_watches


@pytest.mark.parametrize(
    "argv",
    [
        ["--discovery-interval", "soon"],
        ["--worker-timeout", "1s"],
        ["--client-go-qps", "-1"],
        ["--bind", "0.0.0.0:7070"],
        ["--bind", "tcp://"],
        ["--leader-election", "--bind", "http://x:1"],
        ["--narrow-watches=maybe"],
    ],
)
def test_bad_values_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        from_args(argv)


@pytest.mark.parametrize(
    ("bind", "says"),
    [
        ("tcp://0.0.0.0:7070", "is reachable from other hosts"),
        ("tcp://10.1.2.3:7070", "is reachable from other hosts"),
        ("tcp://127.0.0.1:7070", "would let every account on this host join the worker link"),
        ("tcp://localhost:7070", "would let every account on this host join the worker link"),
        ("tcp://[::1]:7070", "would let every account on this host join the worker link"),
    ],
)
def test_a_tcp_worker_socket_needs_keys_or_an_explicit_opt_out(
    bind: str, says: str, tmp_path: Path
) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(ValueError, match=says):
        from_namespace(parser.parse_args(["--bind", bind]))
    assert from_args(["--bind", bind, "--insecure-worker-link"]).curve is None
    keys = generate(tmp_path / "keys")
    assert from_args(["--bind", bind, "--curve-keys", str(keys)]).curve == server_keys(keys)


def test_an_ipc_socket_needs_no_keys_and_unusable_keys_are_refused(tmp_path: Path) -> None:
    assert from_args(["--bind", "ipc:///tmp/x.sock"]).curve is None
    with pytest.raises(SystemExit):
        from_args(["--bind", "ipc:///tmp/x.sock", "--curve-keys", str(tmp_path / "missing")])


@pytest.mark.parametrize(
    "flags",
    [
        ["--worker-timeout", "2s", "--heartbeat-interval", "1s"],
        ["--leader-election", "--leader-election-lease-duration", "5s"],
        ["--leader-election", "--leader-election-renew-deadline", "2s"],
    ],
)
def test_timings_that_cannot_work_are_refused_before_anything_starts(flags: list[str]) -> None:
    """The same check for ``metashard coordinator`` and ``metashard run`` (which parses with
    ``from_namespace``): a usage error, never an error inside a task that nobody awaits."""
    with pytest.raises(SystemExit):
        from_args(["--insecure-worker-link", *flags])
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(ValueError):
        from_namespace(parser.parse_args(["--insecure-worker-link", *flags]))


def test_target_label_selector_is_validated_and_names_its_own_lease() -> None:
    def parse(*flags: str) -> CoordinatorSettings:
        return from_args(["--insecure-worker-link", *flags])

    plain = parse()
    assert plain.target_label_selector == "" and plain.leader_election_id == "metashard"
    a = parse("--target-label-selector", "shard=a")
    a_again = parse("--target-label-selector", "shard==a")  # the same selector
    b = parse("--target-label-selector", "shard=b")
    assert a.leader_election_id.startswith("metashard-")
    assert a.leader_election_id == a_again.leader_election_id != b.leader_election_id
    assert a.selector.matches({"shard": "a"}) and not a.selector.matches({"shard": "b"})
    named = parse("--target-label-selector", "shard=a", "--leader-election-id", "mine")
    assert named.leader_election_id == "mine"
    with pytest.raises(SystemExit):
        parse("--target-label-selector", "shard in (a")


def test_metacontroller_flags_reach_the_coordinator_settings() -> None:
    s = from_args(
        [
            "--insecure-worker-link",
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
    assert (s.common.log_level, s.common.log_format) == ("debug", "json")
    assert (s.common.metrics_address, s.common.health_address) == (":9999", ":8081")
    assert s.leader_election and s.leader_election_id == "metacontroller"
    assert s.discovery_interval == 20.0
    assert s.common.notices == (
        "--workers/--concurrency has no effect on a coordinator (workers reconcile)",
    )
