"""What a reconciler may use, shared by every controller of one worker process."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from proto.api.revisions import DEFAULT_HISTORY_LIMIT
from proto.hooks.client import HookClient
from proto.kube.client import Client
from proto.kube.events import EventRecorder
from proto.runtime.http1 import HttpClient
from workers.sync.ssa_writes import ServerSideApply
from workers.sync.writer import Writer


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What a reconciler may use: the worker's identity, API client (writes go through
    ``writer``), HTTP client, metrics, the webhook client (hook metrics on ``registry``; its
    calls, like the writes, are refused once the worker is out of contact with the
    coordinator) and the event recorder (component ``metacontroller``), all shared by every
    controller of the process. ``cluster_revision_namespace`` is where the ControllerRevisions
    of cluster-scoped parents are written (``--cluster-revision-namespace``);
    ``revision_history_limit`` how many childless ones a parent keeps unless its controller's
    annotation says otherwise (``--revision-history-limit``). ``ssa`` is set under
    ``--apply-strategy server-side-apply``: children are then applied through it instead of
    dynamic apply."""

    worker_id: str
    client: Client  # reads
    writer: Writer  # writes: refused while the worker is out of contact (workers.link.fencing)
    http: HttpClient
    registry: CollectorRegistry
    hooks: HookClient
    events: EventRecorder
    cluster_revision_namespace: str = "default"
    revision_history_limit: int = DEFAULT_HISTORY_LIMIT
    ssa: ServerSideApply | None = None
