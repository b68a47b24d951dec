"""A hosted controller as the coordinator sees it, whatever its kind: ``ControllerView``.

Each controller kind (``manager.kinds``) builds views of its controller objects (parsed spec
plus the resources discovery resolved); routing, snapshots, customize hooks and the term work
from these protocols only, so they hold no kind-specific code.

``HostedController`` is what every controller has whatever its kind: its identity, the
controller object, its hooks' connections, the ``key`` of a parent and what workers receive
(``definition``). ``SpecView`` implements all of it from the parsed spec, once for every
kind (a kind says which resources go into its ``definition``). ``ControllerView`` adds what
a kind writes itself, three questions:

- which resources it watches: ``parents`` (their objects are the keys a worker reconciles)
  and ``children`` (objects owned by, or claimable by, a parent);
- which parent keys an event maps to: ``parent_resource`` (which parent resource a key
  names), ``handles`` and ``ignores_update`` for parent events, ``owner_key`` for an owned
  child, ``may_adopt`` and ``adopts`` for an orphan;
- what a snapshot holds: ``children_of`` (the claimable children of one parent).

A kind whose controllers keep ControllerRevisions also implements ``KeepsRevisions`` (only
CompositeControllers do); the code asks ``keeps_revisions(view)``, and a kind without
revisions writes nothing about them.

``definition`` is what workers receive (``proto.wire.ControllerDef``), with each hook's
resolved TLS material and credentials (``connections``, set by ``manager.controllers.hosted``
through ``with_connections``). Views are immutable once built; a changed controller object, or
changed connection material, gets a new view. Helpers shared by every kind live
here too: ``parse_spec``, ``resolve_all``, ``resource_info``, ``group_resource``,
``group_key``, ``status_only``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from functools import cached_property
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar, cast, runtime_checkable

from manager.informers.store import Cached, Store
from proto.api import names
from proto.api.controllers import Hook, HookName
from proto.api.endpoints import Connection, Settings, decode_connections
from proto.api.errors import InvalidControllerError
from proto.api.objectmap import TypeKey
from proto.api.selectors import Selector
from proto.kube.errors import ResourceNotFound, ResourceNotFoundYet
from proto.kube.resources import Discovery, Resource
from proto.wire import ControllerDef, ControllerKind, ParentKey, ResourceInfo

T = TypeVar("T")

ControllerId = tuple[str, str]
"""(kind, name): controller names are unique per kind only."""


class Unusable(Exception):
    """The controller object cannot run; ``reason`` is the event reason to report it with."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def parse_spec(
    parse: Callable[[dict[str, Any]], T], obj: dict[str, Any], kind: ControllerKind
) -> T:
    """``parse(obj)``, or ``Unusable`` (CreateError): ``invalid <kind>: <why>``."""
    try:
        return parse(obj)
    except InvalidControllerError as e:
        raise Unusable(names.REASON_CREATE_ERROR, f"invalid {kind.value}: {e}") from e


async def resolve_all(
    discovery: Discovery, refs: Iterable[tuple[str, str]]
) -> tuple[Resource, ...]:
    """Resolve ``(apiVersion, resource)`` pairs; ``Unusable`` (CreateError) if one is unknown.

    ``ResourceNotFoundYet`` (discovery cannot tell yet) passes: it is no verdict."""
    try:
        return tuple([await discovery.resolve(v, resource=r) for v, r in refs])
    except ResourceNotFoundYet:
        raise
    except ResourceNotFound as e:
        raise Unusable(names.REASON_CREATE_ERROR, f"cannot resolve a resource: {e}") from e


def resource_info(resource: Resource) -> ResourceInfo:
    return ResourceInfo(
        api_version=resource.api_version,
        resource=resource.name,
        kind=resource.kind,
        namespaced=resource.namespaced,
        subresources=tuple(sorted(resource.subresources)),
    )


def group_resource(resource: Resource) -> str:
    return f"{resource.name}.{resource.group}" if resource.group else resource.name


