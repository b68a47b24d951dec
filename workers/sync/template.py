"""One sync of one parent, written once for every controller kind.

``SyncTemplate(definition, steps, writer=..., hooks=..., events=..., ssa=...)`` is the
``Reconciler`` of one controller. Metacontroller's ``syncParentObject``, the same skeleton for
each kind; what differs, the kind supplies through its ``KindSteps`` (``workers.kinds``):

1. No parent in the snapshot (deleted, or no longer handled), a parent this controller does
   not sync (``steps.target``), or one it does not select (``steps.selected``) that does not
   carry our finalizer: nothing to do. Nor for a paused one (``proto.api.interventions``:
   ``metashard.io/paused: "true"`` on the parent or on the controller object) that is
   selected and not being deleted: no hook call, no write. A parent paused by its own
   annotation gets a Normal ``Paused`` event each time (repeats aggregated by the recorder),
   one whose annotation cannot be read a Warning ``InvalidAnnotation`` event, and is synced;
   the parents of a paused controller are skipped without an event (the coordinator puts
   one on the controller object). A paused parent being deleted, or no longer selected, is
   finalized as any other.
2. Our finalizer is added (with a finalize hook) or removed (without one)
   (``workers.sync.patches.sync_finalizer``).
3. Claim: ``steps.observe`` gives the children the hook is to see (a kind that adopts and
   releases before the hook has done so) and the orphans it may still adopt.
4. The sync hook is called, or the finalize hook (``finalizing: true``) for a parent being
   deleted or no longer selected (``workers.sync.finalizer``): ``steps.answer`` calls it
   through the ``HookCall`` it is given (once; a rollout once per revision), which POSTs the
   kind's request (``KindSpec.encode``, the snapshot's raw JSON embedded:
   ``workers.sync.hookrequest``) and decodes the answer (``KindSpec.decode``); the parent's
   key is the ETag cache key, and the request carries the reconcile's attempt headers
   (``proto.hooks.attempt``: its ``Claim`` and the parent as sent). The kind checks the
   desired children (``desired_children``) before anything is written. The answer's
   ``events`` then go on the parent, and its malformed ``events`` and ``conditions`` entries
   make one ``SyncError`` Warning event (``proto.api.reports``); its ``conditions`` the kind
   merges into the status it writes.
5. Then three phases, in the order the kind gives (``KindSpec.phases``; Metacontroller's
   order differs by kind):

   - ``PARENT``: ``steps.update_parent`` writes what the answer asks of the parent itself
     (status; a decorator's labels and annotations). Skipped for a parent the finalizer
     removal let go (deleting, no finalizer left): it no longer exists.
   - ``CHILDREN``: while the parent is alive, or being deleted under our finalizer without a
     garbage-collector finalizer (``finalizer.manages_children``, on the finalizers as they
     are then): orphans the hook wants are adopted, then children are created, updated and
     deleted (the worker's apply strategy: ``workers.sync.children.Applier``).
   - ``FINALIZER``: ``finalized: true`` from the finalize hook removes our finalizer. Should
     the parent be gone (NotFound), the phases after this one are skipped.

6. Child write errors fail the sync at the end: ``can't reconcile <noun> for <parent>``;
   ``resyncAfterSeconds`` becomes ``Outcome.requeue_after``.

Failures raise ``workers.sync.errors`` errors: a ``SyncFailure`` also emits a ``SyncError``
Warning event on the parent (``Sync error: <message>``). A malformed hook response, a hook that
times out, refuses the connection or answers an error status fails before anything is written.
A 429 raises ``RequeueAfter`` with the hook's ``Retry-After`` delay. Every successful write is
reported to ``request.wrote`` (the read-your-writes barrier of the next snapshot).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import orjson

from proto.api import names
from proto.api.controllers import Hook, HookName
from proto.api.errors import HookResponseError
from proto.api.hooks import DesiredChild
from proto.api.hooks import desired_children as check_children
from proto.api.interventions import PAUSED, annotations_of, pause_of
from proto.api.objectmap import TypeKey
from proto.api.reports import NO_REPORTS, Reports
from proto.api.selectors import Selector
from proto.hooks.attempt import attempt_headers
from proto.wire import ControllerDef, ParentKey
from workers.apply import ControllerRef
from workers.reconcile import Outcome, ReconcileRequest
from workers.sync import finalizer, hookrequest, patches
from workers.sync.children import ChildTypes, Target, Wanted, describe
from workers.sync.errors import SyncFailure
from workers.sync.hookcall import Decoded, Decoder, Events, HookCaller, Hooks
from workers.sync.hookrequest import HookRequest
from workers.sync.observed import Observed
from workers.sync.patches import Parent as Parent
from workers.sync.ssa_writes import ServerSideApply, applier_of
from workers.sync.writer import Writer

R = TypeVar("R", bound=Decoded)
"""A kind's decoded hook answer."""
U = TypeVar("U")
"""What an answer asks of the parent itself (``Answer.update``)."""

