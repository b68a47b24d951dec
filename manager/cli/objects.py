"""What the commands that act on one object of the cluster share (``metashard rollout``,
``metashard sync``): how it is named on the command line (``RESOURCE/NAME``, the resource as
kubectl takes it), found through discovery, and what failing to find it raises.

- ``parent_argument``: the argparse type of ``RESOURCE/NAME``; a text without both halves is a
  usage error (exit 2).
- ``find_resource``: ``things``, ``things.example.com``, ``Thing`` or a short name among the
  server's resources (subresources left out); none or several raise ``CommandError``.
- ``find_target``: the ``Target`` a ``RESOURCE/NAME`` names, through discovery; its
  namespace, for a namespaced resource, is ``-n``, else the kubeconfig context's, else
  ``default`` (as kubectl).
- ``CommandError``: what a command cannot do once it ran, worded for the user (exit 1,
  reported as one line by ``proto.runtime.startup.fail``).
- ``run_command(prog, work)``: runs the command's coroutine and turns what it raises into
  the exit code: no usable kubeconfig 2, a ``CommandError`` or an API error 1 (one line
  each), Ctrl-C 130.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from proto.kube import errors
from proto.kube.cluster import ClusterConfig
from proto.kube.resources import Discovery, Resource
from proto.kube.session import Session
from proto.runtime.startup import EXIT_CONFIG, fail


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


async def find_target(
    session: Session, config: ClusterConfig, named: tuple[str, str], namespace: str | None
) -> Target:
    """What ``RESOURCE/NAME`` (``named``, from ``parent_argument``) names (module docstring)."""
    discovery = Discovery(session)
    await discovery.refresh()
    kind, name = named
    resource = find_resource(discovery.resources, kind)
    if not resource.namespaced:
        return Target(resource, None, name)
    return Target(resource, namespace or config.namespace or "default", name)


def parent_argument(text: str) -> tuple[str, str]:
    kind, _, name = text.partition("/")
    if not kind or not name:
        raise argparse.ArgumentTypeError(f"name the parent as RESOURCE/NAME, not {text!r}")
    return kind, name


def run_command(prog: str, work: Coroutine[Any, Any, object]) -> int:
    """Run ``work``; the exit code (module docstring), messages on stderr."""
    try:
        asyncio.run(work)
    except errors.ConfigError as err:
        return fail(prog, err, code=EXIT_CONFIG)
    except (CommandError, errors.KubeError) as err:
        return fail(prog, err)
    except KeyboardInterrupt:
        return 130
    return 0
