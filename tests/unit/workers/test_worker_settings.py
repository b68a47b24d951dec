from __future__ import annotations

import pytest

from workers.settings import from_args


def test_identity_and_endpoint_from_flags_or_environment() -> None:
    env = {"METASHARD_COORDINATOR": "tcp://c:7070", "POD_NAME": "metashard-worker-3"}
    s = from_args([], env)
    assert (s.coordinator, s.worker_id, s.common.concurrency) == (
        "tcp://c:7070",
        "metashard-worker-3",
        64,
    )
    s = from_args(["--coordinator", "ipc:///x", "--id", "w", "--concurrency", "4"], env)
    assert (s.coordinator, s.worker_id, s.common.concurrency) == ("ipc:///x", "w", 4)


@pytest.mark.parametrize("argv", [[], ["--coordinator", "tcp://c:1", "--concurrency", "0"]])
def test_missing_or_bad_values_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        from_args(argv, {})


def test_the_hook_answer_limit_defaults_to_3_mib_and_must_be_positive() -> None:
    base = ["--coordinator", "tcp://c:1"]
    assert from_args(base, {}).hook_max_response_bytes == 3 * 1024 * 1024
    assert (
        from_args([*base, "--hook-max-response-bytes", "1000"], {}).hook_max_response_bytes == 1000
    )
    with pytest.raises(SystemExit):
        from_args([*base, "--hook-max-response-bytes", "0"], {})


def test_metacontroller_flags_reach_the_worker_settings() -> None:
    s = from_args(
        [
            "--coordinator=tcp://c:7070",
            "--workers=5",
            "--zap-devel",
            "--health-probe-bind-address=:8081",
            "--discovery-interval=20s",
        ],
        {},
    )
    assert (s.common.concurrency, s.common.log_level, s.common.log_format) == (
        5,
        "debug",
        "console",
    )
    assert s.common.health_address == ":8081" and s.common.metrics_address == ":9999"
    assert s.common.notices == (
        "--discovery-interval has no effect on a worker (the coordinator acts on it)",
    )


@pytest.mark.parametrize("endpoint", ["c:7070", "tcp://c", "http://c:7070", "tcp://c:port"])
def test_a_coordinator_endpoint_zeromq_cannot_connect_to_is_refused(endpoint: str) -> None:
    with pytest.raises(SystemExit):
        from_args(["--coordinator", endpoint], {})


def test_target_label_selector_is_accepted_and_said_to_be_the_coordinators() -> None:
    s = from_args(["--coordinator=tcp://c:7070", "--target-label-selector=shard=a"], {})
    assert s.common.notices == (
        "--target-label-selector has no effect on a worker (the coordinator acts on it)",
    )
    with pytest.raises(SystemExit):
        from_args(["--coordinator=tcp://c:7070", "--target-label-selector=shard in (a"], {})


def test_the_revision_flags_reach_the_worker_settings() -> None:
    base = ["--coordinator", "tcp://c:1"]
    defaults = from_args(base, {"POD_NAMESPACE": "metashard"})
    assert (defaults.common.revision_history_limit, defaults.common.cluster_revision_namespace) == (
        5,
        "metashard",
    )
    given = from_args(
        [*base, "--revision-history-limit", "0", "--cluster-revision-namespace", "revs"],
        {"POD_NAMESPACE": "metashard"},
    )
    assert (given.common.revision_history_limit, given.common.cluster_revision_namespace) == (
        0,
        "revs",
    )


def test_the_apply_strategy_reaches_the_worker_settings() -> None:
    base = ["--coordinator=tcp://c:7070"]
    assert not from_args(base, {}).common.apply.server_side
    s = from_args(
        [*base, "--apply-strategy=server-side-apply", "--apply-strategy-ssa-field-manager=mine"],
        {},
    )
    assert (s.common.apply.strategy, s.common.apply.field_manager) == ("server-side-apply", "mine")
    assert s.common.notices == ()


def test_the_unsafe_fence_timeout_is_hidden_and_unset_by_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["--coordinator", "tcp://c:1"]
    assert from_args(base, {}).unsafe_fence_timeout is None
    assert from_args([*base, "--unsafe-fence-timeout", "30s"], {}).unsafe_fence_timeout == 30.0
    with pytest.raises(SystemExit):
        from_args(["--help"], {})
    assert "fence" not in capsys.readouterr().out