Related = Mapping[str, tuple[bytes, ...]]


class Phase(enum.Enum):
    """The writes after the hook's answer (module docstring, step 5)."""

    PARENT = "parent"
    CHILDREN = "children"
    FINALIZER = "finalizer"


@dataclass(frozen=True, slots=True)
class KindSpec(Generic[R]):
    """What the template knows of one controller of a kind."""

    kind: str
    """The controller's kind, ``CompositeController``: the hook metrics' label."""
    name: str
    finalizer: str
    """Our finalizer on its parents."""
    hooks: Mapping[HookName, Hook | None]
    """The sync hook, and the finalize hook when it has one."""
    children: ChildTypes
    phases: tuple[Phase, Phase, Phase]
    encode: Callable[[HookRequest], bytes]
    """The body of its hook requests (a CompositeController's: ``hookrequest.encode``)."""
    decode: Decoder[R]
    """Its hooks' answers."""
    noun: str = "children"
    """What its children are called in messages."""
    in_place_labels: frozenset[str] = frozenset()
    """A change of only these labels is written in place (``workers.sync.children.plan``)."""


@dataclass(slots=True)
class Children:
    """A parent's children as its hook sees them, claimed by ``selector`` (each type's in
    snapshot order), and the orphans the parent adopts if the hook wants them. Like the other
    values of one sync (``Answer``, ``HookCall``), read-only by convention and not frozen: a
    frozen dataclass costs five times as much to build."""

    owned: dict[TypeKey, list[Observed]]
    adoptable: Mapping[TypeKey, Mapping[tuple[str, str], Observed]] = field(default_factory=dict)
    selector: Selector = field(default_factory=Selector.everything)


@dataclass(slots=True)
class Answer(Generic[U]):
    """What the hook asked for: the desired children (checked), when to sync again, whether
    the finalize hook is done, what to write to the parent itself, and the events and
    conditions it reports (the kind merges ``reports.conditions`` into the status it writes:
    ``workers.sync.conditions``)."""

    desired: tuple[DesiredChild, ...]
    resync_after_seconds: float | None
    finalized: bool
    update: U
    reports: Reports = NO_REPORTS


class KindSteps(Protocol[R, U]):
    """What a controller kind supplies to the template, in the order it runs."""

    @property
    def spec(self) -> KindSpec[R]: ...

    def target(self, key: ParentKey) -> Target | None:
        """Where the parent of ``key`` lives; None: this controller does not sync it."""
        ...

    def selected(self, target: Target, obj: dict[str, Any]) -> bool:
        """Whether the controller selects the parent."""
        ...

    async def observe(self, request: ReconcileRequest, parent: Parent) -> Children:
        """The parent's children as its hook is to see them."""
        ...

    async def answer(
        self, request: ReconcileRequest, parent: Parent, children: Children, call: HookCall[R]
    ) -> Answer[U]:
        """Call the hook (``call``) and check what it wants."""
        ...

    async def update_parent(
        self, request: ReconcileRequest, target: Target, obj: dict[str, Any], answer: Answer[U]
    ) -> dict[str, Any]:
        """Write what ``answer`` asks of the parent ``obj`` itself; the parent as last
        written."""
        ...


def desired_children(
    wanted: Sequence[dict[str, Any]],
    parent: Parent,
    children: Children,
    types: ChildTypes,
    *,
    generate_selector: bool = False,
    declared_in: str = "childResources",
) -> tuple[DesiredChild, ...]:
    """The hook's ``wanted`` children, normalized and checked
    (``proto.api.hooks.desired_children``); a bad one raises ``SyncFailure``."""
    try:
        return check_children(
            list(wanted),
            parent_namespace=parent.namespace,
            parent_uid=parent.uid,
            child_types=types.types,
            selector=children.selector,
            generate_selector=generate_selector,
            declared_in=declared_in,
        )
    except HookResponseError as err:
        raise SyncFailure(str(err)) from None


