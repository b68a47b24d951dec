from __future__ import annotations

from typing import Any

import pytest

from proto.kube.resources import Resource
from workers.link.fencing import FencedWriter
from workers.runner.runner import KeyDropped

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def create(self, resource: Resource, body: Any, **kw: Any) -> dict[str, Any]:
        self.calls.append("create")
        return {}

    async def replace(self, resource: Resource, body: Any, **kw: Any) -> dict[str, Any]:
        self.calls.append("replace")
        return {}

    async def patch(self, resource: Resource, name: str, patch: Any, **kw: Any) -> dict[str, Any]:
        self.calls.append("patch")
        return {}

    async def delete(self, resource: Resource, name: str, **kw: Any) -> dict[str, Any]:
        self.calls.append("delete")
        return {}


class Contact:
    def __init__(self) -> None:
        self.on = True

    def in_contact(self) -> bool:
        return self.on


@pytest.mark.asyncio
async def test_writes_go_through_only_while_in_contact() -> None:
    inner = Recorder()
    contact = Contact()
    writer = FencedWriter(inner, contact)  # type: ignore[arg-type]
    await writer.create(CONFIGMAPS, {}, namespace="ns")
    await writer.replace(CONFIGMAPS, {}, namespace="ns", name="a")
    await writer.patch(CONFIGMAPS, "a", {}, namespace="ns")
    await writer.delete(CONFIGMAPS, "a", namespace="ns")
    assert inner.calls == ["create", "replace", "patch", "delete"]
    contact.on = False
    for write in (
        writer.create(CONFIGMAPS, {}, namespace="ns"),
        writer.replace(CONFIGMAPS, {}, namespace="ns", name="a"),
        writer.patch(CONFIGMAPS, "a", {}, namespace="ns"),
        writer.delete(CONFIGMAPS, "a", namespace="ns"),
    ):
        with pytest.raises(KeyDropped):
            await write
    assert inner.calls == ["create", "replace", "patch", "delete"]
