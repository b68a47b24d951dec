"""The messages the coordinator and the workers exchange.

The coordinator binds a ROUTER socket; each worker connects a DEALER whose routing id is its
worker id. Every message is one frame: a msgpack map with the protocol version ``v``, a type
tag ``t`` and the fields below (``proto.wire.codec``).

| message     | direction       | meaning                                                       |
|-------------|-----------------|---------------------------------------------------------------|
| HELLO       | worker -> coord | "I am worker_id, incarnation X, and can run N reconciles at   |
|             |                 | once": sent on start and after every reconnect, until WELCOME |
|             |                 | (``limits``: it takes part in per-controller limits, below)   |
| WELCOME     | coord -> worker | answer to the HELLO of ``incarnation``: the epoch, controller |
|             |                 | definitions, slot count, the slots this worker owns now       |
|             |                 | (usually none: ASSIGN follows), heartbeat interval and        |
|             |                 | timeout, and the generation of its slots' assignment          |
| CONTROLLERS | coord -> worker | the full current set of controller definitions, on change     |
| ASSIGN      | coord -> worker | you now own ``slots``, as of assignment ``generation``;       |
|             |                 | ``keys``, to enqueue at LOW priority, are empty from this     |
|             |                 | coordinator: the slots' keys follow as LOW KEYS, against the  |
|             |                 | worker's backlog. A large move may be split over several      |
|             |                 | ASSIGNs of the same epoch                                     |
| REVOKE      | coord -> worker | give up ``slots``: drop their queued keys, start no new       |
|             |                 | reconcile of them, let running ones finish, then RELEASED     |
| RELEASED    | worker -> coord | ``slots`` are released: no reconcile of them is running       |
| KEYS        | coord -> worker | enqueue ``keys`` (all in slots the worker owns) at priority   |
|             |                 | ``priority``; a LOW one says whether ``more`` LOW keys still  |
|             |                 | wait at the coordinator for this worker                       |
|             | worker -> coord | ``keys`` whose reconcile the worker defers (the echoes of its |
|             |                 | own writes): queue them LOW, behind the LOW keys waiting, for |
|             |                 | whoever owns them then; only to a coordinator whose WELCOME   |
|             |                 | said ``defers``                                               |
| FETCH       | worker -> coord | request the snapshot of ``key``; answered by SNAPSHOT or NACK |
|             |                 | with the same ``request_id``                                  |
| SNAPSHOT    | coord -> worker | the parent (``None``: not found or deleted), its observed     |
|             |                 | children, ControllerRevisions and related objects, as the raw |
|             |                 | JSON bytes the API server sent; ``permit``: answer DONE when  |
|             |                 | the reconcile it starts ends                                  |
| DONE        | worker -> coord | the reconcile of ``key`` that a SNAPSHOT with ``permit``      |
|             |                 | started has ended                                             |
| NACK        | coord -> worker | the FETCH ``request_id`` cannot be served, and why            |
| HEARTBEAT   | both            | liveness at ``epoch``; workers also report load (the          |
|             |                 | coordinator sends zeros)                                      |
| BYE         | both            | the sender is leaving (shutdown, lost leadership); ``reason`` |
|             |                 | is free text for logs                                         |

Invariants and conventions:
- An epoch is a non-negative integer that identifies one leadership term of the coordinator
  (the Lease's ``leaseTransitions``); it only grows. A worker acts only on messages of the
  epoch it currently knows, and a WELCOME of a newer epoch makes it drop everything it was
  doing for the older one. The coordinator answers a FETCH of a stale epoch, or for a key in a
  slot the worker does not own, with a NACK.
- A generation (WELCOME, ASSIGN) numbers the slot assignments of one epoch: every WELCOME and
  ASSIGN the coordinator sends carries a larger one than the last, so a slot's owner holds it
  under a larger generation than every earlier owner in the epoch. With the epoch it is the
  worker's fencing token for hooks (``proto.hooks.attempt``). Added after protocol version 2
  with a default: a frame without it (an older coordinator's) reads as generation 0.
- Object payloads (``ControllerDef.object``, everything in a SNAPSHOT) are the API server's
  raw JSON bytes, carried as msgpack ``bin`` and never decoded by the wire layer.
- ``ControllerDef.connections`` carries each hook's resolved TLS material and credentials
  (read by the coordinator from the Secrets and ConfigMaps the controller names): WELCOME and
  CONTROLLERS hold secrets, so the link must be private, and nothing may log them.
- Group keys of ``children`` and ``related`` are ``<Kind>.<apiVersion>`` (``Pod.v1``,
  ``Deployment.apps/v1``), as in Metacontroller's hook requests.
- Sequences are tuples, so every message is immutable and can be shared between tasks.
- Per-controller limits (``manager.term.throttle``), added after protocol version 2 without a
  new version, since an older peer keeps working: a worker says in its HELLO that it takes
  part (``limits``, default False); only such a worker gets a SNAPSHOT with ``permit`` (it
  answers DONE when that reconcile ends) and NACK THROTTLED (it drops the key: the
  coordinator keeps it and pushes it again when the controller may run it). An older worker
  sends no ``limits``, so it gets neither, and its reconciles are not limited; an older
  coordinator ignores ``limits`` and never asks for DONE.
- Deferred keys, added after protocol version 2 the same way: a coordinator that takes KEYS
  back from workers says so in its WELCOME (``defers``, default False). A worker sends KEYS
  only to such a coordinator (an older one would drop them, and the reconcile with them); an
  older worker never sends any. Such a coordinator's LOW KEYS also say whether ``more`` LOW
  keys wait there for the worker; a worker hands keys back only while they do (with none
  waiting, a key handed back would come straight back: the worker queues it LOW itself).
  From an older coordinator ``more`` is False, and it takes no keys back anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import ClassVar, Final

from proto.wire.keys import ParentKey

PROTOCOL_VERSION: Final = 2  # 2: SNAPSHOT carries revision_related


class Priority(IntEnum):
    """Queue priority of pushed keys; lower runs first."""

    LIVE = 0  # a watch event changed the parent or something it depends on
    LOW = 1  # resync, initial list after a (re)election, keys of newly assigned slots


class NackReason(StrEnum):
    """Why a FETCH was refused. The worker's reaction is in parentheses."""

    NOT_OWNER = "not_owner"  # the key's slot is not the worker's (drop the key)
    STALE_EPOCH = "stale_epoch"  # the FETCH carried an old epoch (wait for the new one)
    UNKNOWN_KEY = "unknown_key"  # no such parent resource for this controller (drop the key)
    UNKNOWN_CONTROLLER = "unknown_controller"  # no such controller (drop the key)
    TOO_LARGE = "too_large"  # the snapshot exceeds the frame size limit (retry with backoff)
    NOT_READY = "not_ready"  # the related objects are not known yet (retry with backoff)
    # the controller is at its limit; the coordinator pushes the key again (drop the key)
    THROTTLED = "throttled"


