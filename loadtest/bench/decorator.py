"""The decorator fanout: N objects x K attachments plus a label, timed against a raw client.

On the embedded cluster, in one run:
- ``raw``: a client writing exactly what a perfect decorator writes (K Secrets per target,
  owned and annotated, and one label patch per target) with 128 requests in flight: the
  API-server limit for the job, the baseline;
- ``metashard``: ``metashard``'s coordinator and 1, then 2 worker processes, with a
  DecoratorController over the N ConfigMaps (already there: a cold start) and a sync hook
  served by this process; timed from the controller's creation until every attachment exists
  and every target carries the label.
For each it prints the wave time and its ratio to raw, and for metashard the CPU per target
of its processes (coordinator and workers).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from loadtest.apiserver.background import ClusterProcess
from loadtest.bench._report import header, row
from loadtest.bench.runtime import _cpu
from loadtest.dev import webhook
from loadtest.dev.crds import install
from loadtest.dev.processes import Processes, free_port
from proto.api.crds import load_crds
from proto.api.names import DECORATOR_ANNOTATION
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.kube.session import Session

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
DCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "decoratorcontrollers", "DecoratorController", False
)
IN_FLIGHT = 128


def attachments(target: dict[str, Any], k: int) -> list[dict[str, Any]]:
    name = target["metadata"]["name"]
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{name}-{j}"},
            "stringData": {"index": str(j), "of": name},
        }
        for j in range(k)
    ]


def decorator_of_configmaps(
    name: str, *, match_labels: dict[str, str], hook_url: str
) -> dict[str, Any]:
    """A DecoratorController of the ConfigMaps carrying ``match_labels``, with Secrets as
    attachments and its sync hook at ``hook_url``."""
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "DecoratorController",
        "metadata": {"name": name},
        "spec": {
            "resources": [
                {
                    "apiVersion": "v1",
                    "resource": "configmaps",
                    "labelSelector": {"matchLabels": match_labels},
                }
            ],
            "attachments": [{"apiVersion": "v1", "resource": "secrets"}],
            "hooks": {"sync": {"webhook": {"url": hook_url}}},
        },
    }


async def _hook_server(k: int) -> tuple[web.AppRunner, int]:
    async def sync(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        answer = {"labels": {"decorated": "yes"}, "attachments": attachments(body["object"], k)}
        return web.Response(body=orjson.dumps(answer), content_type="application/json")

    port = free_port()
    return await webhook.serve("/sync", sync, port=port), port


async def _targets(client: Client, namespace: str, n: int) -> list[dict[str, Any]]:
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    sem = asyncio.Semaphore(IN_FLIGHT)

    async def one(i: int) -> dict[str, Any]:
        async with sem:
            return await client.create(
                CONFIGMAPS,
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"t{i}", "labels": {"bench": namespace}},
                    "data": {"i": str(i)},
                },
                namespace=namespace,
            )

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def _raw(client: Client, namespace: str, targets: list[dict[str, Any]], k: int) -> float:
    """Seconds for a client to write what a perfect decorator writes."""
    sem = asyncio.Semaphore(IN_FLIGHT)

    async def write(coro: Any) -> None:
        async with sem:
            await coro

    started = time.perf_counter()
    writes = []
    for target in targets:
        meta = target["metadata"]
        owner = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        for body in attachments(target, k):
            body["metadata"] |= {
                "ownerReferences": [owner],
                "annotations": {DECORATOR_ANNOTATION: "raw"},
            }
            writes.append(write(client.create(SECRETS, body, namespace=namespace)))
        patch = {"metadata": {"labels": {"decorated": "yes"}}}
        writes.append(write(client.patch(CONFIGMAPS, meta["name"], patch, namespace=namespace)))
    await asyncio.gather(*writes)
    return time.perf_counter() - started


async def _converged(client: Client, namespace: str, n: int, k: int) -> bool:
    secrets = await client.list(SECRETS, namespace=namespace)
    if len(secrets.items) < n * k:
        return False
    labelled = await client.list(CONFIGMAPS, namespace=namespace, label_selector="decorated=yes")
    return len(labelled.items) >= n


async def _metashard(
    client: Client,
    kubeconfig: str,
    workdir: Path,
    *,
    namespace: str,
    hook: str,
    workers: int,
    n: int,
    k: int,
) -> tuple[float, float]:
    """Seconds to converge from the controller's creation, and CPU ms per target."""
    procs = Processes(kubeconfig=kubeconfig, workdir=workdir)
    try:
        coordinator = procs.coordinator()
        started_procs = [
            coordinator,
            *(procs.worker(f"w{i}", concurrency=32) for i in range(workers)),
        ]
        while not all([await p.ready() for p in started_procs]):  # noqa: ASYNC110 (polling)
            await asyncio.sleep(0.1)
        cpu0 = sum(_cpu(p.popen.pid) for p in started_procs)
        started = time.perf_counter()
        await client.create(
            DCS,
            decorator_of_configmaps(namespace, match_labels={"bench": namespace}, hook_url=hook),
        )
        while not await _converged(client, namespace, n, k):  # noqa: ASYNC110 (polling)
            await asyncio.sleep(0.25)
        seconds = time.perf_counter() - started
        cpu = sum(_cpu(p.popen.pid) for p in started_procs) - cpu0
        await client.delete(DCS, namespace)
        return seconds, cpu / n * 1e3
    finally:
        procs.close()


async def _run(kubeconfig: str, tmp: Path, n: int, k: int) -> dict[str, tuple[float, float]]:
    results: dict[str, tuple[float, float]] = {}
    runner, port = await _hook_server(k)
    try:
        async with Session(load_config(kubeconfig), qps=0) as session:
            client = Client(session)
            await install(client, load_crds())
            raw_targets = await _targets(client, "dec-raw", n)
            results["raw"] = (await _raw(client, "dec-raw", raw_targets, k), 0.0)
            for workers in (1, 2):
                namespace = f"dec-{workers}w"
                await _targets(client, namespace, n)
                workdir = tmp / namespace
                workdir.mkdir()
                results[namespace] = await _metashard(
                    client,
                    kubeconfig,
                    workdir,
                    namespace=namespace,
                    hook=f"http://127.0.0.1:{port}/sync",
                    workers=workers,
                    n=n,
                    k=k,
                )
    finally:
        await runner.cleanup()
    return results


def main(quick: bool) -> None:
    n = 200 if quick else 2000
    k = 3
    with tempfile.TemporaryDirectory() as tmp:
        cluster = ClusterProcess().start()
        try:
            results = asyncio.run(_run(str(cluster.kubeconfig), Path(tmp), n, k))
        finally:
            cluster.stop()
    raw = results["raw"][0]
    header(f"decorator fanout: {n} ConfigMaps x {k} Secret attachments + a label, cold start")
    row("raw client, 128 in flight [baseline]", raw * 1e3, "ms")
    for workers in (1, 2):
        seconds, cpu = results[f"dec-{workers}w"]
        label = f"metashard, {workers} worker{'s' if workers > 1 else ''}"
        row(f"{label}: time to converge", seconds * 1e3, "ms", baseline=raw * 1e3)
        row(f"{label}: CPU per target", cpu, "ms")
    print(f"  (embedded cluster; {os.cpu_count()} CPUs shared with the API server)", flush=True)
