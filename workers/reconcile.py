"""The seam between the worker runtime and what a controller does with one parent key.

- A ``Reconciler`` turns one snapshot of a parent (from the coordinator's cache) into API
  writes. It is level-based: it may run any number of times for the same state and must leave
  the cluster the same. The runtime guarantees a key is never reconciled twice at once,
  across all workers.
- It returns an ``Outcome`` (``requeue_after``: reconcile again after that many seconds, e.g.
  a hook's ``resyncAfterSeconds``), or raises: ``RequeueAfter`` to be retried after a delay
  without counting a failure (a hook answering 429), anything else to be retried with
  per-key exponential backoff and counted as an error.
- Every successful write is reported through ``ReconcileRequest.wrote`` so the next snapshot
  of the same key is taken only once the coordinator's cache reflects it (read-your-writes);
  the request also keeps a readable line per write (``written``) and the time spent in hooks
  (``hook_seconds``), which the runner logs once per reconcile that wrote something.
- Every reconcile runs under a ``Claim`` (``ReconcileRequest.claim``): the coordinator's term,
  the generation of the assignment of the key's slot to this worker (together the fencing
  token, larger for every later holder of the slot) and the reconcile's own attempt id. Its
  hook requests carry them (``proto.hooks.attempt``).
- A ``ReconcilerFactory`` builds one reconciler per controller definition; the runtime calls
  it again whenever that definition changes. Where factories come from is the other half of
  this seam, ``workers.kinds.plugins``: metashard's kinds (the sync template with each kind's
  steps), or a ``--reconciler`` of one's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from proto.wire import ControllerDef, ParentKey, Snapshot


class RequeueAfter(Exception):
    """Retry the key after ``delay`` seconds; not counted as a failure."""

    def __init__(self, delay: float, reason: str = "") -> None:
        super().__init__(reason or f"requeue after {delay:g}s")
        self.delay = delay


@dataclass(frozen=True, slots=True)
class Outcome:
    """A successful reconcile; ``requeue_after`` asks for another run after that many seconds."""

    requeue_after: float | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """What a reconcile runs under (module docstring); the zero claim outside a worker."""

    epoch: int = 0
    generation: int = 0
    attempt: str = ""


@dataclass(slots=True)
class ReconcileRequest:
    """One reconcile: the key, the snapshot fetched for it, and a log of the writes made.

    ``writes``: the highest resourceVersion written per group-resource (the read-your-writes
    barrier); ``written``: one line per write, ``"<action> <group-resource> <namespace/name>"``;
    ``hook_seconds``: the time spent waiting for hook answers; ``claim``: what it runs under.
    """

    key: ParentKey
    snapshot: Snapshot
    claim: Claim = field(default_factory=Claim)
    writes: dict[str, int] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    hook_seconds: float = 0.0

    def wrote(self, group_resource: str, obj: Mapping[str, Any], *, action: str = "update") -> None:
        """Record a successful ``action`` on ``obj`` (the API server's answer) in
        ``group_resource``."""
        self.written.append(f"{action} {group_resource} {_name_of(obj)}")
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if isinstance(rv, str) and rv.isdigit():
            version = int(rv)
            if version > self.writes.get(group_resource, -1):
                self.writes[group_resource] = version


def _name_of(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` or ``name`` of an object, or of a ``Status`` answer to a delete."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or (obj.get("details") or {}).get("name") or "?"
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


class Reconciler(Protocol):
    async def reconcile(self, request: ReconcileRequest) -> Outcome:
        """Make the cluster match what the controller wants for ``request.key``."""
        ...


ReconcilerFactory = Callable[[ControllerDef], Reconciler]
