"""The ``metashard`` command: one entry point, one subcommand per process role.

Subcommands compose the applications; they hold no logic of their own. Roles that live in
another package (the workers, the embedded cluster) are started as their own processes with
``python -m <package>``, so the coordinator never imports the worker code or the load-test tree.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import metadata

Handler = Callable[[argparse.Namespace, list[str]], int]


# name -> (help, handler). Subcommands pass their remaining arguments through untouched.
# Roles are registered here as they are built.
SUBCOMMANDS: dict[str, tuple[str, Handler]] = {}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="metashard",
        description="A sharded controller-manager for Metacontroller-style lambda controllers.",
    )
    try:
        version = metadata.version("metashard")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        version = "unknown"
    parser.add_argument("--version", action="version", version=f"metashard {version}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, _) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    _, handler = SUBCOMMANDS[args.command]
    return handler(args, rest)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
