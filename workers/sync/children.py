"""Making a parent's children match the hook's desired children: the plan, then the writes.

``plan(...)`` is pure. It compares the claimed (observed) children with the desired ones as
Metacontroller's ``ManageChildren`` does with dynamic apply:

- Observed children that are not desired are deleted (background propagation, uid
  precondition), except those already being deleted.
- Desired children that do not exist are created: ``workers.apply.create_body`` records the
  last-applied annotation before appending the controller ownerReference.
- Desired children that exist go through ``workers.apply.apply_update``. Nothing happens when
  the merge changes nothing, or when the child is being deleted. Otherwise the child type's
  ``updateStrategy.method`` decides: ``OnDelete`` leaves it alone (until someone else deletes
  it), ``Recreate`` deletes it (the next sync recreates it), ``InPlace`` PUTs the merged
  object (the observed resourceVersion is the precondition).
- ``RollingRecreate`` and ``RollingInPlace`` act like ``Recreate`` and ``InPlace`` here: the
  rollout (``workers.kinds.composite.rollouts``) has already chosen each child's desired
  state from the revision it belongs to.
- ``in_place_labels``: a child whose only difference is in these labels is PUT in place
  whatever its method (``OnDelete`` excepted), so adding, changing or restoring them (the
  ``controller-revision-hash`` label) never recreates it. The last-applied annotation of a
  child whose label someone removed or changed still records the old value; that record
  alone is no other difference (``workers.apply.changes_only_labels``).
- A child whose update cannot be computed (a malformed last-applied annotation) is an error
  for that child only; the others still proceed.

Writes are listed deletions first, then the desired children in the hook's order.
``pair(observed, desired)`` is the matching both apply strategies start from (server-side
apply: ``workers.sync.ssa_writes``).

``ChildWriter.run(writes, wrote)`` performs them concurrently and returns the errors (one
message per failed write) instead of stopping at the first, so one bad child does not block
the others. As in Metacontroller, a create that finds the name taken (AlreadyExists), a delete
that finds nothing (NotFound), and an update that finds the child gone or changed (NotFound,
Conflict: the next sync sees the new state) are not errors. Each successful write is reported
to ``wrote(group_resource, answer)``.

An ``Applier`` makes one controller's children match: ``DynamicApplier`` is ``plan`` then
``ChildWriter.run``; under server-side apply, ``workers.sync.ssa_writes.ChildApplier``.
``ChildTypes.of(...)`` gathers what a controller declares of its child types: where each is
written (``Target``), how it is updated, and what its hook may ask for.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from proto.api.controllers import UpdateMethod
from proto.api.hooks import ChildType, DesiredChild
from proto.api.objectmap import TypeKey
from proto.kube import errors
from proto.kube.resources import Resource, split_api_version
from proto.runtime.logs import get_logger
from proto.wire import ParentKey, ResourceInfo
from workers.apply import (
    ApplyError,
    ControllerRef,
    apply_update,
    changes_only_labels,
    create_body,
    put_body,
)
from workers.sync.observed import Observed
from workers.sync.writer import Writer

log = get_logger("metashard.children")

BACKGROUND = "Background"


class Action(enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    """PUT the merged object (InPlace)."""
    RECREATE = "recreate"
    """Delete so that a later sync creates it again (Recreate)."""
    DELETE = "delete"
    """Delete a child that is no longer desired."""


@dataclass(frozen=True, slots=True)
class Write:
    action: Action
    type: TypeKey
    namespace: str
    name: str
    body: dict[str, Any] | None = None
    """The object to create or PUT."""
    uid: str = ""
    """The delete precondition."""

    def describe(self) -> str:
        return describe(self.type, self.namespace, self.name)


def describe(type_key: TypeKey, namespace: str, name: str) -> str:
    """``ConfigMap ns/name`` (``Kind name`` when cluster-scoped), for messages."""
    return f"{type_key.kind} {namespace}/{name}" if namespace else f"{type_key.kind} {name}"


@dataclass(frozen=True, slots=True)
class Plan:
    writes: tuple[Write, ...]
    errors: tuple[str, ...]


def plan(
    *,
    observed: Mapping[TypeKey, Iterable[Observed]],
    desired: Sequence[DesiredChild],
    methods: Mapping[TypeKey, UpdateMethod],
    owner: ControllerRef,
    in_place_labels: frozenset[str] = frozenset(),
) -> Plan:
    pairs, deletes = pair(observed, desired)
    writes: list[Write] = []
    problems: list[str] = []
    for child, current in pairs:
        ident = (child.type, child.namespace, child.name)
        try:
            if current is None:
                writes.append(Write(Action.CREATE, *ident, body=create_body(child.object, owner)))
                continue
            merged, different = apply_update(current.obj, child.object)
        except ApplyError as err:
            problems.append(f"can't apply {describe(*ident)}: {err}")
            continue
        if not different or current.deleting:
            continue
        method = methods.get(child.type, UpdateMethod.ON_DELETE)
        if method.recreates and not _only_labels(current, child, in_place_labels):
            writes.append(Write(Action.RECREATE, *ident, uid=current.uid))
        elif method.recreates or method.in_place:
            writes.append(Write(Action.UPDATE, *ident, body=put_body(merged)))
    return Plan((*deletes, *writes), tuple(problems))


def _only_labels(current: Observed, child: DesiredChild, keys: frozenset[str]) -> bool:
    """Whether updating ``current`` to ``child`` changes nothing but the labels ``keys``."""
    if not keys:
        return False
    try:
        return changes_only_labels(current.obj, child.object, keys)
    except ApplyError:
        return False


def pair(
    observed: Mapping[TypeKey, Iterable[Observed]], desired: Sequence[DesiredChild]
) -> tuple[list[tuple[DesiredChild, Observed | None]], list[Write]]:
    """Each desired child with its observed one (None: to create), in the hook's order, and
    the deletions of the observed children no longer desired (those not already being
    deleted). Both apply strategies start here."""
    unmatched: dict[TypeKey, dict[tuple[str, str], Observed]] = {
        type_key: {(child.namespace, child.name): child for child in children}
        for type_key, children in observed.items()
    }
    pairs: list[tuple[DesiredChild, Observed | None]] = []
    for child in desired:
        group = unmatched.get(child.type)
        pairs.append((child, group.pop((child.namespace, child.name), None) if group else None))
    deletes = [
        Write(Action.DELETE, type_key, child.namespace, child.name, uid=child.uid)
        for type_key, group in unmatched.items()
        for child in group.values()
        if not child.deleting
    ]
    return pairs, deletes


# --- the writes ---------------------------------------------------------------------------


class Wrote(Protocol):
    """``ReconcileRequest.wrote`` conforms."""

    def __call__(self, group_resource: str, obj: Mapping[str, Any], *, action: str = ...) -> None:
        """Record a successful write."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where the objects of one type (a parent's, or one child type's) are written."""

    resource: Resource
    group_resource: str

    @classmethod
    def of(cls, info: ResourceInfo) -> Target:
        """The target a wire ``ResourceInfo`` names."""
        group, version = split_api_version(info.api_version)
        resource = Resource(
            group,
            version,
            info.resource,
            info.kind,
            info.namespaced,
            subresources=info.subresources,
        )
        return cls(resource, info.group_resource)


