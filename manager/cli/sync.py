"""``metashard sync``: reconcile a parent now, or every parent of a controller, without
changing their specs.

- ``metashard sync things/my-thing -n ns`` (the resource as ``metashard rollout`` takes it:
  plural, ``plural.group``, kind or short name; ``--kubeconfig``/``--context`` as elsewhere)
  sets the annotation ``metashard.io/sync-requested-at`` on the parent to the time of the
  request (``proto.api.interventions.request_stamp``). The coordinator sees the annotation
  change as a live event, never as a status-only one whatever ``ignoreStatusChanges`` says,
  and pushes the parent to its worker at LIVE priority.
- ``metashard sync --controller NAME`` does the same on the CompositeController or
  DecoratorController ``NAME`` (``compositecontrollers/NAME``, ``cc/NAME``,
  ``decoratorcontrollers/NAME``, ``dec/NAME``... when both kinds have one of that name): the
  coordinator then pushes every parent of that controller at LIVE priority. For after a new
  hook deployment, whose answers changed while no parent did.
- Why an annotation and not a message to the coordinator: it works with whichever
  coordinator leads, through the API server the user can already write to (RBAC: ``patch`` on
  the object), needs no new port or channel, and the request is visible on the object. The
  write is a JSON merge patch of that one annotation; nothing else of the object changes.
  The parent's hook sees the annotation, as any other (Metacontroller's hooks see every
  annotation too).
- A paused object (``metashard.io/paused: "true"``) is annotated all the same, and the line
  printed says that nothing syncs until the pause is removed (which syncs it at once).

Failures as in every ``metashard`` command (``proto.runtime.startup``): one line ``metashard
sync: error: ...``; exit 2 for the command line (neither or both of a parent and
``--controller``, ``-n`` with ``--controller``, a malformed name) or no usable kubeconfig, 1
once it ran (an object or resource not found, an ambiguous controller name, the cluster
refusing or not answering).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Callable
from typing import Any, TextIO

from manager.cli.objects import (
    CommandError,
    Target,
    find_resource,
    find_target,
    parent_argument,
    run_command,
)
from proto.api import names
from proto.api.interventions import (
    PAUSED,
    SYNC_REQUESTED_AT,
    annotations_of,
    pause_of,
    request_stamp,
)
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.kube.session import Session
from proto.runtime.flags import Parser

PROG = "metashard sync"

CONTROLLERS = (
    Resource(
        names.GROUP,
        names.VERSION,
        names.COMPOSITE_CONTROLLERS,
        names.COMPOSITE_CONTROLLER,
        False,
        short_names=("cc", "cctl"),
    ),
    Resource(
        names.GROUP,
        names.VERSION,
        names.DECORATOR_CONTROLLERS,
        names.DECORATOR_CONTROLLER,
        False,
        short_names=("dec", "decorators"),
    ),
)
"""The controller kinds, with their CRDs' short names."""


def request_patch(stamp: str) -> dict[str, Any]:
    """The merge patch that asks for a sync: the one annotation, nothing else."""
    return {"metadata": {"annotations": {SYNC_REQUESTED_AT: stamp}}}


def controller_kinds(text: str) -> tuple[tuple[Resource, ...], str]:
    """The kinds ``--controller`` may name and the name: ``NAME`` (either kind), or
    ``KIND/NAME`` with the kind as ``find_resource`` takes it."""
    kind, slash, name = text.rpartition("/")
    if not slash:
        return CONTROLLERS, text
    return (find_resource(CONTROLLERS, kind),), name


async def _controller(client: Client, text: str) -> Target:
    """The one controller object ``--controller text`` names."""
    kinds, name = controller_kinds(text)
    found: list[Target] = []
    for resource in kinds:
        try:
            await client.get(resource, name)
        except errors.NotFound:
            continue
        found.append(Target(resource, None, name))
    if not found:
        which = " or ".join(r.kind for r in kinds)
        raise CommandError(f"no {which} named {name!r}")
    if len(found) > 1:
        options = " or ".join(t.what for t in found)
        raise CommandError(f"{name!r} names a controller of each kind: say {options}")
    return found[0]


async def run(
    args: argparse.Namespace,
    out: TextIO,
    *,
    now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
) -> None:
    config = load_config(args.kubeconfig, context=args.context)
    async with Session(config, qps=0) as session:
        client = Client(session)
        if args.controller is not None:
            target = await _controller(client, args.controller)
            asked = "a sync of every parent"
        else:
            target = await find_target(session, config, args.parent, args.namespace)
            asked = "a sync"
        stamp = request_stamp(now())
        try:
            written = await client.patch(
                target.resource, target.name, request_patch(stamp), namespace=target.namespace
            )
        except errors.NotFound:
            raise CommandError(f"{target.what} not found") from None
        line = f"{target.what}: {asked} requested ({SYNC_REQUESTED_AT}: {stamp})"
        if pause_of(annotations_of(written)).paused:
            line += f'; it is paused ({PAUSED}: "true"): nothing syncs until that goes'
        out.write(line + "\n")


def parser() -> Parser:
    found = Parser(
        prog=PROG,
        description="Reconcile a parent now, or every parent of a controller, without "
        "changing their specs (sets the annotation metashard.io/sync-requested-at).",
    )
    found.add_argument(
        "parent",
        nargs="?",
        type=parent_argument,
        metavar="RESOURCE/NAME",
        help="the parent, e.g. things/my-thing (the resource as its plural, plural.group, "
        "kind or short name)",
    )
    found.add_argument("-n", "--namespace", help="the parent's namespace")
    found.add_argument(
        "--controller",
        metavar="[KIND/]NAME",
        help="every parent of this CompositeController or DecoratorController (KIND: "
        "compositecontrollers, cc, decoratorcontrollers, dec..., when both kinds have NAME)",
    )
    found.add_argument("--kubeconfig", help="path to a kubeconfig")
    found.add_argument("--context", help="the kubeconfig context to use")
    return found


def parse(argv: list[str]) -> argparse.Namespace:
    """The arguments; a usage error (exit 2) unless exactly one of a parent and
    ``--controller`` is given, and ``-n`` only with a parent."""
    command = parser()
    args = command.parse_args(argv)
    if (args.parent is None) == (args.controller is None):
        command.error("name a parent (RESOURCE/NAME) or --controller NAME, not both or neither")
    if args.controller is not None and args.namespace is not None:
        command.error("-n/--namespace: controller objects have no namespace")
    if args.controller is not None and not args.controller.rpartition("/")[2]:
        command.error(f"argument --controller: name it as [KIND/]NAME, not {args.controller!r}")
    return args


def main(argv: list[str], out: TextIO | None = None) -> int:
    """Run the command; the exit code (see the module docstring), messages on stderr."""
    args = parse(argv)
    return run_command(PROG, run(args, out or sys.stdout))
