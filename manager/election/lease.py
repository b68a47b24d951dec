"""The leader-election record and where it lives: a ``coordination.k8s.io/v1`` Lease.

- ``LeaderRecord`` is the Lease ``spec`` as client-go's ``LeaderElectionRecord`` reads it:
  holder identity, lease duration, acquire and renew times, transition count. A missing or
  malformed field reads as empty / zero, so a damaged Lease is one nobody validly holds.
- Times are ``MicroTime``: RFC 3339 in UTC with exactly six fractional digits (the API server
  rejects any other precision with 400). They are written for humans and other clients;
  the elector never compares them with its own clock.
- ``LeaseLock`` is the seam the elector talks through (client-go's ``resourcelock.Interface``):
  get, create, and an update that carries the read object's resourceVersion as the
  optimistic-concurrency precondition (a stale one raises ``Conflict``). ``ClientLeaseLock``
  implements it with ``proto.kube``; the update keeps the rest of the object as read
  (labels, annotations), replacing only ``spec``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from proto.kube.client import Client
from proto.kube.errors import NotFound
from proto.kube.resources import Resource

LEASES = Resource(
    group="coordination.k8s.io",
    version="v1",
    name="leases",
    kind="Lease",
    namespaced=True,
    verbs=("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"),
)

Lease = dict[str, Any]


def micro_time(moment: datetime) -> str:
    """``2030-01-01T00:00:00.000000Z``: a MicroTime as the API server accepts it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class LeaderRecord:
    """The election state held in a Lease's spec."""

    holder: str
    lease_duration_seconds: int
    acquire_time: str
    renew_time: str
    transitions: int

    @classmethod
    def from_lease(cls, lease: Lease) -> LeaderRecord:
        spec = lease.get("spec")
        if not isinstance(spec, dict):
            spec = {}
        return cls(
            holder=_str(spec.get("holderIdentity")),
            lease_duration_seconds=_int(spec.get("leaseDurationSeconds")),
            acquire_time=_str(spec.get("acquireTime")),
            renew_time=_str(spec.get("renewTime")),
            transitions=_int(spec.get("leaseTransitions")),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time:
            spec["renewTime"] = self.renew_time
        return spec


class LeaseLock(Protocol):
    """Reads and writes one Lease (see the module docstring)."""

    @property
    def description(self) -> str:
        """``namespace/name``, for logs."""
        ...

    async def get(self) -> Lease | None:
        """The Lease, or None when it does not exist."""
        ...

    async def create(self, record: LeaderRecord) -> Lease:
        """Create the Lease holding ``record``; ``AlreadyExists`` if someone was first."""
        ...

    async def update(self, lease: Lease, record: LeaderRecord) -> Lease:
        """Replace the spec of ``lease`` (as read) with ``record``; ``Conflict`` if stale."""
        ...


class ClientLeaseLock:
    """``LeaseLock`` over the Kubernetes API."""

    def __init__(self, client: Client, *, namespace: str, name: str) -> None:
        self._client = client
        self.namespace = namespace
        self.name = name

    @property
    def description(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def get(self) -> Lease | None:
        try:
            return await self._client.get(LEASES, self.name, namespace=self.namespace)
        except NotFound:
            return None

    async def create(self, record: LeaderRecord) -> Lease:
        body = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": record.to_spec(),
        }
        return await self._client.create(LEASES, body, namespace=self.namespace)

    async def update(self, lease: Lease, record: LeaderRecord) -> Lease:
        body = {**lease, "spec": record.to_spec()}
        return await self._client.replace(LEASES, body, namespace=self.namespace, name=self.name)