@dataclass(frozen=True, slots=True)
class ChildTypes:
    """A controller's child types, in declaration order: where each is written, its update
    method, and what the hook may return (``proto.api.hooks.desired_children``)."""

    targets: Mapping[TypeKey, Target]
    methods: Mapping[TypeKey, UpdateMethod]
    types: tuple[ChildType, ...]

    @classmethod
    def of(cls, infos: Sequence[ResourceInfo], methods: Sequence[UpdateMethod]) -> ChildTypes:
        """The types ``infos`` resolve to, each updated by its entry of ``methods``."""
        targets: dict[TypeKey, Target] = {}
        by_type: dict[TypeKey, UpdateMethod] = {}
        for info, method in zip(infos, methods, strict=True):
            type_key = TypeKey(info.api_version, info.kind)
            targets[type_key] = Target.of(info)
            by_type[type_key] = method
        types = tuple(ChildType(i.api_version, i.kind, i.namespaced) for i in infos)
        return cls(targets, by_type, types)


class ChildWriter:
    """Performs a plan's writes through a ``Writer``."""

    def __init__(self, writer: Writer, targets: Mapping[TypeKey, Target]) -> None:
        self._writer = writer
        self._targets = targets

    async def run(self, writes: Sequence[Write], wrote: Wrote) -> list[str]:
        """Perform ``writes``; return one message per write that failed."""
        if not writes:
            return []
        if len(writes) == 1:
            outcome = await self._write(writes[0], wrote)
            return [outcome] if outcome else []
        outcomes = await asyncio.gather(*(self._write(w, wrote) for w in writes))
        return [o for o in outcomes if o]

    async def _write(self, write: Write, wrote: Wrote) -> str | None:
        target = self._targets[write.type]
        namespace = write.namespace or None
        action = write.action
        try:
            if action is Action.CREATE:
                assert write.body is not None
                answer = await self._writer.create(target.resource, write.body, namespace=namespace)
            elif action is Action.UPDATE:
                assert write.body is not None
                answer = await self._writer.replace(
                    target.resource, write.body, namespace=namespace, name=write.name
                )
            else:
                answer = await self._writer.delete(
                    target.resource,
                    write.name,
                    namespace=namespace,
                    propagation_policy=BACKGROUND,
                    uid=write.uid,
                )
        except errors.AlreadyExists as err:
            if action is not Action.CREATE:
                return f"can't {action.value} {write.describe()}: {err}"
            log.debug("child already exists", child=write.describe())
            return None
        except errors.NotFound as err:
            if action is Action.CREATE:
                return f"can't create {write.describe()}: {err}"
            log.debug("child already gone", child=write.describe(), action=action.value)
            return None
        except errors.Conflict as err:
            if action is not Action.UPDATE:
                return f"can't {action.value} {write.describe()}: {err}"
            log.debug("child changed since the snapshot", child=write.describe())
            return None
        except errors.KubeError as err:
            return f"can't {action.value} {write.describe()}: {err}"
        log.debug("child written", child=write.describe(), action=action.value)
        wrote(target.group_resource, answer, action=action.value)
        return None


