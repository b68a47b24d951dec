"""API resources: the ``Resource`` value and ``Discovery`` of what the server serves.

Contract:
- ``Resource`` is a frozen value (group, version, plural name, kind, scope, verbs,
  subresources, short names). It can be built directly, without discovery (workers receive
  resolved resources over the wire), and builds request paths with ``path()``.
- ``Discovery.refresh()`` asks ``/api`` and ``/apis`` for aggregated discovery
  (``apidiscovery.k8s.io/v2``, one request each, GA since 1.30) and falls back to the legacy
  documents (``/api``, ``/api/v1``, ``/apis``, ``/apis/G/V`` for every served version) when the
  server answers with the legacy kinds (or 406). A group/version whose legacy document fails
  (e.g. an aggregated API server that is down) is skipped and logged, not fatal.
- ``Discovery.resolve(api_version, resource=... | kind=...)`` answers from what was read last
  (the first call refreshes everything). ``resource`` matches the plural name or a short name;
  ``kind`` matches the kind.
- A miss re-reads that group/version's own document (``/apis/G/V``, ``/api/v1``: one request;
  404 means it is not served) at once, so a CRD created a moment ago resolves at the first
  attempt, and then raises ``ResourceNotFound`` naming what it looked for. Re-reads are
  rate-limited per group/version (``min_refresh_interval``, 0.5 s), never globally: one missing
  resource does not delay another group's. A miss the rate limit keeps from re-reading raises
  ``ResourceNotFoundYet`` (with ``retry_after``) instead, unless the group/version was read
  since that resource was first asked for: only a read made after the question answers "not
  served" for sure. Callers that report a missing resource report only ``ResourceNotFound``
  proper.
- Concurrent misses of one group/version share one re-read; a re-read that fails raises its
  error and counts as no read.
- The table is replaced whole (by a refresh, or with one group/version changed by a re-read);
  resolutions never see half a read.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from proto.kube.errors import ApiError, NotFound, ResourceNotFound, ResourceNotFoundYet
from proto.kube.session import JSON, Session
from proto.runtime.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

MIN_REFRESH_INTERVAL = 0.5
"""Seconds between two re-reads of one group/version on misses."""
REMEMBERED_MISSES = 1024
"""Resources remembered as missing (with when they were first asked for), oldest dropped."""
GroupVersion = tuple[str, str]

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
_AGGREGATED_OR_JSON = f"{AGGREGATED},{JSON}"


def split_api_version(api_version: str) -> tuple[str, str]:
    """``"apps/v1"`` -> ``("apps", "v1")``; ``"v1"`` -> ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    if not version or "/" in group:
        raise ValueError(f"not an apiVersion: {api_version!r}")
    return group, version


_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_.~-]*")
"""What ``quote`` leaves as it is: namespaces and most object names (DNS subdomains)."""


