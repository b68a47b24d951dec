from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from proto.runtime.flags import (
    ApplyStrategy,
    Parser,
    Role,
    add_common,
    common,
    default_namespace,
    zap_level,
)


def parse(argv: list[str]) -> argparse.Namespace:
    p = Parser(prog="t")
    add_common(p)
    return p.parse_args(argv)


# Every flag of Metacontroller v4.17 (pkg/cmd/metacontroller/main.go, controller-runtime's zap
# flags and --kubeconfig) in the forms its manifests and chart use.
METACONTROLLER_FLAGS = [
    ["--discovery-interval=20s"],
    ["--cache-flush-interval", "30m"],
    ["--metrics-address=:9999"],
    ["--health-probe-bind-address=:8081"],
    ["--pprof-address=0"],
    ["--client-go-qps=5"],
    ["--client-go-burst=10"],
    ["--workers=5"],
    ["--events-qps=0.0033"],
    ["--events-burst=25"],
    ["--leader-election"],
    ["--leader-election=false"],
    ["--leader-election-resource-lock=leases"],
    ["--leader-election-namespace=metacontroller"],
    ["--leader-election-id=metacontroller"],
    ["--apply-strategy=dynamic-apply"],
    ["--apply-strategy-ssa-field-manager=metacontroller"],
    ["--apply-strategy=server-side-apply"],
    ["--kubeconfig=/etc/kube/config"],
    ["--zap-log-level=4"],
    ["--zap-log-level=debug"],
    ["--zap-devel"],
    ["--zap-devel=false"],
    ["--zap-encoder=console"],
    ["--zap-stacktrace-level=error"],
    ["--zap-time-encoding=rfc3339"],
    ["--target-label-selector=shard in (a,b),!canary"],
]


@pytest.mark.parametrize("argv", METACONTROLLER_FLAGS, ids=lambda a: a[0])
@pytest.mark.parametrize("role", ["coordinator", "worker", "run"])
def test_every_metacontroller_flag_parses_in_every_role(argv: list[str], role: Role) -> None:
    common(parse(argv), role=role)


@pytest.mark.parametrize(
    "argv",
    [
        ["--no-such-flag"],
        ["--target-label-selector=shard in (a"],
        ["--apply-strategy=patch"],
        ["--apply-strategy=Server-Side-Apply"],
        ["--apply-strategy-ssa-field-manager="],
        ["--apply-strategy-ssa-field-manager=" + "m" * 129],
        ["--apply-strategy-ssa-field-manager=tab\there"],
        ["--leader-election-resource-lock=configmaps"],
        ["--zap-log-level=0"],
        ["--zap-log-level=trace"],
        ["--zap-encoder=text"],
        ["--metrics-address=:99999"],
        ["--health-probe-bind-address=8081"],
        ["--workers=0"],
        ["--client-go-qps=-1"],
        ["--discovery-interval=soon"],
        ["--log-level=loud"],
        ["--cluster-revision-namespace=Not_A_Namespace"],
        ["--cluster-revision-namespace="],
        ["--cluster-revision-namespace=-ns"],
        ["--revision-history-limit=-1"],
        ["--revision-history-limit=five"],
        ["--revision-history-limit=1.5"],
    ],
)
def test_bad_or_unknown_flags_fail_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("t: error: "), err


@pytest.mark.parametrize(
    ("text", "level"),
    [("debug", "debug"), ("INFO", "info"), ("error", "error"), ("1", "debug"), ("4", "debug")],
)
def test_zap_levels_map_to_ours(text: str, level: str) -> None:
    assert zap_level(text) == level


@pytest.mark.parametrize(
    ("argv", "fmt", "level"),
    [
        ([], "auto", "info"),
        (["--zap-devel"], "console", "debug"),
        (["--zap-devel", "--zap-encoder=json", "--zap-log-level=info"], "json", "info"),
        (["--zap-log-level=4", "--log-level=warn"], "auto", "warning"),
        (["--zap-encoder=json", "--log-format=console"], "console", "info"),
    ],
)
def test_our_logging_flags_win_over_zap_and_zap_devel_sets_defaults(
    argv: list[str], fmt: str, level: str
) -> None:
    resolved = common(parse(argv), role="worker")
    assert (resolved.log_format, resolved.log_level) == (fmt, level)


def test_defaults_follow_metacontroller_where_it_has_them() -> None:
    resolved = common(parse([]), role="worker")
    assert (resolved.metrics_address, resolved.health_address) == (":9999", ":8081")
    assert (resolved.qps, resolved.burst, resolved.concurrency) == (0, 0, 64)
    assert resolved.notices == ()
    assert common(parse(["--workers=5"]), role="run").concurrency == 5
    assert common(parse(["--client-go-qps=5"]), role="run").burst == 10