@dataclass(slots=True)
class Wanted:
    """What one sync asks of a parent's children: ``desired`` (the hook's, checked) against
    ``observed`` (the claimed ones), for the parent ``key`` (as last written: ``parent``),
    which ``owner`` names in their ownerReferences. A value of one sync, read-only by
    convention (not frozen: cheaper to build)."""

    key: ParentKey
    parent: Mapping[str, Any]
    owner: ControllerRef
    observed: Mapping[TypeKey, Iterable[Observed]]
    desired: Sequence[DesiredChild]


class Applier(Protocol):
    """Makes one controller's children match its hook (the worker's apply strategy)."""

    async def run(self, wanted: Wanted, wrote: Wrote) -> list[str]:
        """Delete, create and update; one message per child that failed."""
        ...


class DynamicApplier:
    """Dynamic apply: ``plan``, then ``ChildWriter.run``."""

    def __init__(
        self, writer: Writer, types: ChildTypes, *, in_place_labels: frozenset[str] = frozenset()
    ) -> None:
        self._writer = ChildWriter(writer, types.targets)
        self._methods = types.methods
        self._in_place_labels = in_place_labels

    async def run(self, wanted: Wanted, wrote: Wrote) -> list[str]:
        found = plan(
            observed=wanted.observed,
            desired=wanted.desired,
            methods=self._methods,
            owner=wanted.owner,
            in_place_labels=self._in_place_labels,
        )
        return [*found.errors, *await self._writer.run(found.writes, wrote)]
