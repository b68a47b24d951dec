"""Reads, watches and writes of Kubernetes objects as plain dicts (and raw JSON bytes).

Contract:
- Every call takes a ``Resource`` (from ``Discovery.resolve`` or built directly) and goes
  through the ``Session`` (rate limit, retries, typed errors).
- ``list()`` pages with ``limit``/``continue`` to the end and returns every item plus the
  list's resourceVersion; items get the ``apiVersion``/``kind`` the server leaves out of list
  items, so listed and watched objects look alike. A continue token that expires mid-list
  raises ``Gone``; the caller relists.
- ``watch()`` yields ``WatchEvent``s (see ``proto.kube.watch``) with bookmarks on by default,
  client-go's randomized ``timeoutSeconds`` (uniform in [5 min, 10 min]) and an inactivity
  deadline (2x the ~60 s bookmark interval) that raises ``TransportError``. The iterator ends
  when the server ends the stream; the caller resumes from the last ``resource_version``.
  Close it (``contextlib.aclosing``) when leaving early.
- Writes take a dict (or list, for JSON patches) or pre-encoded JSON bytes, which are sent
  as they are. A server-side apply body given as a dict is encoded by
  ``proto.kube.applybody`` (the API server reads it as YAML, where raw U+2028, U+2029 and NEL
  are line breaks and DEL or C1 controls are errors); bytes given to ``apply`` must be encoded
  that way already. ``replace`` sends the body's ``metadata.resourceVersion`` as the optimistic
  concurrency precondition. ``delete`` returns what the server returns: a ``Status`` or the
  object (when finalizers or the propagation policy keep it around).
- A client made with a ``gate`` (``Client(session, gate=...)``, or ``client.gated(gate)`` over
  the same session) asks it, for every write, for the ``ready`` check of that write:
  ``gate("<METHOD> <path>")`` (with `` <name>`` added for a create), called right before each
  attempt's bytes go out, with nothing awaited in between; what it raises stops the write
  unsent (``proto.kube.session``). A fenced worker checks there that it may still act
  (``workers.link.fencing``). Reads are never gated.
- ``subresource="status"`` addresses the ``status`` subresource of any write.
"""

from __future__ import annotations

import contextlib
import enum
import gc
import logging
import random
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from proto.kube import applybody
from proto.kube.resources import Discovery, Resource
from proto.kube.session import JSON, Session
from proto.kube.watch import WatchEvent, iter_events
from proto.runtime.http1 import Ready

log = logging.getLogger(__name__)

Body = Mapping[str, Any] | Sequence[Any] | bytes

WriteGate = Callable[[str], Ready]
"""Given a write's description, the ``ready`` check of its request (module docstring)."""

MIN_WATCH_TIMEOUT = 300  # client-go reflector: timeoutSeconds uniform in [min, 2 * min]
BOOKMARK_INTERVAL = 60.0
DEFAULT_INACTIVITY = 2 * BOOKMARK_INTERVAL
DEFAULT_PAGE = 500


