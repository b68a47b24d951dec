"""What the commands that act on one object of the cluster share (``metashard rollout``,
``metashard sync``): how it is named on the command line (``RESOURCE/NAME``, the resource as
kubectl takes it), found through discovery, and what failing to find it raises.

- ``parent_argument``: the argparse type of ``RESOURCE/NAME``; a text without both halves is a
  usage error (exit 2).
- ``find_resource``: ``things``, ``things.example.com``, ``Thing`` or a short name among the
  server's resources (subresources left out); none or several raise ``CommandError``.
- ``CommandError``: what a command cannot do once it ran, worded for the user (exit 1,
  reported as one line by ``proto.runtime.startup.fail``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from proto.kube.resources import Resource


class CommandError(Exception):
    """What the command cannot do, worded for the user (exit status 1)."""


@dataclass(frozen=True, slots=True)
class Target:
    resource: Resource
    namespace: str | None
    name: str

    @property
    def what(self) -> str:
        return f"{self.resource.name}/{self.name}"


def find_resource(resources: Sequence[Resource], text: str) -> Resource:
    """``things``, ``things.example.com``, ``Thing`` or a short name."""
    lowered = text.lower()
    found = {
        (r.group, r.name): r
        for r in resources
        if "/" not in r.name
        and lowered
        in {r.name, f"{r.name}.{r.group}", r.kind.lower(), *(s.lower() for s in r.short_names)}
    }
    if not found:
        raise CommandError(f"the server has no resource {text!r}")
    if len(found) > 1:
        options = ", ".join(sorted(f"{n}.{g}" if g else n for g, n in found))
        raise CommandError(f"{text!r} is ambiguous: {options}")
    return next(iter(found.values()))


def parent_argument(text: str) -> tuple[str, str]:
    kind, _, name = text.partition("/")
    if not kind or not name:
        raise argparse.ArgumentTypeError(f"name the parent as RESOURCE/NAME, not {text!r}")
    return kind, name
