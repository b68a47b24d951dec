"""CustomResourceDefinitions: serving, versions, schema validation, deletion."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.integration.apiserver_client import Api, running

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "x-kubernetes-list-type": "set",
                },
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}
GADGETS: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.org"},
    "spec": {
        "group": "example.org",
        "scope": "Namespaced",
        "names": {
            "plural": "gadgets",
            "kind": "Gadget",
            "shortNames": ["gd"],
            "categories": ["all"],
        },
        "versions": [
            {
                "name": "v1beta1",
                "served": True,
                "storage": False,
                "schema": {"openAPIV3Schema": SCHEMA},
            },
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": SCHEMA},
                "subresources": {"status": {}},
            },
        ],
    },
}
V1 = "/apis/example.org/v1/namespaces/crd/gadgets"


async def setup(api: Api) -> None:
    await api.namespace("crd")
    reply = await api.post(CRDS, GADGETS)
    assert reply.status == 201, reply.body


def gadget(name: str, **spec: object) -> dict[str, Any]:
    return {
        "apiVersion": "example.org/v1",
        "kind": "Gadget",
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.mark.asyncio
async def test_a_crd_is_established_and_discoverable() -> None:
    async with running() as (_, api):
        await setup(api)
        crd = (await api.get(f"{CRDS}/gadgets.example.org")).body
        established = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert established == {"NamesAccepted": "True", "Established": "True"}
        assert crd["status"]["acceptedNames"]["listKind"] == "GadgetList"
        assert crd["status"]["storedVersions"] == ["v1"]
        group = (await api.get("/apis/example.org")).body
        assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
        assert group["preferredVersion"]["version"] == "v1"
        resources = (await api.get("/apis/example.org/v1")).body["resources"]
        assert [r["name"] for r in resources] == ["gadgets", "gadgets/status"]
        assert (await api.get("/apis/example.org/v1beta1")).body["resources"][0][
            "name"
        ] == "gadgets"


@pytest.mark.asyncio
async def test_objects_are_served_at_every_version_and_defaulted() -> None:
    async with running() as (_, api):
        await setup(api)
        created = await api.post(V1, gadget("g", size=2))
        assert created.status == 201 and created.body["spec"]["color"] == "red"
        old = await api.get("/apis/example.org/v1beta1/namespaces/crd/gadgets/g")
        assert old.body["apiVersion"] == "example.org/v1beta1"
        assert old.body["spec"] == {"color": "red", "size": 2}
        listed = await api.get("/apis/example.org/v1beta1/gadgets")
        assert listed.body["kind"] == "GadgetList"
        assert listed.body["items"][0]["apiVersion"] == "example.org/v1beta1"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({}, "spec.size", "Required value"),
        (
            {"size": 11},
            "spec.size",
            "Invalid value: 11: spec.size in body should be less than or equal to 10",
        ),
        (
            {"size": 1, "color": "green"},
            "spec.color",
            'Unsupported value: "green": supported values: "red", "blue"',
        ),
        ({"size": 1, "tags": ["a", "a"]}, "spec.tags[1]", 'Duplicate value: "a"'),
        (
            {"size": True},
            "spec.size",
            'Invalid value: "boolean": spec.size in body must be of type integer: "boolean"',
        ),
    ],
)
async def test_schema_violations_are_422_with_the_real_messages(
    spec: dict[str, Any], field: str, message: str
) -> None:
    async with running() as (_, api):
        await setup(api)
        reply = await api.post(V1, gadget("bad", **spec))
        assert reply.status == 422
        assert reply.body["details"]["causes"] == [
            {
                "reason": reply.body["details"]["causes"][0]["reason"],
                "message": message,
                "field": field,
            }
        ]
        assert reply.body["message"] == f'Gadget.example.org "bad" is invalid: {field}: {message}'


@pytest.mark.asyncio
async def test_unknown_fields_are_pruned_with_a_warning_or_rejected_when_strict() -> None:
    async with running() as (_, api):
        await setup(api)
        body = gadget("p", size=1, extra=1, free={"any": {"thing": [1]}})
        reply = await api.post(V1, body)
        assert reply.status == 201
        assert reply.headers.getall("Warning") == ['299 - "unknown field \\"spec.extra\\""']
        assert reply.body["spec"]["free"] == {"any": {"thing": [1]}}
        strict = await api.request(
            "POST", V1, gadget("s", size=1, extra=1), params={"fieldValidation": "Strict"}
        )
        assert strict.status == 400
        assert 'strict decoding error: unknown field "spec.extra"' in strict.body["message"]


@pytest.mark.asyncio
async def test_put_without_resource_version_is_rejected_for_custom_resources() -> None:
    async with running() as (_, api):
        await setup(api)
        await api.post(V1, gadget("g", size=1))
        reply = await api.put(f"{V1}/g", gadget("g", size=2))
        assert reply.status == 422
        assert reply.body["message"] == (
            'gadgets.example.org "g" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
            "must be specified for an update"
        )


@pytest.mark.asyncio
async def test_deleting_a_crd_deletes_its_objects_and_stops_serving_it() -> None:
    async with running() as (_, api):
        await setup(api)
        await api.post(V1, gadget("a", size=1))
        held = gadget("b", size=1)
        held["metadata"]["finalizers"] = ["example.org/hold"]
        await api.post(V1, held)
        async with api.watch(V1) as watch:
            reply = await api.delete(f"{CRDS}/gadgets.example.org")
            assert reply.status == 200
            assert reply.meta["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
            assert {c["type"] for c in reply.body["status"]["conditions"]} >= {"Terminating"}
            await api.wait_gone(f"{V1}/a")
            assert (await api.get(f"{V1}/b")).meta["deletionTimestamp"]
            late = await api.post(V1, gadget("late", size=1))
            assert late.status == 405
            assert (await api.get(f"{CRDS}/gadgets.example.org")).status == 200
            await api.patch(f"{V1}/b", {"metadata": {"finalizers": None}})
            await api.wait_gone(f"{CRDS}/gadgets.example.org")
            assert await watch.ended()
        assert (await api.get(V1)).status == 404
        assert (await api.get("/apis/example.org")).status == 404
        names = [g["name"] for g in (await api.get("/apis")).body["groups"]]
        assert "example.org" not in names


@pytest.mark.asyncio
async def test_invalid_crds_are_rejected() -> None:
    async with running() as (_, api):
        bad = copy.deepcopy(GADGETS)
        bad["metadata"]["name"] = "wrong.example.org"
        bad["spec"]["versions"][0]["storage"] = True
        reply = await api.post(CRDS, bad)
        assert reply.status == 422
        fields = {c["field"] for c in reply.body["details"]["causes"]}
        assert fields == {"metadata.name", "spec.versions"}


@pytest.mark.asyncio
async def test_status_subresource_separates_spec_and_status() -> None:
    async with running() as (_, api):
        await setup(api)
        created = (await api.post(V1, gadget("s", size=1))).body
        status = await api.patch(f"{V1}/s/status", {"status": {"ready": True}, "spec": {"size": 5}})
        assert status.body["status"] == {"ready": True}
        assert status.body["spec"]["size"] == 1
        assert status.meta["generation"] == created["metadata"]["generation"]
        spec = await api.patch(f"{V1}/s", {"spec": {"size": 3}, "status": {"ready": False}})
        assert spec.body["status"] == {"ready": True} and spec.meta["generation"] == 2
