"""In-process doubles of the API server and of hook servers, for reconciler tests and benchmarks.

- ``MemoryCluster`` implements ``workers.sync.writer.Writer`` over a dict: create, replace (and
  ``/status``), JSON merge patch and delete, with the API server's rules that reconcilers rely
  on: one global resourceVersion, uids, ``generation`` bumped by spec changes, resourceVersion
  preconditions on replace and on patches that carry one (``Conflict``), uid preconditions on
  delete, ``AlreadyExists``, ``NotFound``, finalizers holding back a delete (then
  ``deletionTimestamp``) and letting go once removed. Every call is logged in ``calls`` as
  ``(verb, resource, subresource, namespace, name)``; ``fail(...)`` scripts an error for the
  next matching call. ``snapshot(...)`` builds what the coordinator would send for a parent.
- ``ScriptedHooks`` implements the hook client (``call_decoded``): ``respond`` turns the
  decoded request into the answer bytes (or raises a ``proto.hooks.errors`` error), which go
  through the caller's decoder; every request is kept in ``requests``.

Objects are stored as given (no deep copy) and handed out as they are: callers treat them as
read-only, as reconcilers treat snapshot objects.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from loadtest.apiserver.patch import merge_patch
from proto.hooks.client import HookEndpoint
from proto.kube import errors
from proto.kube.resources import Resource
from proto.wire import ParentKey, Snapshot

T = TypeVar("T")
Key = tuple[str, str, str]  # (resource plural, namespace, name)
Call = tuple[str, str, str, str, str]  # (verb, resource, subresource, namespace, name)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
            "message": message, "code": code}  # fmt: skip


@dataclass
class MemoryCluster:
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    failures: list[tuple[str, str, errors.ApiError]] = field(default_factory=list)
    _rv: Iterator[int] = field(default_factory=lambda: itertools.count(100))
    _uid: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    # --- scripting and reading ------------------------------------------------------------

    def fail(self, verb: str, name: str, error: errors.ApiError) -> None:
        """Make the next ``verb`` on an object called ``name`` raise ``error``."""
        self.failures.append((verb, name, error))

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((resource.name, namespace, name))

    def raw(self, resource: Resource, namespace: str, name: str) -> bytes:
        return orjson.dumps(self.objects[(resource.name, namespace, name)])

    def of(self, resource: Resource, namespace: str = "") -> list[dict[str, Any]]:
        return [
            obj
            for (plural, ns, _), obj in sorted(self.objects.items())
            if plural == resource.name and (not namespace or ns == namespace)
        ]

    def writes(self) -> list[Call]:
        return [c for c in self.calls if c[0] != "GET"]

    def snapshot(
        self,
        key: ParentKey,
        parent: Resource,
        children: Iterable[Resource],
        *,
        related: dict[str, tuple[bytes, ...]] | None = None,
    ) -> Snapshot:
        """The parent and every object of each child type in its namespace (all namespaces
        for a cluster-scoped parent), as raw JSON; claiming sorts them out. Likewise every
        ControllerRevision there."""
        obj = self.objects.get((parent.name, key.namespace, key.name))
        groups = {
            f"{r.kind}.{r.api_version}": tuple(
                orjson.dumps(o) for o in self.of(r, key.namespace if parent.namespaced else "")
            )
            for r in children
        }
        return Snapshot(
            epoch=1,
            request_id=1,
            key=key,
            parent=None if obj is None else orjson.dumps(obj),
            children=groups if obj is not None else {},
            revisions=tuple(
                orjson.dumps(o)
                for (plural, ns, _), o in sorted(self.objects.items())
                if plural == "controllerrevisions"
                and obj is not None
                and (ns == key.namespace or not parent.namespaced)
            ),
            related=related or {},
        )

    # --- the Writer protocol --------------------------------------------------------------

    def _enter(self, verb: str, resource: Resource, sub: str, namespace: str, name: str) -> None:
        self.calls.append((verb, resource.name, sub, namespace, name))
        for i, (want_verb, want_name, error) in enumerate(self.failures):
            if want_verb == verb and want_name == name:
                del self.failures[i]
                raise error

    def _stamp(self, obj: dict[str, Any], **meta: Any) -> dict[str, Any]:
        metadata = {**obj.get("metadata", {}), **meta, "resourceVersion": str(next(self._rv))}
        return {**obj, "metadata": metadata}

    def _current(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        obj = self.objects.get((resource.name, namespace, name))
        if obj is None:
            raise errors.NotFound(
                404, _status(404, "NotFound", f'{resource.name} "{name}" not found')
            )
        return obj

    @staticmethod
    def _precondition(current: dict[str, Any], wanted: Any) -> None:
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise errors.Conflict(409, _status(409, "Conflict", "the object has been modified"))

    def _store(
        self, resource: Resource, current: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        metadata = current["metadata"]
        if {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
            k: v for k, v in current.items() if k not in ("metadata", "status")
        }:
            new = self._stamp(new, generation=metadata.get("generation", 1) + 1)
        elif new != current:
            new = self._stamp(new)
        else:
            return current
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            del self.objects[(resource.name, metadata.get("namespace", ""), metadata["name"])]
            return new
        self.objects[(resource.name, metadata.get("namespace", ""), metadata["name"])] = new
        return new

    async def create(
        self, resource: Resource, body: Any, *, namespace: str | None = None
    ) -> dict[str, Any]:
        meta = body["metadata"]
        ns = namespace or meta.get("namespace") or ""
        self._enter("POST", resource, "", ns, meta["name"])
        key = (resource.name, ns, meta["name"])
        if key in self.objects:
            raise errors.AlreadyExists(409, _status(409, "AlreadyExists", "already exists"))
        extra = {"namespace": ns} if ns else {}
        obj = self._stamp(body, uid=f"uid-{next(self._uid)}", generation=1, **extra)
        self.objects[key] = obj
        return obj

    async def replace(
        self,
        resource: Resource,
        body: Any,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        ns, name = namespace or "", name or body["metadata"]["name"]
        self._enter("PUT", resource, subresource or "", ns, name)
        current = self._current(resource, ns, name)
        self._precondition(current, body["metadata"].get("resourceVersion"))
        if subresource == "status":
            new = {**current, "status": body.get("status")}
        else:
            system = (
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "deletionTimestamp",
            )
            metadata = {**body["metadata"]}
            for k in system:
                if k in current["metadata"]:
                    metadata[k] = current["metadata"][k]
            new = {**body, "metadata": metadata}
            if "status" in current:
                new["status"] = current["status"]
        return self._store(resource, current, new)

    async def patch(
        self, resource: Resource, name: str, patch: Any, *, namespace: str | None = None
    ) -> dict[str, Any]:
        ns = namespace or ""
        self._enter("PATCH", resource, "", ns, name)
        current = self._current(resource, ns, name)
        self._precondition(current, (patch.get("metadata") or {}).get("resourceVersion"))
        return self._store(resource, current, merge_patch(current, patch))

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        ns = namespace or ""
        self._enter("DELETE", resource, "", ns, name)
        current = self._current(resource, ns, name)
        if uid and uid != current["metadata"]["uid"]:
            raise errors.Conflict(409, _status(409, "Conflict", "Precondition failed: UID"))
        if current["metadata"].get("finalizers"):
            return self._store(
                resource, current, merge_patch(current, {"metadata": {"deletionTimestamp": "now"}})
            )
        del self.objects[(resource.name, ns, name)]
        return {"kind": "Status", "apiVersion": "v1", "status": "Success"}


Responder = Callable[[dict[str, Any]], bytes]


@dataclass
class ScriptedHooks:
    """A hook client whose answers come from ``respond(request)``; with ``keep`` it records
    each request, the ETag cache variant and the headers it was made with. It caches nothing:
    every call is answered, whatever its ``cache_key`` or ``ttl_of``."""

    respond: Responder
    requests: list[tuple[HookEndpoint, dict[str, Any]]] = field(default_factory=list)
    variants: list[Hashable] = field(default_factory=list)
    headers: list[Mapping[str, str]] = field(default_factory=list)
    keep: bool = True

    async def call_decoded(
        self,
        endpoint: HookEndpoint,
        body: bytes,
        *,
        decode: Callable[[bytes], T],
        cache_variant: Hashable = None,
        headers: Mapping[str, str] | None = None,
        **_: Any,
    ) -> T:
        request = orjson.loads(body)
        if self.keep:
            self.requests.append((endpoint, request))
            self.variants.append(cache_variant)
            self.headers.append(headers or {})
        return decode(self.respond(request))