def status_only(old: Cached, new: Cached) -> bool:
    """Whether ``ignoreStatusChanges`` drops the update from ``old`` to ``new``, as
    Metacontroller's ``updateParentObject`` (composite and decorator) decides: it changes
    neither ``metadata.generation``, the labels nor the annotations, and ``new`` is not being
    deleted (every update of an object being deleted counts: a finalize hook may be waiting
    on its status). So a change of ``metashard.io/sync-requested-at`` (``metashard sync``) is
    never status-only. An annotation value longer than 63 characters is kept as
    ``manager.informers.store.LONG_VALUE``, so a change within such a value alone is not seen,
    except in ``metashard.io/sync-requested-at``, which the store keeps whole."""
    return (
        not new.deleting
        and old.generation == new.generation
        and old.labels == new.labels
        and old.annotations == new.annotations
    )


def group_key(resource: Resource) -> str:
    """``<Kind>.<apiVersion>``: the hook's object-map group and the snapshot's key."""
    return TypeKey(resource.api_version, resource.kind).group_key


class Hooks(Protocol):
    """What the coordinator reads of a spec's hooks: only the customize hook."""

    @property
    def customize(self) -> Hook | None: ...


class Spec(Protocol):
    """What every parsed controller spec has (``CompositeController``, ``DecoratorController``)."""

    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def finalizer(self) -> str: ...
    @property
    def resync_period_seconds(self) -> float | None: ...
    @property
    def hooks(self) -> Hooks: ...

    def connection_settings(self) -> dict[HookName, Settings]: ...


S = TypeVar("S", bound=Spec)


class SpecView(Generic[S]):
    """The part of a ``ControllerView`` every kind reads from its parsed spec the same way,
    and builds the same way: ``key`` (kind, controller, the parent's group-resource, its
    namespace when namespaced, its name) and the ``definition`` of given resources
    (``_definition``)."""

    spec: S
    kind: ClassVar[ControllerKind]
    raw: bytes  # fields of each kind's dataclass
    resource_version: str
    connections: bytes  # default empty

    def key(self, resource: Resource, namespace: str, name: str) -> ParentKey:
        return ParentKey(
            self.kind.value,
            self.spec.name,
            group_resource(resource),
            namespace if resource.namespaced else "",
            name,
        )

    def _definition(self, resources: Iterable[Resource]) -> ControllerDef:
        """What workers receive: the controller object and ``resources``, in their order."""
        return ControllerDef(
            kind=self.kind,
            name=self.spec.name,
            uid=self.spec.uid,
            resource_version=self.resource_version,
            object=self.raw,
            resources=tuple(resource_info(r) for r in resources),
            connections=self.connections,
        )

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def id(self) -> ControllerId:
        return (self.kind.value, self.spec.name)

    @property
    def resync_period_seconds(self) -> float | None:
        return self.spec.resync_period_seconds

    @property
    def customize(self) -> Hook | None:
        return self.spec.hooks.customize

    @property
    def finalizer(self) -> str:
        return self.spec.finalizer

    def connection_settings(self) -> dict[HookName, Settings]:
        return self.spec.connection_settings()

    def connection(self, hook: HookName) -> Connection:
        return self._connections.get(hook.value) or Connection()

    @cached_property
    def _connections(self) -> dict[str, Connection]:
        return decode_connections(self.connections)

    def with_connections(self, connections: bytes) -> Self:
        return dataclasses.replace(self, connections=connections)  # type: ignore[type-var]


