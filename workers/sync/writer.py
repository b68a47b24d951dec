"""The API writes a reconcile makes, as a seam: ``Writer``.

``proto.kube.client.Client`` conforms; tests and benchmarks pass an in-memory fake. Every
method returns the API server's answer (the written object, or a ``Status`` for a delete that
removed the object) and raises ``proto.kube.errors.KubeError`` subclasses.
"""

from __future__ import annotations

from typing import Any, Protocol

from proto.kube.client import Body, PatchType
from proto.kube.resources import Resource


class Writer(Protocol):
    async def create(
        self, resource: Resource, body: Body, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """POST a new object."""
        ...

    async def replace(
        self,
        resource: Resource,
        body: Body,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """PUT the whole object (or a subresource); its resourceVersion is the precondition."""
        ...

    async def patch(
        self, resource: Resource, name: str, patch: Body, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """A JSON merge patch."""
        ...

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        """DELETE, with an optional uid precondition."""
        ...


class ApplyWriter(Writer, Protocol):
    """A ``Writer`` that also speaks server-side apply and the other PATCH flavours
    (``proto.kube.client.Client`` conforms)."""

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Body,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
    ) -> dict[str, Any]:
        """A PATCH of ``patch_type`` (a JSON merge patch by default)."""
        ...

    async def apply(
        self,
        resource: Resource,
        body: Body,
        *,
        field_manager: str,
        namespace: str | None = None,
        name: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Server-side apply of ``body`` as ``field_manager`` (``dryRun=All`` with
        ``dry_run``)."""
        ...
