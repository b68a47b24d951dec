"""A raw HTTP client for the emulator's integration tests (aiohttp, JSON in and out)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp

from loadtest.apiserver import EmbeddedCluster, Settings


@dataclass
class Reply:
    status: int
    body: Any
    headers: Any

    @property
    def meta(self) -> dict[str, Any]:
        return self.body["metadata"]  # type: ignore[no-any-return]


class Api:
    def __init__(self, session: aiohttp.ClientSession, url: str, token: str | None = None) -> None:
        self.session = session
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Reply:
        headers = dict(self.headers)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.session.request(
            method, self.url + path, data=data, headers=headers, params=params
        ) as response:
            raw = await response.read()
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = raw.decode()
            return Reply(response.status, parsed, response.headers)

    async def get(self, path: str, **params: str) -> Reply:
        return await self.request("GET", path, params=params or None)

    async def post(self, path: str, body: Any) -> Reply:
        return await self.request("POST", path, body)

    async def put(self, path: str, body: Any) -> Reply:
        return await self.request("PUT", path, body)

    async def patch(self, path: str, body: Any, kind: str = "merge") -> Reply:
        return await self.request(
            "PATCH", path, body, content_type=f"application/{kind}-patch+json"
        )

    async def delete(self, path: str, body: Any = None, **params: str) -> Reply:
        return await self.request("DELETE", path, body, params=params or None)

    async def namespace(self, name: str) -> Reply:
        reply = await self.post("/api/v1/namespaces", {"metadata": {"name": name}})
        assert reply.status == 201, reply.body
        return reply

    async def configmap(self, namespace: str, name: str, **meta: Any) -> Reply:
        body = {"metadata": {"name": name, **meta}, "data": {"k": "v"}}
        reply = await self.post(f"/api/v1/namespaces/{namespace}/configmaps", body)
        assert reply.status == 201, reply.body
        return reply

    async def wait_gone(self, path: str, attempts: int = 200) -> None:
        for _ in range(attempts):
            if (await self.get(path)).status == 404:
                return
            await asyncio.sleep(0.005)
        raise AssertionError(f"{path} still exists")

    @asynccontextmanager
    async def watch(self, path: str, **params: str) -> AsyncIterator[Watch]:
        async with self.session.get(
            self.url + path, params={"watch": "true", **params}, headers=self.headers
        ) as response:
            assert response.status == 200
            yield Watch(response)


class Watch:
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    async def next(self, seconds: float = 5.0) -> dict[str, Any]:
        while True:
            line = await asyncio.wait_for(self.response.content.readline(), seconds)
            if not line:
                raise EOFError("the server ended the watch")
            if line.strip():
                return json.loads(line)  # type: ignore[no-any-return]

    async def ended(self, seconds: float = 5.0) -> bool:
        """True when the stream ends (cleanly or broken) within ``seconds``."""
        try:
            while True:
                line = await asyncio.wait_for(self.response.content.readline(), seconds)
                if not line:
                    return True
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
            return True


def fast_settings(**overrides: Any) -> Settings:
    """Settings for tests: the namespace controller does not wait its 5 s."""
    return Settings(**{"namespace_deletion_delay": 0.0, **overrides})


@asynccontextmanager
async def running(**options: Any) -> AsyncIterator[tuple[EmbeddedCluster, Api]]:
    options.setdefault("settings", fast_settings())
    async with EmbeddedCluster(**options) as cluster, aiohttp.ClientSession() as session:
        yield cluster, Api(session, cluster.url, options.get("token"))
