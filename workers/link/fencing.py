"""Writes and hook calls that check, each time, that this worker may still act.

A worker process can stall (a SIGSTOP, a long GC pause, a starved VM) for longer than its
fence timeout while a reconcile is half done; by the time it runs again the coordinator may
have given the key's slot to another worker. The membership fences itself when it notices,
but a reconcile already past its snapshot would go on writing in the meantime.

``FencedWriter`` and ``FencedHookClient`` ask their ``Contact`` (``workers.link.standing``)
before every API write and every hook call:

- The check runs right before the request's bytes are written, with nothing awaited in
  between (the ``ready`` check of ``proto.runtime.http1``, through the API client and the hook
  client): not before a rate limit, a wait for a connection or a 429's ``Retry-After`` sleep,
  which could let a request checked in time leave late. It asks ``may_start``: at least the
  safety margin before the fence deadline. When it says no, ``OutOfContact`` is raised and
  nothing is sent: the runner retries the key later, unless the worker fences first (then
  the slot's owner reconciles it).
- Should the bytes leave after the deadline all the same (the process was paused between the
  check and the send, longer than the safety margin), a warning says so, with the pause and
  the write or the hook call and its attempt id: another worker may be acting for the parent.
- After a hook answered, ``in_contact`` is asked again: a worker past its deadline (it was
  paused while the hook answered, or the coordinator went silent) discards the answer and
  raises ``OutOfContact``; nothing it would have written is written.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol, TypeVar

from proto.hooks.attempt import ATTEMPT
from proto.hooks.client import HookClient, HookEndpoint
from proto.kube.client import Body, Client, PatchType
from proto.kube.resources import Resource
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.http1 import Ready
from proto.runtime.logs import get_logger
from workers.runner.runner import OutOfContact

log = get_logger("metashard.fencing")

T = TypeVar("T")


class Contact(Protocol):
    """Whether this worker may still act on what it was given
    (``workers.link.standing.Standing``)."""

    def may_start(self) -> bool:
        """Whether a write or hook call may start now (not within the safety margin of the
        deadline)."""
        ...

    def in_contact(self) -> bool:
        """Whether the fence deadline has not passed."""
        ...

    def deadline(self) -> float:
        """The fence deadline, in the clock's seconds."""
        ...


class Fence:
    """The check of one worker's writes and hook calls (module docstring)."""

    def __init__(self, contact: Contact, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._contact = contact
        self._clock = clock

    def ready(self, **what: str) -> Ready:
        """The ``ready`` check of one request; ``what`` names it in the warning."""

        def check() -> Callable[[], None]:
            contact, clock = self._contact, self._clock
            if not contact.may_start():
                raise OutOfContact("too close to the fence deadline: not acting on a stale claim")
            checked, deadline = clock.now(), contact.deadline()

            def sent() -> None:
                at = clock.now()
                if at > deadline:
                    log.warning(
                        "a request went out after the fence deadline: this process was paused "
                        "between its check and the send, another worker may act for the parent",
                        paused=round(at - checked, 3),
                        late=round(at - deadline, 3),
                        **what,
                    )

            return sent

        return check

    def answered(self) -> None:
        """Raise ``OutOfContact`` if an answer came past the deadline (module docstring)."""
        if not self._contact.in_contact():
            raise OutOfContact("past the fence deadline when the hook answered: answer discarded")


def _write(verb: str, resource: Resource, namespace: str | None, name: str | None) -> str:
    where = f"{namespace}/{name}" if namespace else str(name)
    return f"{verb} {resource.name} {where}"


class FencedWriter:
    """An ``ApplyWriter`` whose writes go out only while the worker may act."""

    def __init__(self, writer: Client, fence: Fence) -> None:
        self._writer = writer
        self._fence = fence

    async def create(
        self, resource: Resource, body: Body, *, namespace: str | None = None
    ) -> dict[str, Any]:
        ready = self._fence.ready(write=_write("create", resource, namespace, _name(body)))
        return await self._writer.create(resource, body, namespace=namespace, ready=ready)

    async def replace(
        self,
        resource: Resource,
        body: Body,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        verb = f"replace {subresource}" if subresource else "replace"
        ready = self._fence.ready(write=_write(verb, resource, namespace, name or _name(body)))
        return await self._writer.replace(
            resource, body, namespace=namespace, name=name, subresource=subresource, ready=ready
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
        ready = self._fence.ready(write=_write("patch", resource, namespace, name))
        return await self._writer.patch(
            resource, name, patch, namespace=namespace, patch_type=patch_type, ready=ready
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
        ready = self._fence.ready(write=_write("apply", resource, namespace, name or _name(body)))
        return await self._writer.apply(
            resource,
            body,
            field_manager=field_manager,
            namespace=namespace,
            name=name,
            force=force,
            dry_run=dry_run,
            ready=ready,
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
        ready = self._fence.ready(write=_write("delete", resource, namespace, name))
        return await self._writer.delete(
            resource,
            name,
            namespace=namespace,
            propagation_policy=propagation_policy,
            uid=uid,
            ready=ready,
        )


def _name(body: Body) -> str | None:
    """The name in a body given as a mapping (bytes are not decoded for a log line)."""
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else None


class FencedHookClient(HookClient):
    """A ``HookClient`` whose calls go out, and whose answers count, only while the worker
    may act."""

    def __init__(self, *args: Any, fence: Fence, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fence = fence

    async def call_decoded(
        self,
        endpoint: HookEndpoint,
        body: bytes,
        *,
        decode: Callable[[bytes], T],
        cache_key: Hashable | None = None,
        cache_variant: Hashable = None,
        headers: Mapping[str, str] | None = None,
        ready: Ready | None = None,
    ) -> T:
        """``HookClient.call_decoded`` (which ``call`` goes through too), sent only while
        the worker may start a call, its answer kept only while the worker is in contact."""
        if ready is not None:
            raise TypeError("a fenced hook client makes its own ready check")
        attempt = (headers or {}).get(ATTEMPT, "")
        answer = await super().call_decoded(
            endpoint,
            body,
            decode=decode,
            cache_key=cache_key,
            cache_variant=cache_variant,
            headers=headers,
            ready=self._fence.ready(hook=endpoint.hook.value, attempt=attempt),
        )
        self._fence.answered()
        return answer
