"""The embedded cluster's write and watch throughput, against a bare aiohttp server.

The emulator runs in its own process (``python -m loadtest.apiserver``). This process creates
N ConfigMaps at concurrency 64 while one watcher follows the namespace, and reports:

- writes/s (creates answered), and watch events/s delivered to the watcher;
- the baseline: the same client against a trivial aiohttp handler in a process of the same
  kind (uvloop, one catch-all route answering a small JSON body), so the ratio is the
  emulator's own cost per request;
- memory: the emulator's RSS growth per stored object, and the stored bytes per object.

The writes go through the project's client (``proto.kube.Client`` over one ``Session``, its
rate limit opened wide); the watcher reads the raw stream, counting delivered events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson

from loadtest.apiserver.background import ClusterProcess
from loadtest.bench._report import header, row
from proto.kube.client import Client
from proto.kube.cluster import ClusterConfig
from proto.kube.resources import Resource
from proto.kube.session import Session

CONCURRENCY = 64
NAMESPACE = "bench"

_TRIVIAL_SERVER = """
import sys, asyncio, uvloop
from aiohttp import web
async def handle(request):
    await request.read()
    return web.Response(body=b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{}}',
                        status=201, content_type="application/json")
async def main():
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()
uvloop.install()
asyncio.run(main())
"""


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _body(i: int) -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i:06d}", "labels": {"app": "bench", "shard": str(i % 16)}},
            "data": {"key": f"value-{i}", "other": "x" * 64},
        }
    ).encode()


CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)


async def _write_all(url: str, count: int) -> tuple[float, int]:
    """Create ``count`` objects at ``CONCURRENCY`` through the client; (seconds, bytes)."""
    config = ClusterConfig(server=url)
    stored = 0
    next_index = 0
    async with Session(
        config, qps=1e9, burst=1_000_000_000, connection_limit=CONCURRENCY
    ) as session:
        client = Client(session)

        async def worker() -> None:
            nonlocal next_index, stored
            while next_index < count:
                i = next_index
                next_index += 1
                created = await client.create(CONFIGMAPS, _body(i), namespace=NAMESPACE)
                stored += len(orjson.dumps(created))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return time.perf_counter() - started, stored


async def _watch(url: str, rv: str, count: int, started: asyncio.Event, done: list[float]) -> None:
    params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "600"}
    seen = 0
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{url}/api/v1/namespaces/{NAMESPACE}/configmaps", params=params) as response,
    ):
        started.set()
        async for line in response.content:
            if line.strip():
                seen += 1
                if seen == count:
                    done.append(time.perf_counter())
                    return


async def _emulator_run(url: str, count: int) -> tuple[float, float, int]:
    async with aiohttp.ClientSession() as session:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        async with session.post(f"{url}/api/v1/namespaces", json=body) as response:
            response.raise_for_status()
            rv = json.loads(await response.read())["metadata"]["resourceVersion"]
    started, done = asyncio.Event(), list[float]()
    watcher = asyncio.create_task(_watch(url, rv, count, started, done))
    await started.wait()
    t0 = time.perf_counter()
    seconds, stored = await _write_all(url, count)
    await asyncio.wait_for(watcher, 120)
    return count / seconds, count / (done[0] - t0), stored


@contextlib.contextmanager
def trivial_server() -> Iterator[tuple[str, int]]:
    """A bare aiohttp server in its own process answering every request: (URL, pid)."""
    process = subprocess.Popen(
        [sys.executable, "-c", _TRIVIAL_SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip(), process.pid
    finally:
        process.terminate()
        process.wait()


def main(quick: bool) -> None:
    count = 1_000 if quick else 10_000
    header(f"apiserver: create {count:,} ConfigMaps at concurrency {CONCURRENCY}, one watcher")
    with trivial_server() as (baseline_url, baseline_pid):
        cpu = _cpu_seconds(baseline_pid)
        baseline_seconds, _ = asyncio.run(_write_all(baseline_url, count))
        baseline_cpu = (_cpu_seconds(baseline_pid) - cpu) / count * 1e6
    baseline = count / baseline_seconds
    with ClusterProcess() as cluster:
        assert cluster.process is not None
        pid = cluster.process.pid
        before, cpu = _rss_kib(pid), _cpu_seconds(pid)
        writes, events, stored = asyncio.run(_emulator_run(cluster.url, count))
        after, emulator_cpu = _rss_kib(pid), (_cpu_seconds(pid) - cpu) / count * 1e6
    row("bare aiohttp handler, requests/s (baseline)", baseline, "req/s")
    row("emulator creates/s", writes, "req/s", baseline=baseline, target=">= 2,000 req/s")
    row("watch events/s delivered (one watcher)", events, "ev/s", baseline=writes)
    row("bare aiohttp handler, server CPU per request", baseline_cpu, "us")
    row(
        "emulator CPU per create (incl. the watch fan-out)",
        emulator_cpu,
        "us",
        baseline=baseline_cpu,
    )
    row(
        "creates/s one emulator core sustains (1 / CPU)",
        1e6 / emulator_cpu,
        "req/s",
        target=">= 2,000 req/s",
    )
    row("RSS growth per stored object", (after - before) * 1024 / count, "bytes")
    row("stored bytes per object (encoded once)", stored / count, "bytes")