class ControllerKind(StrEnum):
    COMPOSITE = "CompositeController"
    DECORATOR = "DecoratorController"


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """One API resource a controller uses (parent, child, related), resolved by discovery."""

    api_version: str  # "apps/v1", "v1"
    resource: str  # plural: "deployments"
    kind: str  # "Deployment"
    namespaced: bool
    subresources: tuple[str, ...]  # "status", "scale", ...

    @property
    def group_resource(self) -> str:
        """``<plural>.<group>``, or the plural alone for the core group (``ParentKey.resource``)."""
        group, _, _ = self.api_version.rpartition("/")
        return f"{self.resource}.{group}" if group else self.resource


@dataclass(frozen=True, slots=True)
class ControllerDef:
    """A CompositeController or DecoratorController object and the resources it resolves to."""

    kind: ControllerKind
    name: str
    uid: str
    resource_version: str
    object: bytes  # the controller object as the API server's raw JSON
    resources: tuple[ResourceInfo, ...]
    # hook name -> resolved TLS material and credentials of its webhook, as JSON
    # (proto.api.endpoints.encode_connections; empty: none). Holds secrets: never log it.
    connections: bytes = field(default=b"", repr=False)


@dataclass(frozen=True, slots=True)
class Hello:
    TYPE: ClassVar[str] = "HELLO"
    worker_id: str
    incarnation: str  # a new uuid per process start
    concurrency: int  # reconciles the worker runs at once
    pid: int
    limits: bool = False  # answers a SNAPSHOT's permit with DONE, knows NACK THROTTLED


