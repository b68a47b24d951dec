"""Client CPU per unary request: ``proto.runtime.http1`` and the kube ``Session`` against aiohttp's
client.

A trivial aiohttp server runs in its own process (the same one the ``apiserver`` benchmark uses
as its baseline). This process POSTs a small JSON body N times at concurrency 32 and reports
the client's own CPU per request (``time.process_time``) and requests/s for:

- aiohttp's ``ClientSession`` (the baseline: what the hot path used before);
- ``proto.runtime.http1.HttpClient`` (what hook calls use);
- ``proto.kube.Session.request`` (what API writes use: token bucket, auth, retries, errors).

Each client is warmed up, then measured twice, interleaved; the better run is reported.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import aiohttp
import uvloop

from loadtest.bench._report import header, row
from loadtest.bench.apiserver import trivial_server
from proto.kube.cluster import ClusterConfig
from proto.kube.session import Session
from proto.runtime.http1 import HttpClient

CONCURRENCY = 32
PATH = "/api/v1/namespaces/bench/configmaps"
BODY = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"bench"}}'
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}

Send = Callable[[], Awaitable[bytes]]


async def _drive(send: Send, count: int) -> tuple[float, float]:
    """CPU µs per request and requests/s for ``count`` sends at ``CONCURRENCY``."""
    each = count // CONCURRENCY

    async def worker() -> None:
        for _ in range(each):
            await send()

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))  # warm: connections open
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    done = each * CONCURRENCY
    return (time.process_time() - cpu) / done * 1e6, done / (time.perf_counter() - wall)


async def _aiohttp(url: str, count: int) -> tuple[float, float]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)) as session:

        async def send() -> bytes:
            async with session.post(url + PATH, data=BODY, headers=HEADERS) as response:
                return await response.read()

        return await _drive(send, count)


async def _http1(url: str, count: int) -> tuple[float, float]:
    async with HttpClient() as client:

        async def send() -> bytes:
            return (await client.request("POST", url + PATH, headers=HEADERS, body=BODY)).body

        return await _drive(send, count)


async def _session(url: str, count: int) -> tuple[float, float]:
    async with Session(ClusterConfig(server=url), qps=0) as session:

        async def send() -> bytes:
            return (await session.request("POST", PATH, body=BODY)).body

        return await _drive(send, count)


def main(quick: bool) -> None:
    count = 2_000 if quick else 20_000
    header(f"http1: {count:,} POSTs at concurrency {CONCURRENCY} to a trivial aiohttp server")
    clients = {
        "aiohttp ClientSession": _aiohttp,
        "proto.runtime.http1": _http1,
        "kube Session": _session,
    }
    best: dict[str, tuple[float, float]] = {}
    with trivial_server() as (url, _):
        for _ in range(2):
            for name, run in clients.items():
                cpu, rate = uvloop.run(run(url, count))
                previous = best.get(name)
                best[name] = (cpu, rate) if previous is None else min(previous, (cpu, rate))
    base_cpu, base_rate = best["aiohttp ClientSession"]
    row("aiohttp ClientSession: client CPU per request (baseline)", base_cpu, "us")
    for name in ("proto.runtime.http1", "kube Session"):
        row(f"{name}: client CPU per request", best[name][0], "us", baseline=base_cpu)
    row("aiohttp ClientSession: requests/s (baseline)", base_rate, "req/s")
    for name in ("proto.runtime.http1", "kube Session"):
        row(f"{name}: requests/s", best[name][1], "req/s", baseline=base_rate)
