"""The Secrets and ConfigMaps that hook connections name, read one by one and kept fresh.

Contract:
- Only the named objects are read: one GET per object (``read``), never a list or a watch of
  all Secrets, so the coordinator needs ``get`` on exactly those and holds no other Secret.
- ``lookup(ref)`` answers from what was read: the object's data with values as bytes (a
  Secret's ``data`` decoded from base64; a ConfigMap's ``data`` as UTF-8 and ``binaryData``
  decoded), ``None`` when the object does not exist. A read that failed for another reason
  raises ``UnresolvedReference`` saying so (the reason, never a value).
- ``use(refs)`` names the objects still wanted; the others are forgotten (their data too).
- ``run(on_change)`` re-reads every wanted object every ``refresh_interval`` seconds and calls
  ``on_change()`` once per round in which any of them changed (created, deleted, data edited,
  or a read started or stopped failing): a rotated token or a renewed CA takes effect within
  that interval without editing the controller.
- ``resolve_connections(settings, references)`` reads what the hooks' settings name and
  resolves each hook's ``Connection`` (``proto.api.endpoints``), checking that TLS material
  loads (``proto.hooks.tls``); it returns them encoded for the controller definition, and the
  problems found (object and key, or which TLS part is wrong; never a value).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from proto.api.endpoints import (
    Connection,
    ObjectRef,
    RefKind,
    Settings,
    encode_connections,
    object_refs,
    resolve_all,
)
from proto.api.errors import UnresolvedReference
from proto.hooks.tls import build_context
from proto.kube.errors import ApiError, KubeError, NotFound
from proto.kube.resources import Resource
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.logs import get_logger

log = get_logger("metashard.hookrefs")

DEFAULT_REFRESH_SECONDS = 3.0

_RESOURCES = {
    RefKind.SECRET: Resource("", "v1", "secrets", "Secret", True),
    RefKind.CONFIG_MAP: Resource("", "v1", "configmaps", "ConfigMap", True),
}


class Getter(Protocol):
    """``proto.kube.client.Client`` conforms."""

    async def get(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...


_Data = dict[str, bytes] | None


class _Failed:
    """A read that failed for a reason other than NotFound."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Failed) and other.reason == self.reason

    def __hash__(self) -> int:
        return hash(self.reason)


def object_data(kind: RefKind, obj: Mapping[str, Any]) -> dict[str, bytes]:
    """The data of a Secret or ConfigMap as bytes; malformed entries are left out."""
    out: dict[str, bytes] = {}
    encoded: Mapping[str, Any] = obj.get("binaryData") or {}
    if kind is RefKind.SECRET:
        encoded = obj.get("data") or {}
    else:
        for key, value in (obj.get("data") or {}).items():
            if isinstance(value, str):
                out[key] = value.encode()
    for key, value in encoded.items():
        if isinstance(value, str):
            try:
                out[key] = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                continue
    return out


class HookReferences:
    """Reads and refreshes the named Secrets and ConfigMaps (see the module docstring)."""

    def __init__(
        self,
        client: Getter,
        *,
        refresh_interval: float = DEFAULT_REFRESH_SECONDS,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._client = client
        self._refresh_interval = refresh_interval
        self._clock = clock
        self._data: dict[ObjectRef, _Data | _Failed] = {}
        self._wanted: set[ObjectRef] = set()

    async def read(self, refs: Iterable[ObjectRef]) -> None:
        """Read the objects not read yet, and remember them as wanted."""
        for ref in refs:
            self._wanted.add(ref)
            if ref not in self._data:
                self._data[ref] = await self._get(ref)

    def use(self, refs: Iterable[ObjectRef]) -> None:
        """Keep only ``refs`` (and their data); forget every other object."""
        self._wanted = set(refs)
        for ref in [r for r in self._data if r not in self._wanted]:
            del self._data[ref]

    def lookup(self, ref: ObjectRef) -> Mapping[str, bytes] | None:
        """The data of ``ref`` as last read (``None``: it does not exist)."""
        found = self._data.get(ref)
        if isinstance(found, _Failed):
            raise UnresolvedReference(f"cannot read {ref}: {found.reason}")
        if ref not in self._data:
            raise UnresolvedReference(f"{ref} was not read")
        return found

    async def refresh(self) -> bool:
        """Read every wanted object again; whether anything changed."""
        changed = False
        for ref in sorted(self._wanted):
            data = await self._get(ref)
            if ref in self._wanted and self._data.get(ref) != data:
                self._data[ref] = data
                changed = True
        return changed

    async def run(self, on_change: Callable[[], None]) -> None:
        while True:
            await self._clock.sleep(self._refresh_interval)
            if await self.refresh():
                log.info("a Secret or ConfigMap used by a hook changed")
                on_change()

    async def _get(self, ref: ObjectRef) -> _Data | _Failed:
        try:
            obj = await self._client.get(_RESOURCES[ref.kind], ref.name, namespace=ref.namespace)
        except NotFound:
            return None
        except ApiError as err:
            return _Failed(f"{err.status} {err.reason}")
        except (KubeError, OSError, TimeoutError) as err:
            return _Failed(type(err).__name__)
        return object_data(ref.kind, obj)


async def resolve_connections(
    settings: Mapping[str, Settings], references: HookReferences | None
) -> tuple[bytes, list[str]]:
    """Hook name -> connection, encoded; and the problems found (see the module docstring)."""
    refs = object_refs(settings.values())
    if refs and references is not None:
        await references.read(refs)

    def lookup(ref: ObjectRef) -> Mapping[str, bytes] | None:
        if references is None:
            raise UnresolvedReference(f"cannot read {ref}: no API client to read it with")
        return references.lookup(ref)

    connections, problems = resolve_all(settings, lookup)
    for hook, connection in list(connections.items()):
        if connection.error is None and connection.tls_material != (None, None, None):
            try:
                build_context(*connection.tls_material)
            except ValueError as err:
                connections[hook] = Connection(error=str(err))
                problems.append(str(err))
    return encode_connections(connections), problems
