"""The helper that reads command lines and environments out of the rendered chart."""

from __future__ import annotations

import pytest

from tests.chart.render import Container, expand


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(POD_NAME)", "worker-3"),
        ("--id=$(POD_NAME).$(POD_NAMESPACE)", "--id=worker-3.ops"),
        ("$(UNSET)", "$(UNSET)"),
        ("$$(POD_NAME)", "$(POD_NAME)"),
        ("cost: $$5", "cost: $5"),
        ("$POD_NAME", "$POD_NAME"),
    ],
)
def test_expand_follows_kubernetes(text: str, expected: str) -> None:
    assert expand(text, {"POD_NAME": "worker-3", "POD_NAMESPACE": "ops"}) == expected


def _container(**spec: object) -> Container:
    return Container({"kind": "StatefulSet"}, {"name": "worker", **spec}, {})


def test_command_line_uses_the_image_entrypoint_unless_a_command_is_given() -> None:
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "GREETING", "value": "hello $(POD_NAME)"},
    ]
    plain = _container(args=["worker", "--id", "$(POD_NAME)"], env=env)
    assert plain.command_line(pod_name="w-0", namespace="ops") == [
        "metashard",
        "worker",
        "--id",
        "w-0",
    ]
    assert plain.environment(pod_name="w-0", namespace="ops") == {
        "POD_NAME": "w-0",
        "GREETING": "hello w-0",
    }
    custom = _container(command=["python", "-m", "workers"], args=["--id", "$(POD_NAME)"], env=env)
    assert custom.command_line(pod_name="w-1", namespace="ops") == [
        *("python", "-m", "workers", "--id", "w-1")
    ]


def test_an_environment_value_the_helper_cannot_know_is_refused() -> None:
    secret = {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    with pytest.raises(ValueError, match="TOKEN"):
        _container(env=[secret]).environment(pod_name="p", namespace="n")
