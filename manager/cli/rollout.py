"""``metashard rollout status|history|undo``: the rollouts of one CompositeController parent.

``metashard rollout history things/my-thing -n ns`` (the resource as its plural, optionally
``plural.group``, or its kind; ``--kubeconfig``/``--context`` as elsewhere):

- ``status``: waits for the rollout to finish, like ``kubectl rollout status``: one line
  each time the rollout moves (``things/x: waiting for rollout to finish: 1 of 3 children on
  revision 4 (<hash>); RolloutWaiting: ...``), then ``things/x: successfully rolled out
  revision 4 (<hash>): 3 of 3 children`` and exit 0; it reads the parent and its revisions
  every 0.5 s, so states shorter than that may show no line. Finished means
  the controller has observed the parent's generation (``status.observedGeneration``), every
  child the revisions hold is on the latest one, and the ``Updated`` condition (when the
  parent has one) is ``True``. ``--timeout`` (a Go duration; ``0``, the default, waits for
  ever) gives up with exit 1; ``-w``/``--watch`` is on by default, ``--no-watch`` (or
  ``--watch=false``) prints the current line once and exits 0. A parent whose controller
  has observed it and that has no ControllerRevisions (no child type rolls) is an error.
- ``history``: the parent's ControllerRevisions oldest first: history number, hash (the
  ``controller-revision-hash`` of their children), age, children, and what changed in
  ``parentPatch`` from the revision before (dotted paths of the changed leaves).
- ``undo [--to-revision N]``: writes revision N's ``parentPatch`` (default: the revision
  before the latest) back over the parent's ``revisionHistory.fieldPaths``, like ``kubectl
  rollout undo`` (a path the patch lacks, a field that did not exist then, is removed); the
  controller then moves the children back one at a time. The field paths come from the one
  CompositeController that handles the parent; the write is a PUT with the parent's
  resourceVersion as its precondition.

A parent's revisions are the ControllerRevisions whose controller ownerReference is the
parent's uid: in its namespace for a namespaced parent, in any namespace for a
cluster-scoped one (metashard keeps those in ``--cluster-revision-namespace``, which this
command need not know). The formatting helpers and ``Progress`` are pure; ``wait`` takes
the reads, the clock and the sleep as arguments; ``main`` does the I/O.

Failures are reported as in every ``metashard`` command (``proto.runtime.startup``): one
``metashard rollout: error: ...`` line; exit 2 for a bad flag or argument or no usable
kubeconfig, 1 once it ran (a parent or resource not found, no revision to undo to, a
conflict, the cluster refusing or not answering, a timeout).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from manager.cli.objects import (
    CommandError,
    Target,
    find_target,
    parent_argument,
    run_command,
)
from proto.api import names
from proto.api.controllers import group_of, parse_composite_controller
from proto.api.errors import InvalidControllerError
from proto.api.revisions import Revision, restore_patch, revision_hash
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.kube.session import Session
from proto.runtime.flags import Parser, duration, go_bool, typed

PROG = "metashard rollout"

REVISIONS = Resource(
    names.GROUP, names.VERSION, names.CONTROLLER_REVISIONS, names.CONTROLLER_REVISION, True
)
COMPOSITE_CONTROLLERS = Resource(
    names.GROUP, names.VERSION, names.COMPOSITE_CONTROLLERS, names.COMPOSITE_CONTROLLER, False
)


class RolloutError(CommandError):
    """What the command cannot do, worded for the user (exit status 1)."""


class RolloutTimeout(RolloutError):
    """``status --timeout`` passed before the rollout finished."""


# --- pure ---------------------------------------------------------------------------------


def history_order(revisions: Sequence[Revision]) -> list[Revision]:
    """Oldest first: by history number, then creation time, then name."""

    def key(revision: Revision) -> tuple[int, str, str]:
        created = str(((revision.obj or {}).get("metadata") or {}).get("creationTimestamp") or "")
        return (revision.number, created, revision.name)

    return sorted(revisions, key=key)


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping) and value:
        for k in sorted(value):
            yield from _leaves(value[k], f"{path}.{k}" if path else str(k))
    else:
        yield path, value


def changed_paths(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The dotted paths of the leaves that differ (lists are leaves), sorted."""
    old, new = dict(_leaves(before)), dict(_leaves(after))
    return sorted(p for p in old.keys() | new.keys() if old.get(p, ...) != new.get(p, ...))


def summary(before: Mapping[str, Any] | None, after: Mapping[str, Any], limit: int = 3) -> str:
    if before is None:
        return "(first)"
    paths = changed_paths(before, after)
    if not paths:
        return "(no change)"
    shown = ", ".join(paths[:limit])
    return shown + (f" (+{len(paths) - limit} more)" if len(paths) > limit else "")


