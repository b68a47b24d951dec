"""Reading the Secrets and ConfigMaps hooks name: one GET per object, refreshes, failures."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from manager.controllers.hookrefs import HookReferences, object_data, resolve_connections
from proto.api.endpoints import (
    Authorization,
    CABundle,
    Connection,
    KeyRef,
    ObjectRef,
    RefKind,
    Settings,
    decode_connections,
)
from proto.api.errors import UnresolvedReference
from proto.kube.errors import Forbidden, NotFound
from proto.kube.resources import Resource

TOKEN = ObjectRef(RefKind.SECRET, "ops", "token")
ROOTS = ObjectRef(RefKind.CONFIG_MAP, "ops", "roots")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class FakeApi:
    """Objects by (plural, namespace, name); records every GET."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.gets: list[tuple[str, str, str]] = []
        self.forbidden: set[str] = set()

    async def get(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        key = (resource.name, namespace or "", name)
        self.gets.append(key)
        if name in self.forbidden:
            raise Forbidden(403, {"reason": "Forbidden", "message": "nope"})
        if key not in self.objects:
            raise NotFound(404, {"reason": "NotFound", "message": "not found"})
        return self.objects[key]


def test_object_data_decodes_secrets_and_config_maps() -> None:
    secret = {"data": {"token": b64("abc"), "bad": "***"}}
    assert object_data(RefKind.SECRET, secret) == {"token": b"abc"}
    config_map = {"data": {"ca.crt": "PEM"}, "binaryData": {"der": b64("\x01")}}
    assert object_data(RefKind.CONFIG_MAP, config_map) == {"ca.crt": b"PEM", "der": b"\x01"}
    assert object_data(RefKind.SECRET, {}) == {}


@pytest.mark.asyncio
async def test_named_objects_are_read_once_then_refreshed_and_changes_reported() -> None:
    api = FakeApi()
    api.objects[("secrets", "ops", "token")] = {"data": {"token": b64("one")}}
    refs = HookReferences(api)
    await refs.read([TOKEN, ROOTS])
    await refs.read([TOKEN])
    assert api.gets == [("secrets", "ops", "token"), ("configmaps", "ops", "roots")]
    assert refs.lookup(TOKEN) == {"token": b"one"}
    assert refs.lookup(ROOTS) is None  # does not exist (yet)

    assert await refs.refresh() is False
    api.objects[("secrets", "ops", "token")] = {"data": {"token": b64("two")}}
    api.objects[("configmaps", "ops", "roots")] = {"data": {"ca.crt": "PEM"}}
    assert await refs.refresh() is True
    assert refs.lookup(TOKEN) == {"token": b"two"} and refs.lookup(ROOTS) == {"ca.crt": b"PEM"}

    refs.use([TOKEN])  # roots no longer used: forgotten, not read again
    api.gets.clear()
    await refs.refresh()
    assert api.gets == [("secrets", "ops", "token")]
    with pytest.raises(UnresolvedReference, match="ConfigMap ops/roots was not read"):
        refs.lookup(ROOTS)


@pytest.mark.asyncio
async def test_a_failed_read_is_reported_without_values() -> None:
    api = FakeApi()
    api.forbidden.add("token")
    refs = HookReferences(api)
    await refs.read([TOKEN])
    with pytest.raises(UnresolvedReference, match="cannot read Secret ops/token: 403 Forbidden"):
        refs.lookup(TOKEN)
    api.forbidden.clear()
    api.objects[("secrets", "ops", "token")] = {"data": {"token": b64("t")}}
    assert await refs.refresh() is True
    assert refs.lookup(TOKEN) == {"token": b"t"}


@pytest.mark.asyncio
async def test_connections_are_resolved_and_problems_named() -> None:
    api = FakeApi()
    api.objects[("secrets", "ops", "token")] = {"data": {"token": b64("s3cr3t")}}
    api.objects[("configmaps", "ops", "roots")] = {"data": {"ca.crt": "no certificate here"}}
    refs = HookReferences(api)
    settings = {
        "sync": Settings(authorization=Authorization("Bearer", KeyRef(TOKEN, "token"))),
        "finalize": Settings(authorization=Authorization("Bearer", KeyRef(TOKEN, "other"))),
        "customize": Settings(ca_bundle=CABundle(ref=KeyRef(ROOTS, "ca.crt"))),
    }
    encoded, problems = await resolve_connections(settings, refs)
    connections = decode_connections(encoded)
    assert connections["sync"] == Connection(authorization="Bearer s3cr3t")
    assert connections["finalize"].error == "Secret ops/token has no key 'other'"
    assert (
        connections["customize"].error
        == 'key "ca.crt" of ConfigMap ops/roots holds no PEM certificate'
    )
    assert problems == [connections["finalize"].error, connections["customize"].error]
    assert not any("s3cr3t" in p for p in problems)
    assert sorted(api.gets) == [("configmaps", "ops", "roots"), ("secrets", "ops", "token")]


@pytest.mark.asyncio
async def test_tls_material_that_does_not_load_is_a_problem() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"
    encoded, problems = await resolve_connections(
        {"sync": Settings(ca_bundle=CABundle(inline=pem))}, None
    )
    assert problems and problems[0].startswith("caBundle: not a usable PEM")
    assert decode_connections(encoded)["sync"].error == problems[0]