@dataclass(slots=True)
class HookCall(Generic[R]):
    """The sync or finalize hook of one sync, to call with one version of the parent."""

    hooks: HookCaller
    spec: KindSpec[R]
    controller: bytes
    """The controller object's raw JSON."""
    request: ReconcileRequest
    parent: Parent
    children: Children
    finalizing: bool

    async def __call__(
        self,
        version: dict[str, Any],
        raw: bytes,
        related: Related,
        revision: str | None = None,
    ) -> R:
        """The answer for the parent as ``version`` (``raw``: its JSON) with ``related``
        objects; ``revision`` names the revision it was materialized from (None: the live
        parent), which has its own entry in the ETag cache."""
        request, finalizing = self.request, self.finalizing
        name = HookName.FINALIZE if finalizing else HookName.SYNC
        found, related_map = hookrequest.maps(
            self.hooks.hook(name).version,
            parent_namespace=self.parent.namespace,
            observed=self.children.owned,
            related=related,
        )
        body = self.spec.encode(HookRequest(self.controller, raw, found, related_map, finalizing))
        claim = request.claim
        headers = attempt_headers(
            epoch=claim.epoch, generation=claim.generation, attempt=claim.attempt, parent=version
        )
        return await self.hooks.call(
            name,
            body,
            request=request,
            decode=self.spec.decode,
            failed=f"{name.value} hook failed for {self.parent.describe(version)}",
            cache_key=request.key,
            cache_variant=revision,
            headers=headers,
        )


