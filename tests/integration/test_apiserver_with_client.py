"""The project's own client (``proto.kube``) against the emulator, through its kubeconfig."""

from __future__ import annotations

import contextlib

import pytest

from proto.kube.client import Client, PatchType
from proto.kube.config import load_config
from proto.kube.errors import ApiError
from proto.kube.session import Session
from tests.integration.apiserver_client import running


@pytest.mark.asyncio
async def test_client_round_trip_through_the_written_kubeconfig() -> None:
    async with running(token="tok") as (cluster, _):
        config = load_config(str(cluster.kubeconfig))
        async with Session(config) as session:
            client = Client(session)
            configmaps = await client.resource("v1", resource="configmaps")
            namespaces = await client.resource("v1", resource="namespaces")
            await client.create(namespaces, {"metadata": {"name": "c"}})
            created = await client.create(
                configmaps, {"metadata": {"name": "a"}, "data": {"k": "1"}}, namespace="c"
            )
            listed = await client.list(configmaps, namespace="c")
            assert [o["metadata"]["name"] for o in listed.items] == ["a"]
            events = []
            async with contextlib.aclosing(
                client.watch(configmaps, namespace="c", resource_version=listed.resource_version)
            ) as stream:
                await client.patch(
                    configmaps, "a", {"data": {"k": "2"}}, namespace="c", patch_type=PatchType.MERGE
                )
                async for event in stream:
                    events.append(event)
                    break
            assert events[0].type == "MODIFIED"
            assert events[0].object["data"] == {"k": "2"}
            stale = {**created, "data": {"k": "3"}}
            with pytest.raises(ApiError) as err:
                await client.replace(configmaps, stale, namespace="c")
            assert err.value.status == 409
            paged = await client.list(configmaps)
            assert "a" in [o["metadata"]["name"] for o in paged.items]
            deleted = await client.delete(configmaps, "a", namespace="c")
            assert deleted["status"] == "Success"