class HostedController(Protocol):
    """What every controller has, whatever its kind (``SpecView`` implements it but
    ``definition``)."""

    @property
    def id(self) -> ControllerId: ...
    @property
    def kind(self) -> ControllerKind: ...
    @property
    def name(self) -> str: ...
    @property
    def raw(self) -> bytes:
        """The controller object as the API server sent it."""
        ...

    @property
    def resource_version(self) -> str: ...
    @property
    def connections(self) -> bytes:
        """Each hook's resolved TLS material and credentials (``proto.api.endpoints``);
        holds secrets: never log it."""
        ...

    @property
    def definition(self) -> ControllerDef:
        """What workers receive; carries ``connections``."""
        ...

    def connection_settings(self) -> dict[HookName, Settings]:
        """The connection settings each hook uses (its own, or its endpoint config's)."""
        ...

    def connection(self, hook: HookName) -> Connection:
        """The resolved connection of one hook (empty when it uses none)."""
        ...

    def with_connections(self, connections: bytes) -> Self:
        """This view with other resolved connections (a new view: workers get the material)."""
        ...

    @property
    def resync_period_seconds(self) -> float | None: ...
    @property
    def customize(self) -> Hook | None:
        """The customize hook, if any (``manager.routing.related`` calls it)."""
        ...

    @property
    def finalizer(self) -> str:
        """The finalizer this controller puts on its parents (with a finalize hook)."""
        ...

    def key(self, resource: Resource, namespace: str, name: str) -> ParentKey:
        """The key of parent ``namespace/name`` of ``resource`` (one of ``parents``)."""
        ...


class ControllerView(HostedController, Protocol):
    """One valid controller of some kind: what its kind writes (see the module docstring)."""

    @property
    def parents(self) -> tuple[Resource, ...]: ...
    @property
    def children(self) -> tuple[Resource, ...]: ...

    def parent_resource(self, key: ParentKey) -> Resource | None:
        """Which of ``parents`` ``key`` names; ``None`` if none."""
        ...

    def handles(self, resource: Resource, parent: Cached) -> bool:
        """Whether this controller reconciles ``parent`` (selected, or carrying our finalizer)."""
        ...

    def ignores_update(self, resource: Resource, old: Cached, new: Cached) -> bool:
        """``ignoreStatusChanges``: an update of a parent that changes nothing that matters."""
        ...

    def watch_selector(self, resource: Resource) -> Selector | None:
        """A label selector every parent of ``resource`` that this controller handles
        matches, for the watch to carry (``manager.informers.shared``); None when it must
        see every object of ``resource``."""
        ...

    def owner_key(self, child: Cached) -> ParentKey | None:
        """The parent key of a child with a controller ownerReference, if it is ours."""
        ...

    def may_adopt(self, orphan: Cached) -> bool:
        """Whether some parent of this controller could claim ``orphan`` at all (cheap)."""
        ...

    def adopts(self, parent: Cached, orphan: Cached) -> bool:
        """Whether ``parent`` would claim ``orphan`` (``may_adopt`` holds)."""
        ...

    def children_of(self, parent: Cached, resource: Resource, store: Store) -> tuple[bytes, ...]:
        """The claimable children of ``parent`` among ``store``'s (of child ``resource``)."""
        ...


Versions = tuple[tuple[str, bytes], ...]
"""(revision name, parent JSON) of a parent's older revisions."""


@runtime_checkable
class KeepsRevisions(Protocol):
    """What a view adds when its kind keeps ControllerRevisions (CompositeControllers with a
    rolling child type); ask ``keeps_revisions`` rather than checking for it."""

    def revision_resource(self) -> Resource | None:
        """The ControllerRevision resource when this controller keeps revisions (then it is
        also the last of ``children``, so revisions are watched and routed like children, but
        they are not among a snapshot's children); None when it keeps none."""
        ...

    def revisions_of(self, parent: Cached, store: Store) -> tuple[bytes, ...]:
        """The ControllerRevisions ``parent`` claims, among ``store``'s."""
        ...

    def revision_parents(self, parent: Cached, revisions: tuple[bytes, ...]) -> Versions:
        """``(revision name, parent JSON)`` of each older revision of ``parent`` (among its
        ``revisions``' raw JSON) whose sync hook gets a parent other than the live one."""
        ...


def keeps_revisions(view: ControllerView) -> KeepsRevisions | None:
    """``view`` when it keeps ControllerRevisions now (its kind implements ``KeepsRevisions``
    and its ``revision_resource()`` is not None), else None. Cheap: the kind is checked once
    per view class."""
    if not _keeps_revisions(type(view)):
        return None
    keeper = cast(KeepsRevisions, view)
    return keeper if keeper.revision_resource() is not None else None


@functools.cache
def _keeps_revisions(cls: type) -> bool:
    return issubclass(cls, KeepsRevisions)