class SyncTemplate(Generic[R, U]):
    """Reconciles the parents of one controller (see the module docstring)."""

    def __init__(
        self,
        definition: ControllerDef,
        steps: KindSteps[R, U],
        *,
        writer: Writer,
        hooks: Hooks,
        events: Events,
        ssa: ServerSideApply | None = None,
    ) -> None:
        """``ssa``: apply children server-side through it instead of dynamic apply."""
        spec = steps.spec
        self._steps = steps
        self._controller = definition.object
        self._hooks = HookCaller(
            hooks,
            controller_type=spec.kind,
            controller_name=spec.name,
            defined=spec.hooks,
            connections=definition.connections,
        )
        self._spec = spec
        self._writer = writer
        self._events = events
        self._applier = applier_of(
            ssa, definition, spec.children, writer=writer, in_place_labels=spec.in_place_labels
        )
        self._has_finalize = spec.hooks.get(HookName.FINALIZE) is not None
        self._controller_paused = pause_of(annotations_of(orjson.loads(definition.object))).paused

    async def reconcile(self, request: ReconcileRequest) -> Outcome:
        raw = request.snapshot.parent
        target = self._steps.target(request.key)
        if raw is None or target is None:
            return Outcome()
        obj: dict[str, Any] = orjson.loads(raw)
        try:
            return await self._sync(request, target, raw, obj)
        except SyncFailure as err:
            self._events.emit(
                obj, names.EVENT_TYPE_WARNING, names.REASON_SYNC_ERROR, f"Sync error: {err}"
            )
            raise

    async def _sync(
        self, request: ReconcileRequest, target: Target, raw: bytes, obj: dict[str, Any]
    ) -> Outcome:
        spec, steps = self._spec, self._steps
        selected = steps.selected(target, obj)
        if selected and obj["metadata"].get("deletionTimestamp") is None and self._paused(obj):
            return Outcome()
        parent = await patches.sync_finalizer(
            self._writer,
            target,
            obj,
            raw,
            name=spec.finalizer,
            wanted=self._has_finalize,
            selected=selected,
            request=request,
        )
        if parent is None:
            return Outcome()
        children = await steps.observe(request, parent)
        finalizing = finalizer.finalizing(
            has_finalize_hook=self._has_finalize, deleting=parent.deleting, selected=selected
        )
        call = HookCall(self._hooks, spec, self._controller, request, parent, children, finalizing)
        answer = await steps.answer(request, parent, children, call)
        self._report(parent, answer.reports, finalizing=finalizing)
        return await self._write(request, parent, children, answer, finalizing=finalizing)

    def _paused(self, obj: dict[str, Any]) -> bool:
        """Whether the sync of ``obj`` is held back by its controller's pause or its own (the
        module docstring, step 1, says which events that makes)."""
        if self._controller_paused:
            return True
        pause = pause_of(annotations_of(obj))
        if pause.problem is not None:
            self._events.emit(
                obj, names.EVENT_TYPE_WARNING, names.REASON_INVALID_ANNOTATION, pause.problem
            )
        elif pause.paused:
            self._events.emit(
                obj,
                names.EVENT_TYPE_NORMAL,
                names.REASON_PAUSED,
                f'sync skipped: {PAUSED} is "true" (no hook call, no write until it is removed '
                'or "false")',
            )
        return pause.paused

    def _report(self, parent: Parent, reports: Reports, *, finalizing: bool) -> None:
        """The answer's events, on the parent; its malformed events and conditions, in one
        ``SyncError`` Warning event naming each (the rest of the answer applies)."""
        obj = parent.obj
        if reports.problems:
            hook = HookName.FINALIZE if finalizing else HookName.SYNC
            self._events.emit(
                obj,
                names.EVENT_TYPE_WARNING,
                names.REASON_SYNC_ERROR,
                f"Sync error: {hook.value} hook answer for {parent.describe()}: left out "
                + "; ".join(reports.problems),
            )
        for event in reports.events:
            self._events.emit(obj, event.type, event.reason, event.message)

    async def _write(
        self,
        request: ReconcileRequest,
        parent: Parent,
        children: Children,
        answer: Answer[U],
        *,
        finalizing: bool,
    ) -> Outcome:
        """The phases after the answer, in the kind's order (module docstring, step 5)."""
        spec, ours = self._spec, self._spec.finalizer
        obj, finalizers, gone = parent.obj, parent.finalizers, False
        finalized = finalizing and answer.finalized
        problems: list[str] = []
        for phase in spec.phases:
            if phase is Phase.PARENT and not gone:
                obj = await self._steps.update_parent(request, parent.target, obj, answer)
            elif phase is Phase.CHILDREN and finalizer.manages_children(
                deleting=parent.deleting,
                finalizers=finalizers,
                name=ours,
                has_finalize_hook=self._has_finalize,
            ):
                problems += await self._children(request, parent, obj, children, answer.desired)
            elif phase is Phase.FINALIZER and finalized and ours in finalizers:
                kept = finalizer.updated(finalizers, ours, finalizer.Change.REMOVE)
                updated = await patches.set_finalizers(
                    self._writer, parent.target, obj, kept, request
                )
                if updated is None:  # the parent is gone
                    break
                obj, finalizers = updated, finalizer.finalizers_of(updated["metadata"])
                gone = parent.deleting and not finalizers
        if problems:
            raise SyncFailure(
                f"can't reconcile {spec.noun} for {parent.describe(obj)}: " + "; ".join(problems)
            )
        return Outcome(requeue_after=answer.resync_after_seconds)

    async def _children(
        self,
        request: ReconcileRequest,
        parent: Parent,
        obj: dict[str, Any],
        children: Children,
        desired: tuple[DesiredChild, ...],
    ) -> list[str]:
        """Adopt the orphans the hook wants, then apply; one message per failed child."""
        spec = self._spec
        resource = parent.target.resource
        owner = ControllerRef(
            api_version=resource.api_version,
            kind=resource.kind,
            name=obj["metadata"]["name"],
            uid=parent.uid,
        )
        problems: list[str] = []
        owned = children.owned
        for child in desired:
            orphan = children.adoptable.get(child.type, {}).get((child.namespace, child.name))
            if orphan is None:
                continue
            adopted = await patches.adopt(
                self._writer,
                spec.children.targets[child.type],
                orphan,
                owner.as_owner_reference(),
                what="adopt " + describe(child.type, child.namespace, child.name),
                request=request,
                problems=problems,
                controller=spec.name,
            )
            if adopted is not None:
                owned[child.type].append(adopted)
        wanted = Wanted(request.key, obj, owner, owned, desired)
        return problems + await self._applier.run(wanted, request.wrote)