@dataclass(frozen=True, slots=True)
class Welcome:
    TYPE: ClassVar[str] = "WELCOME"
    epoch: int
    coordinator_id: str
    incarnation: str  # echoes the HELLO answered, so a late WELCOME can be told apart
    controllers: tuple[ControllerDef, ...]
    slot_count: int
    slots: tuple[int, ...]
    heartbeat_interval: float  # seconds between heartbeats, both ways
    heartbeat_timeout: float  # seconds of silence after which the peer is considered gone
    generation: int = 0  # of the assignment of ``slots`` (0: from an older coordinator)
    defers: bool = False  # takes KEYS back from workers (False: an older coordinator)


@dataclass(frozen=True, slots=True)
class Controllers:
    TYPE: ClassVar[str] = "CONTROLLERS"
    epoch: int
    controllers: tuple[ControllerDef, ...]


@dataclass(frozen=True, slots=True)
class Assign:
    TYPE: ClassVar[str] = "ASSIGN"
    epoch: int
    slots: tuple[int, ...]
    keys: tuple[ParentKey, ...]
    generation: int = 0  # of this assignment (0: from an older coordinator)


@dataclass(frozen=True, slots=True)
class Revoke:
    TYPE: ClassVar[str] = "REVOKE"
    epoch: int
    slots: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Released:
    TYPE: ClassVar[str] = "RELEASED"
    epoch: int
    slots: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Keys:
    TYPE: ClassVar[str] = "KEYS"
    epoch: int
    priority: Priority
    keys: tuple[ParentKey, ...]
    # LOW KEYS from the coordinator: more LOW keys wait there for this worker after these.
    more: bool = False


@dataclass(frozen=True, slots=True)
class Fetch:
    TYPE: ClassVar[str] = "FETCH"
    epoch: int
    request_id: int
    key: ParentKey
    # Read-your-writes barrier: group-resource -> the resourceVersion of the worker's latest
    # write of that resource for this key. The snapshot is taken once the coordinator's cache
    # of each resource has seen that version (or a bounded wait has passed).
    barrier: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Snapshot:
    TYPE: ClassVar[str] = "SNAPSHOT"
    epoch: int
    request_id: int
    key: ParentKey
    parent: bytes | None  # None: the parent was not found (deleted)
    children: Mapping[str, tuple[bytes, ...]]  # group key -> observed children
    revisions: tuple[bytes, ...]  # the parent's ControllerRevisions
    related: Mapping[str, tuple[bytes, ...]]  # group key -> related objects (customize hook)
    # Rolling updates with a customize hook: revision name -> group key -> the related objects
    # the customize hook selects for that revision's parent; only the older revisions whose
    # related objects differ from ``related`` (the live parent's, which the others share).
    revision_related: Mapping[str, Mapping[str, tuple[bytes, ...]]] = field(default_factory=dict)
    # The reconcile holds one of its controller's permits: answer DONE when it ends.
    permit: bool = False


@dataclass(frozen=True, slots=True)
class Done:
    TYPE: ClassVar[str] = "DONE"
    epoch: int
    key: ParentKey


@dataclass(frozen=True, slots=True)
class Nack:
    TYPE: ClassVar[str] = "NACK"
    epoch: int
    request_id: int
    reason: NackReason
    detail: str


@dataclass(frozen=True, slots=True)
class Heartbeat:
    TYPE: ClassVar[str] = "HEARTBEAT"
    epoch: int
    in_flight: int = 0  # reconciles running now (workers)
    queue_depth: int = 0  # keys waiting in the worker's queues (workers)


@dataclass(frozen=True, slots=True)
class Bye:
    TYPE: ClassVar[str] = "BYE"
    reason: str


Message = (
    Hello
    | Welcome
    | Controllers
    | Assign
    | Revoke
    | Released
    | Keys
    | Fetch
    | Snapshot
    | Done
    | Nack
    | Heartbeat
    | Bye
)

MESSAGE_TYPES: Final[tuple[type[Message], ...]] = (
    Hello,
    Welcome,
    Controllers,
    Assign,
    Revoke,
    Released,
    Keys,
    Fetch,
    Snapshot,
    Done,
    Nack,
    Heartbeat,
    Bye,
)