@pytest.mark.parametrize(
    ("argv", "role", "says"),
    [
        (["--discovery-interval=20s"], "worker", "--discovery-interval has no effect on a worker"),
        (["--leader-election"], "worker", "--leader-election has no effect on a worker"),
        (["--workers=5"], "coordinator", "--workers/--concurrency has no effect on a coord"),
        (["--pprof-address=:6060"], "run", "--pprof-address has no effect"),
        (["--events-qps=1"], "coordinator", "--events-qps has no effect yet"),
        (["--events-burst=1"], "worker", "--events-burst has no effect yet"),
        (["--zap-stacktrace-level=info"], "run", "--zap-stacktrace-level has no effect"),
        (["--zap-time-encoding=epoch"], "run", "--zap-time-encoding has no effect"),
        (
            ["--apply-strategy-ssa-field-manager=x"],
            "worker",
            "--apply-strategy-ssa-field-manager has no effect: --apply-strategy is dynamic",
        ),
        (
            ["--apply-strategy=server-side-apply"],
            "coordinator",
            "--apply-strategy has no effect on a coordinator",
        ),
    ],
)
def test_a_flag_without_effect_is_reported(argv: list[str], role: Role, says: str) -> None:
    notices = common(parse(argv), role=role).notices
    assert len(notices) == 1 and notices[0].startswith(says), notices


@pytest.mark.parametrize(
    ("argv", "role"),
    [
        (["--discovery-interval=20s", "--leader-election"], "coordinator"),
        (["--workers=5"], "worker"),
        (["--pprof-address=0", "--zap-time-encoding=iso8601"], "run"),
        (["--apply-strategy=server-side-apply", "--apply-strategy-ssa-field-manager=m"], "run"),
        (["--apply-strategy=server-side-apply"], "worker"),
    ],
)
def test_a_flag_with_effect_is_not_reported(argv: list[str], role: Role) -> None:
    assert common(parse(argv), role=role).notices == ()


@pytest.mark.parametrize(
    ("environ", "file_text", "expected"),
    [
        ({"POD_NAMESPACE": "from-env"}, "from-file", "from-env"),
        ({"POD_NAMESPACE": ""}, "from-file\n", "from-file"),
        ({}, "from-file", "from-file"),
        ({}, None, "default"),
        ({}, "  \n", "default"),
    ],
)
def test_the_default_namespace_is_the_pods_then_the_service_accounts_then_default(
    environ: dict[str, str], file_text: str | None, expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "namespace"
    if file_text is not None:
        path.write_text(file_text)
    assert default_namespace(environ, path) == expected


@pytest.mark.parametrize("role", ["coordinator", "worker", "run"])
def test_the_cluster_revision_namespace_is_the_flag_else_the_pods(role: Role) -> None:
    given = common(parse(["--cluster-revision-namespace", "revs"]), role=role, environ={})
    assert given.cluster_revision_namespace == "revs"
    pod = common(parse([]), role=role, environ={"POD_NAMESPACE": "metashard"})
    assert pod.cluster_revision_namespace == "metashard"
    assert pod.notices == ()


@pytest.mark.parametrize(("argv", "limit"), [([], 5), (["--revision-history-limit=0"], 0)])
def test_the_revision_history_limit_defaults_to_five(argv: list[str], limit: int) -> None:
    assert common(parse(argv), role="worker", environ={}).revision_history_limit == limit


def test_the_revision_history_limit_has_no_effect_on_a_coordinator() -> None:
    args = parse(["--revision-history-limit", "3"])
    assert common(args, role="coordinator", environ={}).notices == (
        "--revision-history-limit has no effect on a coordinator (workers write revisions)",
    )
    assert common(args, role="run", environ={}).notices == ()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ApplyStrategy("dynamic-apply", "metacontroller")),
        (["--apply-strategy=server-side-apply"], ApplyStrategy("server-side-apply")),
        (
            ["--apply-strategy", "server-side-apply", "--apply-strategy-ssa-field-manager=me"],
            ApplyStrategy("server-side-apply", "me"),
        ),
    ],
)
def test_the_apply_strategy_is_resolved(argv: list[str], expected: ApplyStrategy) -> None:
    resolved = common(parse(argv), role="worker", environ={}).apply
    assert resolved == expected
    assert resolved.server_side is (expected.strategy == "server-side-apply")
