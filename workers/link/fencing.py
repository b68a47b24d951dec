"""Writes and hook calls that check, each time, that this worker may still act.

A worker process can stall (a SIGSTOP, a long GC pause, a starved VM) for longer than its
fence timeout while a reconcile is half done; by the time it runs again the coordinator may
have given the key's slot to another worker. The membership fences itself when it notices,
but a reconcile already past its snapshot would go on writing in the meantime.

``FencedWriter`` and ``FencedHookClient`` ask their ``Contact`` (``workers.link.standing``:
joined, heard from the coordinator within the fence timeout, its heartbeat loop not stalled; a
graceful leave still finishes what runs) right before every API write and every hook call, and
raise ``KeyDropped`` instead of acting when it says no: the runner drops the key (the slot's
owner reconciles it), and nothing is written, called or reported as an error.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar

from proto.hooks.client import HookClient, HookEndpoint
from proto.kube.client import Body, PatchType
from proto.kube.resources import Resource
from workers.runner.runner import KeyDropped
from workers.sync.writer import ApplyWriter

T = TypeVar("T")


class Contact(Protocol):
    """Whether this worker may still act on what it was given
    (``workers.link.standing.Standing``)."""

    def in_contact(self) -> bool: ...


def _check(contact: Contact) -> None:
    if not contact.in_contact():
        raise KeyDropped("out of contact with the coordinator: not acting on a stale claim")


class FencedWriter:
    """An ``ApplyWriter`` that refuses to write while the worker is out of contact."""

    def __init__(self, writer: ApplyWriter, contact: Contact) -> None:
        self._writer = writer
        self._contact = contact

    async def create(
        self, resource: Resource, body: Body, *, namespace: str | None = None
    ) -> dict[str, Any]:
        _check(self._contact)
        return await self._writer.create(resource, body, namespace=namespace)

    async def replace(
        self,
        resource: Resource,
        body: Body,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        _check(self._contact)
        return await self._writer.replace(
            resource, body, namespace=namespace, name=name, subresource=subresource
        )

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Body,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
    ) -> dict[str, Any]:
        _check(self._contact)
        return await self._writer.patch(
            resource, name, patch, namespace=namespace, patch_type=patch_type
        )

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
        _check(self._contact)
        return await self._writer.apply(
            resource,
            body,
            field_manager=field_manager,
            namespace=namespace,
            name=name,
            force=force,
            dry_run=dry_run,
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        _check(self._contact)
        return await self._writer.delete(
            resource, name, namespace=namespace, propagation_policy=propagation_policy, uid=uid
        )


class FencedHookClient(HookClient):
    """A ``HookClient`` whose calls are refused while the worker is out of contact."""

    def __init__(self, *args: Any, contact: Contact, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._contact = contact

    async def call_decoded(
        self,
        endpoint: HookEndpoint,
        body: bytes,
        *,
        decode: Callable[[bytes], T],
        cache_key: Hashable | None = None,
        cache_variant: Hashable = None,
    ) -> T:
        """``HookClient.call_decoded`` (which ``call`` goes through too), refused while out
        of contact."""
        _check(self._contact)
        return await super().call_decoded(
            endpoint, body, decode=decode, cache_key=cache_key, cache_variant=cache_variant
        )