def _segment(value: str) -> str:
    return value if _PLAIN_SEGMENT.fullmatch(value) else quote(value, safe="")


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource of one group/version, e.g. ``apps/v1 deployments``."""

    group: str
    version: str
    name: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The URL path of the collection (all namespaces if ``namespace`` is None), or of one
        object, or of one object's subresource."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is None and name is not None and self.namespaced:
            raise ValueError(f"{self.name} is namespaced: an object path needs a namespace")
        if namespace is not None:
            if not self.namespaced:
                raise ValueError(f"{self.name} is cluster-scoped: no namespace allowed")
            root = f"{root}/namespaces/{_segment(namespace)}"
        path = f"{root}/{self.name}"
        if name is not None:
            path = f"{path}/{_segment(name)}"
        if subresource is not None:
            if name is None:
                raise ValueError("a subresource needs an object name")
            path = f"{path}/{subresource}"
        return path

    def __str__(self) -> str:
        return f"{self.api_version} {self.name}"


def _from_aggregated(body: dict[str, Any]) -> list[Resource]:
    found: list[Resource] = []
    for group in body.get("items") or ():
        group_name = (group.get("metadata") or {}).get("name") or ""
        for version in group.get("versions") or ():
            for res in version.get("resources") or ():
                kind = (res.get("responseKind") or {}).get("kind") or ""
                found.append(
                    Resource(
                        group=group_name,
                        version=version["version"],
                        name=res["resource"],
                        kind=kind,
                        namespaced=res.get("scope") == "Namespaced",
                        verbs=tuple(res.get("verbs") or ()),
                        subresources=tuple(s["subresource"] for s in res.get("subresources") or ()),
                        short_names=tuple(res.get("shortNames") or ()),
                    )
                )
    return found


def _from_legacy(group: str, version: str, body: dict[str, Any]) -> list[Resource]:
    entries = body.get("resources") or ()
    subresources: dict[str, list[str]] = {}
    for res in entries:
        parent, slash, sub = res["name"].partition("/")
        if slash:
            subresources.setdefault(parent, []).append(sub)
    return [
        Resource(
            group=group,
            version=version,
            name=res["name"],
            kind=res.get("kind") or "",
            namespaced=bool(res.get("namespaced")),
            verbs=tuple(res.get("verbs") or ()),
            subresources=tuple(subresources.get(res["name"], ())),
            short_names=tuple(res.get("shortNames") or ()),
        )
        for res in entries
        if "/" not in res["name"]
    ]


class Discovery:
    """The server's resources, read on demand (see the module docstring)."""

    def __init__(
        self,
        session: Session,
        *,
        clock: Clock = SYSTEM_CLOCK,
        min_refresh_interval: float = MIN_REFRESH_INTERVAL,
    ) -> None:
        self._session = session
        self._clock = clock
        self._min_refresh_interval = min_refresh_interval
        self._table: dict[GroupVersion, tuple[Resource, ...]] = {}
        self._refreshed_at: float | None = None  # the start of the last full refresh
        self._read_at: dict[GroupVersion, float] = {}  # the start of each group/version's re-read
        # (group/version, "resource"|"kind", name) -> when a miss of it was first seen
        self._missed: OrderedDict[tuple[GroupVersion, str, str], float] = OrderedDict()
        self._lock = asyncio.Lock()
        self._reading: dict[GroupVersion, asyncio.Future[None]] = {}

    @property
    def resources(self) -> tuple[Resource, ...]:
        """Everything found by the last refresh."""
        return tuple(r for group in self._table.values() for r in group)

    async def refresh(self) -> None:
        """Re-read the server's discovery documents and replace the table."""
        async with self._lock:
            await self._refresh()

    async def _refresh(self) -> None:
        started = self._clock.now()
        found = await self._discover("/api") + await self._discover("/apis")
        table: dict[GroupVersion, list[Resource]] = {}
        for res in found:
            table.setdefault((res.group, res.version), []).append(res)
        self._table = {gv: tuple(rs) for gv, rs in table.items()}
        self._refreshed_at = started

    async def resolve(
        self, api_version: str, *, resource: str | None = None, kind: str | None = None
    ) -> Resource:
        """The resource named ``resource`` (plural or short name) or of kind ``kind``."""
        if (resource is None) == (kind is None):
            raise ValueError("resolve() needs exactly one of resource= or kind=")
        gv = split_api_version(api_version)
        miss = (gv, "resource", resource) if resource is not None else (gv, "kind", kind or "")
        called = self._clock.now()
        if self._refreshed_at is None:
            async with self._lock:
                if self._refreshed_at is None:  # not by a call that held the lock first
                    await self._refresh()
        found = self._lookup(gv, resource, kind)
        if found is None:
            asked = self._missed.setdefault(miss, called)
            if len(self._missed) > REMEMBERED_MISSES:
                self._missed.popitem(last=False)
            reading = self._reading.get(gv)
            now = self._clock.now()
            if reading is None and self._last_read(gv) + self._min_refresh_interval <= now:
                reading = self._start_read(gv)
            if reading is not None:
                await asyncio.shield(reading)
                found = self._lookup(gv, resource, kind)
            if found is None and self._last_read(gv) < asked:
                wait = self._last_read(gv) + self._min_refresh_interval - self._clock.now()
                raise ResourceNotFoundYet(
                    self._not_found(api_version, miss), retry_after=max(wait, 0.0)
                )
        if found is None:
            raise ResourceNotFound(self._not_found(api_version, miss))
        self._missed.pop(miss, None)
        return found

    def _last_read(self, gv: GroupVersion) -> float:
        """When the last completed read that covered ``gv`` started (-inf before any)."""
        full = self._refreshed_at if self._refreshed_at is not None else -math.inf
        return max(full, self._read_at.get(gv, -math.inf))

    def _start_read(self, gv: GroupVersion) -> asyncio.Future[None]:
        """Read ``gv``'s own document into the table, in a task its misses share."""
        reading = asyncio.ensure_future(self._read(gv, self._clock.now()))
        self._reading[gv] = reading

        def done(task: asyncio.Future[None]) -> None:
            del self._reading[gv]
            if not task.cancelled():
                task.exception()  # retrieved: the callers that waited got it

        reading.add_done_callback(done)
        return reading

    async def _read(self, gv: GroupVersion, started: float) -> None:
        group, version = gv
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            served: tuple[Resource, ...] | None = tuple(
                _from_legacy(group, version, (await self._session.request("GET", path)).json())
            )
        except NotFound:
            served = None  # not served (any more)
        table = dict(self._table)
        if served is None:
            table.pop(gv, None)
        else:
            table[gv] = served
        self._table = table
        self._read_at[gv] = started

    def _not_found(self, api_version: str, miss: tuple[GroupVersion, str, str]) -> str:
        gv, by, name = miss
        served = self._table.get(gv)
        if served is None:
            hint = f"the server does not serve {api_version}"
        else:
            hint = f"{api_version} serves: " + ", ".join(sorted(r.name for r in served))
        return f"no {by} {name!r} in {api_version} ({hint})"

    def _lookup(self, gv: GroupVersion, resource: str | None, kind: str | None) -> Resource | None:
        for res in self._table.get(gv, ()):
            if resource is not None and (res.name == resource or resource in res.short_names):
                return res
            if kind is not None and res.kind == kind:
                return res
        return None

    async def _discover(self, root: str) -> list[Resource]:
        try:
            response = await self._session.request("GET", root, accept=_AGGREGATED_OR_JSON)
            body = response.json()
        except ApiError as exc:
            if exc.status != 406:
                raise
            body = (await self._session.request("GET", root)).json()
        if body.get("kind") == "APIGroupDiscoveryList":
            return _from_aggregated(body)
        if body.get("kind") == "APIVersions":  # /api
            versions: Iterable[tuple[str, str]] = (("", v) for v in body.get("versions") or ())
        else:  # /apis: APIGroupList
            versions = (
                (group["name"], v["version"])
                for group in body.get("groups") or ()
                for v in group.get("versions") or ()
            )
        results = await asyncio.gather(*(self._legacy(g, v) for g, v in versions))
        return [res for batch in results for res in batch]

    async def _legacy(self, group: str, version: str) -> list[Resource]:
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            body = (await self._session.request("GET", path)).json()
        except ApiError as exc:
            log.warning("discovery of %s failed, skipping it: %s", path, exc)
            return []
        return _from_legacy(group, version, body)
