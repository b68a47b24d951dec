"""``/metrics``, health endpoints and discovery odds and ends."""

from __future__ import annotations

import pytest

from tests.integration.apiserver_client import running


@pytest.mark.asyncio
async def test_requests_are_counted_with_kube_apiserver_labels() -> None:
    async with running() as (cluster, api):
        await api.namespace("m")
        base = "/api/v1/namespaces/m/configmaps"
        await api.configmap("m", "a")
        await api.get(base)
        await api.get(f"{base}/a")
        await api.put(f"{base}/a", {"metadata": {"name": "a"}, "data": {"k": "2"}})
        await api.patch(f"{base}/a", {"data": {"k": "3"}})
        await api.get(f"{base}/missing")
        async with api.watch(base, resourceVersion="1"):
            pass
        await api.delete(f"{base}/a")
        await api.request("DELETE", base)
        await api.get("/api/v1/configmaps")
        count = cluster.metrics.count
        for verb in ("POST", "LIST", "GET", "PUT", "PATCH", "WATCH", "DELETE", "DELETECOLLECTION"):
            assert count(verb=verb, resource="configmaps") >= 1, verb
        assert count(verb="GET", resource="configmaps", code="404", scope="resource") == 1
        assert count(verb="LIST", resource="configmaps", scope="cluster") == 1
        assert count(verb="POST", resource="namespaces", scope="cluster") == 1
        text = (await api.request("GET", "/metrics")).body
        assert "# TYPE apiserver_request_total counter" in text
        assert (
            'apiserver_request_total{code="201",component="apiserver",group="",resource="configmaps",'
            'scope="namespace",subresource="",verb="POST",version="v1"} 1'
        ) in text
        assert 'apiserver_storage_objects{resource="namespaces"} 5' in text


@pytest.mark.asyncio
async def test_health_endpoints_answer_ok_without_a_token() -> None:
    async with running(token="secret") as (_, api):
        api.headers = {}
        for path in ("/healthz", "/livez", "/readyz"):
            reply = await api.request("GET", path)
            assert (reply.status, reply.body) == (200, "ok")
        assert (await api.get("/version")).status == 401


@pytest.mark.asyncio
async def test_unserved_subresources_and_unknown_paths() -> None:
    async with running() as (_, api):
        exec_ = await api.get("/api/v1/namespaces/default/pods/p/exec")
        assert exec_.status == 405 and "does not serve the pods/exec" in exec_.body["message"]
        assert (await api.get("/openapi/v2")).body == "404 page not found\n"
        assert (await api.get("/apis/apps/v2")).status == 404
        only_protobuf = await api.session.get(
            api.url + "/apis", headers={"Accept": "application/vnd.kubernetes.protobuf"}
        )
        assert only_protobuf.status == 406


@pytest.mark.asyncio
async def test_content_negotiation_for_resources() -> None:
    async with running() as (_, api):
        path = api.url + "/api/v1/namespaces"
        table_then_json = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        for accept, status in (
            (table_then_json, 200),
            ("application/vnd.kubernetes.protobuf, */*", 200),
            ("application/json;as=Table;v=v1;g=meta.k8s.io", 200),
            ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", 406),
            ("application/yaml", 406),
        ):
            async with api.session.get(path, headers={"Accept": accept}) as response:
                assert response.status == status, accept
        typed = await api.session.post(
            path, data=b"k8s\x00", headers={"Content-Type": "application/vnd.kubernetes.protobuf"}
        )
        assert typed.status == 415
        assert "protobuf" in (await typed.json())["message"]
        # No Content-Type at all (the official Python client sends none): JSON, as the API
        # server's input negotiation defaults to its first media type.
        untyped = await api.session.post(
            path,
            data=b'{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"untyped"}}',
            skip_auto_headers=["Content-Type"],
        )
        assert untyped.status == 201, await untyped.text()
        bad = await api.get("/api/v1/namespaces", watch="true", resourceVersion="abc")
        assert bad.status == 400
