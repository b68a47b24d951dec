"""docs/configuration.md is what the commands' parsers say (`make docs` regenerates it)."""

from __future__ import annotations

import argparse

from tests import configdoc


def test_the_committed_reference_is_current() -> None:
    assert configdoc.TARGET.read_text() == configdoc.render(), "stale: run `make docs`"


def test_every_flag_of_every_command_is_documented() -> None:
    text = configdoc.render()
    for name, build, _ in configdoc.COMMANDS:
        section = text.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        for action in build()._actions:
            if action.help == argparse.SUPPRESS:  # hidden on purpose: not documented either
                continue
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in section or f", {option}" in section, (name, option)


def test_flag_forms() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("paths", nargs="*", metavar="PATH", help="files")
    p.add_argument("--fmt", choices=("a", "b"), default="a", help="x | y")
    p.add_argument("--on", action="store_true")
    p.add_argument("--maybe", nargs="?", const=True, default=False)
    p.add_argument("--size", type=int)
    assert configdoc.table(p).splitlines()[2:] == [
        "| `PATH...` | - | files |",
        "| `--fmt {a,b}` | `a` | x \\| y |",
        "| `--on` | off |  |",
        "| `--maybe [VALUE]` | `False` |  |",
        "| `--size VALUE` | - |  |",
    ]
