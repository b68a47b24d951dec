"""Server-side apply on the embedded cluster through the project's own client (``proto.kube``):
ownership, conflicts, force, dropped fields, status applies and the managers of other writes."""

from __future__ import annotations

from typing import Any

import pytest

from proto.kube.client import Client, PatchType
from proto.kube.config import load_config
from proto.kube.errors import ApiError
from proto.kube.session import Session
from tests.integration.apiserver_client import running


def _owners(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields") or []}


def _config(**fields: Any) -> dict[str, Any]:
    """An apply configuration of the Deployment ``web`` with these top-level fields."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, **fields}


def _deployment(**spec: Any) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
    }
    selector = {"matchLabels": {"app": "web"}}
    return _config(spec={"selector": selector, "template": template, **spec})


@pytest.mark.asyncio
async def test_apply_ownership_conflicts_and_force_through_the_client() -> None:
    async with running() as (cluster, _):
        config = load_config(str(cluster.kubeconfig))
        async with Session(config) as session:
            client = Client(session)
            namespaces = await client.resource("v1", resource="namespaces")
            deployments = await client.resource("apps/v1", resource="deployments")
            await client.create(namespaces, {"metadata": {"name": "ssa"}})
            labelled = {
                **_deployment(replicas=2),
                "metadata": {"name": "web", "labels": {"t": "a"}},
            }
            created = await client.apply(
                deployments, labelled, field_manager="ctl", namespace="ssa"
            )
            assert _owners(created)["ctl"]["operation"] == "Apply"
            stale = {**labelled, "metadata": {**labelled["metadata"], "resourceVersion": "1"}}
            with pytest.raises(ApiError) as err:
                await client.apply(deployments, stale, field_manager="ctl", namespace="ssa")
            assert err.value.status == 409 and err.value.reason == "Conflict"
            with pytest.raises(ApiError) as err:
                await client.apply(
                    deployments,
                    _config(spec={"replicas": 5}),
                    field_manager="other",
                    namespace="ssa",
                    name="web",
                )
            assert err.value.status == 409
            assert err.value.body["details"]["causes"] == [
                {
                    "reason": "FieldManagerConflict",
                    "message": 'conflict with "ctl"',
                    "field": ".spec.replicas",
                }
            ]
            forced = await client.apply(
                deployments,
                _config(spec={"replicas": 5}),
                field_manager="other",
                namespace="ssa",
                force=True,
            )
            assert forced["spec"]["replicas"] == 5
            assert "f:replicas" not in _owners(forced)["ctl"]["fieldsV1"]["f:spec"]
            # ctl stops applying its label: it owned it alone, so the label goes
            dropped = await client.apply(
                deployments,
                _deployment(),
                field_manager="ctl",
                namespace="ssa",
            )
            assert dropped["spec"]["replicas"] == 5  # other's field stays
            assert "labels" not in dropped["metadata"]
            patched = await client.patch(
                deployments,
                "web",
                {"metadata": {"labels": {"tier": "x"}}},
                namespace="ssa",
                patch_type=PatchType.MERGE,
            )
            updaters = [
                e for e in patched["metadata"]["managedFields"] if e["operation"] == "Update"
            ]
            assert [e["fieldsV1"] for e in updaters] == [
                {"f:metadata": {"f:labels": {".": {}, "f:tier": {}}}}
            ]
            status = await client.apply(
                deployments,
                _config(status={"observedGeneration": 1}),
                field_manager="ctrl",
                namespace="ssa",
                name="web",
                subresource="status",
            )
            assert _owners(status)["ctrl"]["subresource"] == "status"
            assert status["status"] == {"observedGeneration": 1}


@pytest.mark.asyncio
async def test_field_manager_is_validated_on_every_write() -> None:
    async with running() as (_, api):
        await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": "fm"}})
        path = "/api/v1/namespaces/fm/configmaps"
        long = await api.request(
            "POST", path, {"metadata": {"name": "a"}}, params={"fieldManager": "m" * 129}
        )
        assert long.status == 422
        assert long.body["message"] == (
            'CreateOptions.meta.k8s.io "" is invalid: '
            "fieldManager: Too long: may not be more than 128 bytes"
        )
        bell = await api.request(
            "POST", path, {"metadata": {"name": "a"}}, params={"fieldManager": "a\x07"}
        )
        assert bell.status == 422
        assert bell.body["details"]["causes"][0]["message"].endswith(
            "invalid character U+0007 (at position 1)"
        )
        named = await api.request(
            "POST",
            path,
            {"metadata": {"name": "a"}, "data": {"k": "v"}},
            params={"fieldManager": "tool"},
        )
        assert [e["manager"] for e in named.body["metadata"]["managedFields"]] == ["tool"]


@pytest.mark.asyncio
async def test_apply_refuses_other_types_and_managed_fields() -> None:
    async with running() as (_, api):
        await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": "ap"}})
        path = "/api/v1/namespaces/ap/configmaps/c"
        apply = "application/apply-patch+yaml"
        params = {"fieldManager": "m"}
        wrong = {"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        reply = await api.request("PATCH", path, wrong, content_type=apply, params=params)
        assert (reply.status, reply.body["message"]) == (
            400,
            "invalid object type: apps/v1, Kind=ConfigMap",
        )
        owned = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c", "managedFields": [{"manager": "x"}]},
        }
        reply = await api.request("PATCH", path, owned, content_type=apply, params=params)
        assert (reply.status, reply.body["message"]) == (400, "metadata.managedFields must be nil")