def age(created: str, now: datetime.datetime) -> str:
    """``kubectl``-style age: ``42s``, ``5m``, ``3h``, ``2d``; ``?`` when unknown."""
    try:
        then = datetime.datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return "?"
    seconds = max(int((now - then).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def history_table(revisions: Sequence[Revision], now: datetime.datetime) -> list[list[str]]:
    rows = [["REVISION", "HASH", "AGE", "CHILDREN", "CHANGE"]]
    previous: Mapping[str, Any] | None = None
    for revision in history_order(revisions):
        created = str(((revision.obj or {}).get("metadata") or {}).get("creationTimestamp") or "")
        rows.append(
            [
                str(revision.number or "-"),
                revision_hash(revision.name)[:10],
                age(created, now),
                str(revision.child_count()),
                summary(previous, revision.patch),
            ]
        )
        previous = revision.patch
    return rows


def render(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class Progress:
    """Where one parent's rollout is, as its controller last wrote it (``of``)."""

    what: str
    """``RESOURCE/NAME``, for the lines."""
    generation: int | None
    observed_generation: int | None
    latest: Revision | None
    on_latest: int
    """Children the latest revision holds."""
    total: int
    """Children all the parent's revisions hold."""
    updated: Mapping[str, Any] | None
    """The parent's ``Updated`` condition, if it has one."""

    @classmethod
    def of(cls, what: str, parent: Mapping[str, Any], revisions: Sequence[Revision]) -> Progress:
        ordered = history_order(revisions)
        metadata = parent.get("metadata")
        status = parent.get("status")
        status = status if isinstance(status, Mapping) else {}
        conditions = status.get("conditions")
        updated = next(
            (
                c
                for c in (conditions if isinstance(conditions, list) else ())
                if isinstance(c, Mapping) and c.get("type") == names.CONDITION_UPDATED
            ),
            None,
        )
        return cls(
            what=what,
            generation=_int(metadata.get("generation")) if isinstance(metadata, Mapping) else None,
            observed_generation=_int(status.get(names.OBSERVED_GENERATION)),
            latest=ordered[-1] if ordered else None,
            on_latest=ordered[-1].child_count() if ordered else 0,
            total=sum(r.child_count() for r in ordered),
            updated=updated,
        )

    @property
    def observed(self) -> bool:
        """The controller has synced the parent's current spec."""
        if self.generation is None:
            return True
        return self.observed_generation is not None and self.observed_generation >= self.generation

    @property
    def unrolled(self) -> bool:
        """Observed, and no ControllerRevisions: there is no rollout to wait for."""
        return self.observed and self.latest is None

    @property
    def complete(self) -> bool:
        return (
            self.observed
            and self.latest is not None
            and self.on_latest == self.total
            and (self.updated is None or self.updated.get("status") == "True")
        )

    def line(self) -> str:
        """The one line that says where the rollout is."""
        if not self.observed:
            seen = self.observed_generation if self.observed_generation is not None else "none"
            return (
                f"{self.what}: waiting for its controller to observe generation "
                f"{self.generation} (observed: {seen})"
            )
        if self.latest is None:
            return f"{self.what}: no ControllerRevisions (is a child type rolling?)"
        revision = f"revision {self.latest.number or '-'} ({revision_hash(self.latest.name)[:10]})"
        counts = f"{self.on_latest} of {self.total} children"
        if self.complete:
            return f"{self.what}: successfully rolled out {revision}: {counts}"
        line = f"{self.what}: waiting for rollout to finish: {counts} on {revision}"
        if self.updated is not None and self.updated.get("status") != "True":
            line += f"; {self.updated.get('reason', '')}: {self.updated.get('message', '')}"
        return line


async def wait(
    read: Callable[[], Awaitable[Progress]],
    out: TextIO,
    *,
    watch: bool = True,
    limit: float = 0.0,
    interval: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> None:
    """``status``: print ``read()``'s line, and each new one, until the rollout is complete
    (or at once without ``watch``), reading every ``interval`` seconds. Raises
    ``RolloutTimeout`` when ``limit`` (> 0) seconds pass first, ``RolloutError`` when
    there is no rollout to wait for."""
    deadline = clock() + limit if limit > 0 else None
    shown = None
    while True:
        progress = await read()
        if progress.unrolled:
            raise RolloutError(progress.line())
        line = progress.line()
        if line != shown:
            out.write(line + "\n")
            out.flush()
            shown = line
        if progress.complete or not watch:
            return
        if deadline is not None:
            left = deadline - clock()
            if left <= 0:
                raise RolloutTimeout(f"timed out after {limit:g}s: {line}")
            await sleep(min(interval, left))
        else:
            await sleep(interval)


def undo_target(revisions: Sequence[Revision], to_revision: int | None) -> Revision:
    ordered = history_order(revisions)
    if to_revision is None:
        if len(ordered) < 2:
            raise RolloutError("no previous revision to go back to")
        return ordered[-2]
    for revision in ordered:
        if revision.number == to_revision:
            return revision
    known = ", ".join(str(r.number) for r in ordered if r.number) or "none"
    raise RolloutError(f"no revision {to_revision} (known: {known})")


# --- I/O ----------------------------------------------------------------------------------


async def parent_revisions(client: Client, target: Target, uid: str) -> list[Revision]:
    listed = await client.list(REVISIONS, namespace=target.namespace)
    found = []
    for obj in listed.items:
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        if any(r.get("controller") and r.get("uid") == uid for r in refs if isinstance(r, dict)):
            found.append(Revision.decode(obj))
    return found


async def field_paths(client: Client, resource: Resource, parent: Mapping[str, Any]) -> list[str]:
    """``revisionHistory.fieldPaths`` of the one CompositeController handling ``parent``."""
    labels = (parent.get("metadata") or {}).get("labels") or {}
    found: list[tuple[str, tuple[str, ...]]] = []
    for obj in (await client.list(COMPOSITE_CONTROLLERS)).items:
        try:
            spec = parse_composite_controller(obj)
        except InvalidControllerError:
            continue
        parent_resource = spec.parent
        if (
            parent_resource.resource == resource.name
            and group_of(parent_resource.api_version) == resource.group
            and parent_resource.label_selector.matches(labels)
        ):
            found.append((spec.name, parent_resource.revision_field_paths))
    if len(found) != 1:
        which = ", ".join(name for name, _ in found) or "none"
        raise RolloutError(f"need exactly one CompositeController for this parent, found: {which}")
    return list(found[0][1])


async def _parent(client: Client, target: Target) -> dict[str, Any]:
    try:
        return await client.get(target.resource, target.name, namespace=target.namespace)
    except errors.NotFound:
        raise RolloutError(f"{target.what} not found") from None


async def run(args: argparse.Namespace, out: TextIO) -> None:
    config = load_config(args.kubeconfig, context=args.context)
    async with Session(config, qps=0) as session:
        client = Client(session)
        target = await find_target(session, config, args.parent, args.namespace)
        resource, namespace, name = target.resource, target.namespace, target.name
        parent = await _parent(client, target)
        revisions = await parent_revisions(client, target, parent["metadata"]["uid"])
        if args.action == "status":
            first: Progress | None = Progress.of(target.what, parent, revisions)

            async def read() -> Progress:
                nonlocal first
                if first is not None:
                    progress, first = first, None
                    return progress
                parent = await _parent(client, target)
                found = await parent_revisions(client, target, parent["metadata"]["uid"])
                return Progress.of(target.what, parent, found)

            await wait(read, out, watch=args.watch, limit=args.timeout)
        elif args.action == "history":
            now = datetime.datetime.now(datetime.UTC)
            out.write(render(history_table(revisions, now)) + "\n")
        else:
            chosen = undo_target(revisions, args.to_revision)
            paths = await field_paths(client, resource, parent)
            wanted = restore_patch(parent, chosen.patch, paths)
            if wanted == parent:
                out.write(f"{target.what}: already at revision {chosen.number}\n")
                return
            try:
                await client.replace(resource, wanted, namespace=namespace, name=name)
            except errors.Conflict:
                raise RolloutError(f"{target.what} changed meanwhile; try again") from None
            out.write(f"{target.what}: rolled back to revision {chosen.number}\n")


def parser() -> Parser:
    found = Parser(prog=PROG, description="Show and undo the rollouts of a parent.")
    found.add_argument(
        "action",
        choices=("status", "history", "undo"),
        help="status: wait for the rollout to finish; history: the revisions; undo: go back",
    )
    found.add_argument(
        "parent",
        type=parent_argument,
        metavar="RESOURCE/NAME",
        help="the parent, e.g. things/my-thing (the resource as its plural, plural.group, "
        "kind or short name)",
    )
    found.add_argument("-n", "--namespace", help="the parent's namespace")
    found.add_argument("--to-revision", type=int, help="undo: the revision to go back to")
    found.add_argument(
        "-w",
        "--watch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="status: wait until the rollout has finished, one line each time it moves "
        "(--no-watch or --watch=false: print where it is and exit)",
    )
    found.add_argument(
        "--timeout",
        type=typed(duration),
        default=0.0,
        help="status: give up (exit 1) after this long (Go duration; 0: wait for ever)",
    )
    found.add_argument("--kubeconfig", help="path to a kubeconfig")
    found.add_argument("--context", help="the kubeconfig context to use")
    return found


def _go_switches(argv: Sequence[str]) -> list[str]:
    """kubectl's ``--watch=false``/``-w=true`` as argparse's ``--no-watch``/``--watch``."""
    result = []
    for arg in argv:
        flag, equals, value = arg.partition("=")
        if equals and flag in ("-w", "--watch"):
            try:
                arg = "--watch" if go_bool(value) else "--no-watch"
            except ValueError as err:
                parser().error(f"argument -w/--watch: {err}")
        result.append(arg)
    return result


def main(argv: list[str], out: TextIO | None = None) -> int:
    """Run the command; the exit code (see the module docstring), messages on stderr."""
    args = parser().parse_args(_go_switches(argv))
    return run_command(PROG, run(args, out or sys.stdout))
