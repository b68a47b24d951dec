"""Calling a controller's sync and finalize hooks, the same way for every kind.

- ``Hooks`` and ``Events`` are the seams to the webhook client and the event recorder
  (``proto.hooks.client.HookClient`` and ``proto.kube.events.EventRecorder`` conform).
- ``HookCaller.call(name, body, request=..., decode=..., failed=..., cache_key=...)`` POSTs
  ``body`` to the controller's hook ``name`` and decodes the answer with ``decode(answer,
  mode=...)`` (a ``Decoder``: ``proto.api``'s decoder of the kind's answer), inside the hook
  client's ``call_decoded``, so that an answer the decoder refuses is counted as
  ``invalid-response`` in the hook metrics, not as the 200 it came with; the time until the
  answer came (decoding excluded) is added to ``request.hook_seconds``. The hook's TLS
  material and credentials come resolved in the definition (``ControllerDef.connections``,
  given as ``connections``);
  ``cache_key`` (the parent's key) lets the hook's ETag cache serve a 304, with an entry per
  ``cache_variant`` (the revision a rollout calls the hook for); ``headers`` go with the request
  (the attempt's fencing headers, ``proto.hooks.attempt``). A sync answer's ``ttlSeconds``
  (``proto.api.ttl``) lets the hook client reuse it, without a call, for a sync of the same
  parent and variant whose request is the same, until it expires (``cache_key`` given; the
  time added to ``hook_seconds`` is then only the decoding's). A hook answering 429 raises
  ``RequeueAfter`` with its ``Retry-After`` delay (not a failure); any other hook error
  (transport, timeout, status) or a malformed answer raises ``SyncFailure`` with the message
  ``<failed>: <error>``.
- In ``loose`` mode the decoder returns its problems (unknown or duplicate fields) as
  ``warnings``: each distinct one is logged once per controller (``LooseWarnings``), not on
  every sync.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol, TypeVar

from proto.api.controllers import Hook, HookName, ResponseMode
from proto.api.decoding import LooseWarnings
from proto.api.endpoints import Connection, decode_connections
from proto.api.errors import HookResponseError
from proto.hooks.client import HookEndpoint
from proto.hooks.errors import HookError, HookRetryAfter
from proto.runtime.logs import get_logger
from workers.reconcile import ReconcileRequest, RequeueAfter
from workers.sync.errors import SyncFailure

log = get_logger("metashard.hooks")


T = TypeVar("T")


class Hooks(Protocol):
    """``proto.hooks.client.HookClient`` conforms."""

    async def call_decoded(
        self,
        endpoint: HookEndpoint,
        body: bytes,
        *,
        decode: Callable[[bytes], T],
        cache_key: Hashable | None = None,
        cache_variant: Hashable = None,
        headers: Mapping[str, str] | None = None,
        ttl_of: Callable[[T], float | None] | None = None,
    ) -> T:
        """POST ``body``; ``decode`` of the answer, which runs before the call is counted (a
        ``HookResponseError`` it raises counts as ``invalid-response``, not as the 200).
        ``cache_key`` (the parent's key) lets the hook's ETag cache serve a 304; each
        ``cache_variant`` of it has its own entry. ``headers`` go with the request. With
        ``ttl_of`` and a ``cache_key``, an answer still valid for the same request (its
        TTL) is reused: nothing is sent."""
        ...


class Events(Protocol):
    """``proto.kube.events.EventRecorder`` conforms."""

    def emit(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None: ...


class Decoded(Protocol):
    @property
    def warnings(self) -> tuple[str, ...]: ...

    @property
    def ttl_seconds(self) -> float | None: ...


D = TypeVar("D", bound=Decoded)
D_co = TypeVar("D_co", bound=Decoded, covariant=True)


class Decoder(Protocol[D_co]):
    """Decodes a hook's answer (``proto.api.hooks.decode_sync_response`` conforms); raises
    ``proto.api.errors.HookResponseError``."""

    def __call__(self, body: bytes, *, mode: ResponseMode) -> D_co: ...


class HookCaller:
    """The sync and finalize hooks of one controller (see the module docstring)."""

    def __init__(
        self,
        hooks: Hooks,
        *,
        controller_type: str,
        controller_name: str,
        defined: Mapping[HookName, Hook | None],
        connections: bytes = b"",
    ) -> None:
        """``connections`` is the definition's encoded ``ControllerDef.connections``."""
        self._hooks = hooks
        self._name = controller_name
        self._defined = {name: hook for name, hook in defined.items() if hook is not None}
        resolved = decode_connections(connections)
        self._endpoints = {
            name: HookEndpoint(
                name,
                hook.webhook,
                controller_type,
                controller_name,
                resolved.get(name.value) or Connection(),
            )
            for name, hook in self._defined.items()
        }
        self._warned = LooseWarnings()

    def hook(self, name: HookName) -> Hook:
        """The definition of hook ``name`` (``KeyError`` if the controller has none)."""
        return self._defined[name]

    async def call(
        self,
        name: HookName,
        body: bytes,
        *,
        request: ReconcileRequest,
        decode: Decoder[D],
        failed: str,
        cache_key: Hashable | None = None,
        cache_variant: Hashable = None,
        headers: Mapping[str, str] | None = None,
    ) -> D:
        mode = self._defined[name].response_mode
        started = time.perf_counter()
        answered: float | None = None

        def decoded(answer: bytes) -> D:
            nonlocal answered
            answered = time.perf_counter()
            return decode(answer, mode=mode)

        try:
            try:
                response = await self._hooks.call_decoded(
                    self._endpoints[name],
                    body,
                    decode=decoded,
                    cache_key=cache_key,
                    cache_variant=cache_variant,
                    headers=headers,
                    ttl_of=_ttl_seconds if name is HookName.SYNC else None,
                )
            finally:
                request.hook_seconds += (answered or time.perf_counter()) - started
        except HookRetryAfter as err:
            raise RequeueAfter(err.delay, str(err)) from None
        except (HookError, HookResponseError) as err:
            raise SyncFailure(f"{failed}: {err}") from None
        for warning in self._warned.fresh(response.warnings):
            log.warning("loose decoding of a hook answer", controller=self._name, problem=warning)
        return response


def _ttl_seconds(answer: Decoded) -> float | None:
    return answer.ttl_seconds