class PatchType(enum.Enum):
    """The PATCH flavours, by Content-Type."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


@dataclass(frozen=True, slots=True)
class ObjectList:
    """The objects of a list (``items``), their JSON (``raws``, same order) and the list's
    ``resource_version`` to watch from."""

    items: list[dict[str, Any]]
    raws: list[bytes]
    resource_version: str


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Decoding a big page allocates many containers: don't let each batch of them
    trigger a collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _encode(body: Body, content_type: str) -> bytes:
    if isinstance(body, bytes):
        return body
    if content_type == PatchType.APPLY.value:
        return applybody.encode(body)
    return orjson.dumps(body)


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    params = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


def _write_params(
    *, dry_run: bool, field_manager: str | None, force: bool = False
) -> dict[str, str]:
    params = {}
    if dry_run:
        params["dryRun"] = "All"
    if field_manager:
        params["fieldManager"] = field_manager
    if force:
        params["force"] = "true"
    return params


class Client:
    """Kubernetes API calls over one ``Session`` (see the module docstring)."""

    def __init__(
        self,
        session: Session,
        discovery: Discovery | None = None,
        *,
        gate: WriteGate | None = None,
    ) -> None:
        self.session = session
        self.discovery = discovery if discovery is not None else Discovery(session)
        self._gate = gate

    def gated(self, gate: WriteGate) -> Client:
        """A client over the same session and discovery whose writes ask ``gate``."""
        return Client(self.session, self.discovery, gate=gate)

    async def resource(
        self, api_version: str, *, resource: str | None = None, kind: str | None = None
    ) -> Resource:
        """Shorthand for ``discovery.resolve``."""
        return await self.discovery.resolve(api_version, resource=resource, kind=kind)

    # --- reads ---------------------------------------------------------------------------

    async def get(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        response = await self.session.request("GET", resource.path(namespace, name, subresource))
        result: dict[str, Any] = response.json()
        return result

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> ObjectList:
        """All matching objects, following ``continue`` tokens page by page."""
        path = resource.path(namespace)
        params = _selectors(label_selector, field_selector)
        if limit > 0:
            params["limit"] = str(limit)
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if resource_version_match is not None:
            params["resourceVersionMatch"] = resource_version_match
        items: list[dict[str, Any]] = []
        list_rv = ""
        while True:
            response = await self.session.request("GET", path, params=params)
            with _gc_paused():
                page = response.json()
            items.extend(page.get("items") or ())
            metadata = page.get("metadata") or {}
            list_rv = metadata.get("resourceVersion") or list_rv
            token = metadata.get("continue")
            if not token:
                break
            # client-go's pager: a continuation carries only the token.
            params = {k: v for k, v in params.items() if not k.startswith("resourceVersion")}
            params["continue"] = token
        api_version, kind = resource.api_version, resource.kind
        raws = []
        for item in items:
            if "kind" not in item:
                item["apiVersion"] = api_version
                item["kind"] = kind
            raws.append(orjson.dumps(item))
        return ObjectList(items, raws, list_rv)

    def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        send_initial_events: bool = False,
        timeout_seconds: int | None = None,
        inactivity_timeout: float | None = DEFAULT_INACTIVITY,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events of ``resource`` from ``resource_version`` (see the module docstring)."""
        params = {"watch": "true", **_selectors(label_selector, field_selector)}
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if send_initial_events:
            params["sendInitialEvents"] = "true"
            params["resourceVersionMatch"] = "NotOlderThan"
        if timeout_seconds is None:
            timeout_seconds = random.randint(MIN_WATCH_TIMEOUT, 2 * MIN_WATCH_TIMEOUT)
        params["timeoutSeconds"] = str(timeout_seconds)
        stream = self.session.stream(
            "GET", resource.path(namespace), params=params, read_timeout=inactivity_timeout
        )
        return iter_events(stream)

    # --- writes --------------------------------------------------------------------------

    async def create(
        self,
        resource: Resource,
        body: Body,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        namespace = self._namespace(resource, body, namespace)
        return await self._write(
            "POST",
            resource.path(namespace),
            body,
            JSON,
            _write_params(dry_run=dry_run, field_manager=field_manager),
        )

    async def replace(
        self,
        resource: Resource,
        body: Body,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PUT the whole object; its ``metadata.resourceVersion`` is the precondition."""
        namespace = self._namespace(resource, body, namespace)
        path = resource.path(namespace, name or self._name(body), subresource)
        params = _write_params(dry_run=dry_run, field_manager=field_manager)
        return await self._write("PUT", path, body, JSON, params)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Body,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """PATCH with ``patch_type``; ``force`` is only meaningful for ``PatchType.APPLY``."""
        if force and patch_type is not PatchType.APPLY:
            raise ValueError("force is only valid for server-side apply")
        if patch_type is PatchType.APPLY and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        path = resource.path(namespace, name, subresource)
        params = _write_params(dry_run=dry_run, field_manager=field_manager, force=force)
        return await self._write("PATCH", path, patch, patch_type.value, params)

    async def apply(
        self,
        resource: Resource,
        body: Body,
        *,
        field_manager: str,
        namespace: str | None = None,
        name: str | None = None,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Server-side apply: the body as ``application/apply-patch+yaml``, JSON that reads
        back as the same value when parsed as YAML (``proto.kube.applybody``)."""
        return await self.patch(
            resource,
            name or self._name(body),
            body,
            namespace=self._namespace(resource, body, namespace),
            patch_type=PatchType.APPLY,
            subresource=subresource,
            dry_run=dry_run,
            field_manager=field_manager,
            force=force,
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """DELETE with ``DeleteOptions`` (preconditions on ``uid``/``resource_version``)."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        preconditions = {}
        if uid is not None:
            preconditions["uid"] = uid
        if resource_version is not None:
            preconditions["resourceVersion"] = resource_version
        if preconditions:
            options["preconditions"] = preconditions
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            options["dryRun"] = ["All"]
        path = resource.path(namespace, name)
        return await self._write("DELETE", path, options, JSON, {})

    # --- helpers -------------------------------------------------------------------------

    async def _write(
        self,
        method: str,
        path: str,
        body: Body,
        content_type: str,
        params: dict[str, str],
    ) -> dict[str, Any]:
        ready = None
        if self._gate is not None:
            what = f"{method} {path}"
            if method == "POST" and isinstance(body, Mapping):
                name = self._metadata(body).get("name")
                what = f"{what} {name}" if isinstance(name, str) else what
            ready = self._gate(what)
        response = await self.session.request(
            method,
            path,
            params=params,
            body=_encode(body, content_type),
            content_type=content_type,
            ready=ready,
        )
        result: dict[str, Any] = response.json()
        return result

    @staticmethod
    def _metadata(body: Body) -> Mapping[str, Any]:
        decoded = orjson.loads(body) if isinstance(body, bytes) else body
        metadata = decoded.get("metadata") if isinstance(decoded, Mapping) else None
        return metadata if isinstance(metadata, Mapping) else {}

    def _name(self, body: Body) -> str:
        name = self._metadata(body).get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("the body has no metadata.name; pass name=")
        return name

    def _namespace(self, resource: Resource, body: Body, namespace: str | None) -> str | None:
        if not resource.namespaced or namespace is not None:
            return namespace
        found = self._metadata(body).get("namespace")
        if not isinstance(found, str) or not found:
            raise ValueError(f"{resource} is namespaced: pass namespace= or set metadata.namespace")
        return found
