"""manager.cli.sync: the pure parts of ``metashard sync`` (the I/O runs in
tests/integration/test_sync_command.py and the e2e tests)."""

from __future__ import annotations

import pytest

from manager.cli.objects import CommandError
from manager.cli.sync import CONTROLLERS, controller_kinds, parse, request_patch

COMPOSITES, DECORATORS = CONTROLLERS


def test_the_request_is_a_merge_patch_of_the_one_annotation() -> None:
    assert request_patch("2026-11-27T20:35:00.000001Z") == {
        "metadata": {
            "annotations": {"metashard.io/sync-requested-at": "2026-11-27T20:35:00.000001Z"}
        }
    }


@pytest.mark.parametrize(
    ("text", "kinds", "name"),
    [
        ("web", CONTROLLERS, "web"),
        ("cc/web", (COMPOSITES,), "web"),
        ("compositecontrollers/web", (COMPOSITES,), "web"),
        ("CompositeController/web", (COMPOSITES,), "web"),
        ("dec/web", (DECORATORS,), "web"),
        ("decoratorcontrollers.metacontroller.k8s.io/web", (DECORATORS,), "web"),
    ],
)
def test_a_controller_is_named_with_or_without_its_kind(
    text: str, kinds: tuple[object, ...], name: str
) -> None:
    assert controller_kinds(text) == (kinds, name)


def test_a_kind_that_is_no_controller_kind_is_an_error() -> None:
    with pytest.raises(CommandError, match="no resource 'pods'"):
        controller_kinds("pods/web")


def test_the_command_line_names_a_parent_or_a_controller() -> None:
    args = parse(["things/x", "-n", "ns"])
    assert args.parent == ("things", "x") and args.namespace == "ns" and args.controller is None
    assert parse(["--controller", "web"]).controller == "web"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "name a parent (RESOURCE/NAME) or --controller NAME, not both or neither"),
        (["things/x", "--controller", "web"], "not both or neither"),
        (["--controller", "web", "-n", "ns"], "controller objects have no namespace"),
        (["--controller", "cc/"], "name it as [KIND/]NAME, not 'cc/'"),
        (["things"], "name the parent as RESOURCE/NAME, not 'things'"),
    ],
)
def test_a_bad_command_line_is_a_usage_error(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    assert exited.value.code == 2
    assert says in capsys.readouterr().err
