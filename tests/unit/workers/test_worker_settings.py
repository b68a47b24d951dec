from __future__ import annotations

import pytest

from workers.settings import from_args


def test_identity_and_endpoint_from_flags_or_environment() -> None:
    env = {"METASHARD_COORDINATOR": "tcp://c:7070", "POD_NAME": "metashard-worker-3"}
    s = from_args([], env)
    assert (s.coordinator, s.worker_id, s.concurrency) == ("tcp://c:7070", "metashard-worker-3", 16)
    s = from_args(["--coordinator", "ipc:///x", "--id", "w", "--concurrency", "4"], env)
    assert (s.coordinator, s.worker_id, s.concurrency) == ("ipc:///x", "w", 4)


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
