"""``metashard rollout status|history|undo``: the rollouts of one CompositeController parent.

``metashard rollout history things/my-thing -n ns`` (the resource as its plural, optionally
``plural.group``, or its kind; ``--kubeconfig``/``--context`` as elsewhere):

- ``status``: the latest revision, how many children it owns out of all the parent's
  revisions own, and the parent's ``Updated`` condition (what the rollout waits for).
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
command need not know). The formatting helpers are pure; ``main`` does the I/O.

Failures are reported as in every ``metashard`` command (``proto.runtime.startup``): one
``metashard rollout: error: ...`` line; exit 2 for a bad flag or argument or no usable
kubeconfig, 1 once it ran (a parent or resource not found, no revision to undo to, a
conflict, the cluster refusing or not answering).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from proto.api import names
from proto.api.controllers import group_of, parse_composite_controller
from proto.api.errors import InvalidControllerError
from proto.api.revisions import Revision, restore_patch, revision_hash
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Discovery, Resource
from proto.kube.session import Session
from proto.runtime.flags import Parser
from proto.runtime.startup import EXIT_CONFIG, fail

PROG = "metashard rollout"

REVISIONS = Resource(
    names.GROUP, names.VERSION, names.CONTROLLER_REVISIONS, names.CONTROLLER_REVISION, True
)
COMPOSITE_CONTROLLERS = Resource(
    names.GROUP, names.VERSION, names.COMPOSITE_CONTROLLERS, names.COMPOSITE_CONTROLLER, False
)


class RolloutError(Exception):
    """What the command cannot do, worded for the user (exit status 1)."""


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


def status_lines(parent: Mapping[str, Any], revisions: Sequence[Revision], what: str) -> list[str]:
    ordered = history_order(revisions)
    if not ordered:
        return [f"{what}: no ControllerRevisions (is a child type rolling?)"]
    latest = ordered[-1]
    total = sum(r.child_count() for r in ordered)
    lines = [
        f"{what}: latest revision {latest.number or '-'} ({latest.name})",
        f"  children on the latest revision: {latest.child_count()} of {total}",
    ]
    status = parent.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions or ():
        if isinstance(condition, Mapping) and condition.get("type") == names.CONDITION_UPDATED:
            lines.append(
                f"  Updated: {condition.get('status')} {condition.get('reason', '')}: "
                f"{condition.get('message', '')}"
            )
    return lines


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
        raise RolloutError(f"the server has no resource {text!r}")
    if len(found) > 1:
        options = ", ".join(sorted(f"{n}.{g}" if g else n for g, n in found))
        raise RolloutError(f"{text!r} is ambiguous: {options}")
    return next(iter(found.values()))


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


async def run(args: argparse.Namespace, out: TextIO) -> None:
    config = load_config(args.kubeconfig, context=args.context)
    async with Session(config, qps=0) as session:
        client = Client(session)
        discovery = Discovery(session)
        await discovery.refresh()
        kind, name = args.parent
        resource = find_resource(discovery.resources, kind)
        namespace = (
            (args.namespace or config.namespace or "default") if resource.namespaced else None
        )
        target = Target(resource, namespace, name)
        try:
            parent = await client.get(resource, name, namespace=namespace)
        except errors.NotFound:
            raise RolloutError(f"{target.what} not found") from None
        revisions = await parent_revisions(client, target, parent["metadata"]["uid"])
        if args.action == "status":
            out.write("\n".join(status_lines(parent, revisions, target.what)) + "\n")
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


def _parent_argument(text: str) -> tuple[str, str]:
    kind, _, name = text.partition("/")
    if not kind or not name:
        raise argparse.ArgumentTypeError(f"name the parent as RESOURCE/NAME, not {text!r}")
    return kind, name


def parser() -> Parser:
    found = Parser(prog=PROG, description="Show and undo the rollouts of a parent.")
    found.add_argument(
        "action",
        choices=("status", "history", "undo"),
        help="status: where the rollout is; history: the revisions; undo: go back",
    )
    found.add_argument(
        "parent",
        type=_parent_argument,
        metavar="RESOURCE/NAME",
        help="the parent, e.g. things/my-thing (the resource as its plural, plural.group, "
        "kind or short name)",
    )
    found.add_argument("-n", "--namespace", help="the parent's namespace")
    found.add_argument("--to-revision", type=int, help="undo: the revision to go back to")
    found.add_argument("--kubeconfig", help="path to a kubeconfig")
    found.add_argument("--context", help="the kubeconfig context to use")
    return found


def main(argv: list[str], out: TextIO | None = None) -> int:
    """Run the command; the exit code (see the module docstring), messages on stderr."""
    args = parser().parse_args(argv)
    try:
        asyncio.run(run(args, out or sys.stdout))
    except errors.ConfigError as err:
        return fail(PROG, err, code=EXIT_CONFIG)
    except (RolloutError, errors.KubeError) as err:
        return fail(PROG, err)
    return 0
