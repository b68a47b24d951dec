"""Watch-stream decode rate of ``proto.kube``: events/s through the real ``Client.watch`` path.

A local aiohttp server in a separate process streams N watch events of a realistic Pod (about
3 KB, and about 7 KB with managedFields) as one chunked response. Measured in the same run:

- ``Client.watch``: 1 MiB chunks, byte-level line splitting, orjson, raw bytes sliced out;
- baseline: the same stream read with aiohttp's ``readline()`` and decoded with stdlib
  ``json.loads``, line by line (what a naive asyncio client does);
- memory held per decoded object (tracemalloc), orjson vs stdlib ``json``.

Targets: >= 30k events/s for the 3 KB Pod and >= 2x the baseline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from loadtest.apiserver.kubelet import READY_CONDITIONS
from loadtest.apiserver.pods import DEFAULT_TOLERATIONS
from loadtest.bench._report import header, row
from loadtest.bench._served import served
from loadtest.bench._streaming import serve, stream
from proto.kube.client import Client
from proto.kube.cluster import ClusterConfig
from proto.kube.resources import Resource
from proto.kube.session import Session
from proto.kube.watch import LineSplitter, decode_event

PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
CHUNK = 1 << 20


def _env(count: int, prefix: str) -> list[dict[str, Any]]:
    return [
        {"name": f"{prefix}_{i}", "value": f"value-of-{prefix.lower()}-{i}"} for i in range(count)
    ]


def _container(name: str, env: int) -> dict[str, Any]:
    return {
        "name": name,
        "image": f"registry.example.com/team/{name}:v1.24.3",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": _env(env, name.upper().replace("-", "_")),
        "resources": {
            "limits": {"cpu": "500m", "memory": "256Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        "volumeMounts": [
            {
                "name": "kube-api-access-x7k2p",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ],
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "timeoutSeconds": 1,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }


def _managed_fields() -> list[dict[str, Any]]:
    spec_fields: dict[str, Any] = {
        f'k:{{"name":"{c}"}}': {
            ".": {},
            "f:env": {
                f'k:{{"name":"{c.upper()}_{i}"}}': {".": {}, "f:name": {}, "f:value": {}}
                for i in range(6)
            },
            "f:image": {},
            "f:imagePullPolicy": {},
            "f:name": {},
            "f:ports": {
                'k:{"containerPort":8080,"protocol":"TCP"}': {
                    ".": {},
                    "f:containerPort": {},
                    "f:name": {},
                }
            },
            "f:resources": {".": {}, "f:limits": {".": {}, "f:cpu": {}, "f:memory": {}}},
        }
        for c in ("app", "sidecar")
    }
    status_fields: dict[str, Any] = {
        "f:conditions": {
            f'k:{{"type":"{t}"}}': {
                ".": {},
                "f:lastProbeTime": {},
                "f:lastTransitionTime": {},
                "f:status": {},
                "f:type": {},
            }
            for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers", "Ready")
        },
        "f:containerStatuses": {},
        "f:hostIP": {},
        "f:phase": {},
        "f:podIP": {},
        "f:startTime": {},
    }
    return [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-03-01T10:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:generateName": {}, "f:labels": {}},
                "f:spec": {"f:containers": spec_fields},
            },
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-03-01T10:00:05Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": status_fields},
            "subresource": "status",
        },
    ]


def pod(index: int, *, large: bool) -> dict[str, Any]:
    """A realistic scheduled, running Pod (~3 KB; ~7 KB with ``large``)."""
    containers = [_container("app", 6)] + ([_container("sidecar", 6)] if large else [])
    conditions = [
        {
            "type": t,
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": "2026-03-01T10:00:04Z",
        }
        for t in READY_CONDITIONS
    ]
    metadata: dict[str, Any] = {
        "name": f"web-7d9f8b6c5-{index:05d}",
        "generateName": "web-7d9f8b6c5-",
        "namespace": "bench",
        "uid": f"5f0c1a2b-3c4d-4e5f-8a9b-{index:012d}",
        "resourceVersion": str(100000 + index),
        "creationTimestamp": "2026-03-01T10:00:00Z",
        "labels": {"app": "web", "pod-template-hash": "7d9f8b6c5", "tier": "frontend"},
        "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-7d9f8b6c5",
                "uid": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if large:
        metadata["managedFields"] = _managed_fields()
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": metadata,
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-x7k2p",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": containers,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "nodeName": f"node-{index % 50:03d}",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [dict(t) for t in DEFAULT_TOLERATIONS],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": "10.0.3.17",
            "podIP": f"10.244.{index % 250}.{index % 200 + 2}",
            "startTime": "2026-03-01T10:00:00Z",
            "containerStatuses": [
                {
                    "name": c["name"],
                    "state": {"running": {"startedAt": "2026-03-01T10:00:03Z"}},
                    "ready": True,
                    "restartCount": 0,
                    "image": c["image"],
                    "imageID": "registry.example.com/team/app@sha256:" + "ab" * 32,
                    "containerID": "containerd://" + "cd" * 32,
                    "started": True,
                }
                for c in containers
            ],
            "qosClass": "Burstable",
        },
    }


def _stream(count: int, *, large: bool) -> bytes:
    return b"".join(
        orjson.dumps({"type": "MODIFIED", "object": pod(i, large=large)}) + b"\n"
        for i in range(count)
    )


def _event_loop_runner() -> Callable[[Any], Any]:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a declared dependency
        return asyncio.run
    return uvloop.run


def _serve(port_queue: Any, count: int) -> None:
    """The server process: stream the pre-built body of the requested size (chunked, as the
    API server does), spending as little CPU as it can so that the client is what is measured."""
    bodies = {"small": _stream(count, large=False), "large": _stream(count, large=True)}

    async def handle(request: web.Request) -> web.StreamResponse:
        return await stream(
            request, bodies[request.query.get("labelSelector", "size=small").split("=")[1]]
        )

    serve(port_queue, "/api/v1/namespaces/bench/pods", handle, run=_event_loop_runner())


async def _client_rate(session: Session, size: str, count: int) -> float:
    started = time.perf_counter()
    seen = 0
    events = Client(session).watch(PODS, namespace="bench", label_selector=f"size={size}")
    async with contextlib.aclosing(events):
        async for _event in events:
            seen += 1
    assert seen == count, (seen, count)
    return count / (time.perf_counter() - started)


async def _baseline_rate(http: aiohttp.ClientSession, url: str, size: str, count: int) -> float:
    started = time.perf_counter()
    seen = 0
    async with http.get(url, params={"watch": "true", "labelSelector": f"size={size}"}) as resp:
        async for line in resp.content:  # readline()
            event = json.loads(line)
            _obj = event["object"]
            seen += 1
    assert seen == count, (seen, count)
    return count / (time.perf_counter() - started)


async def _rates(url: str, size: str, count: int, repeat: int) -> tuple[float, float]:
    """Median events/s of both paths, run alternately so that both see the same noise."""
    ours: list[float] = []
    baseline: list[float] = []
    async with (
        Session(ClusterConfig(server=url), qps=0) as session,
        aiohttp.ClientSession() as http,
    ):
        await _client_rate(session, size, count)  # warm up both paths
        await _baseline_rate(http, f"{url}/api/v1/namespaces/bench/pods", size, count)
        for _ in range(repeat):
            ours.append(await _client_rate(session, size, count))
            baseline.append(
                await _baseline_rate(http, f"{url}/api/v1/namespaces/bench/pods", size, count)
            )
    return statistics.median(ours), statistics.median(baseline)


def _in_process_rates(stream: bytes, repeat: int) -> tuple[float, float]:
    """Median events/s of the client's decoding alone vs ``json.loads`` per line, no I/O."""
    chunks = [stream[i : i + CHUNK] for i in range(0, len(stream), CHUNK)]
    lines = stream.splitlines()

    def ours() -> None:
        splitter = LineSplitter()
        for chunk in chunks:
            for line in splitter.feed(chunk):
                decode_event(line)

    def baseline() -> None:
        for line in lines:
            json.loads(line)["object"]

    timings: dict[Callable[[], None], list[float]] = {ours: [], baseline: []}
    for _ in range(repeat):
        for fn, runs in timings.items():
            started = time.perf_counter()
            fn()
            runs.append(len(lines) / (time.perf_counter() - started))
    return statistics.median(timings[ours]), statistics.median(timings[baseline])


def _bytes_held(lines: list[bytes], decode: Callable[[bytes], Any]) -> float:
    """Memory held by the decoded lines, per line (tracemalloc)."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = [decode(line) for line in lines]
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / len(kept)


def _json_object(line: bytes) -> Any:
    return json.loads(line)["object"]


def _orjson_object(line: bytes) -> Any:
    return orjson.loads(line)["object"]


def main(quick: bool) -> None:
    count = 2000 if quick else 20000
    repeat = 1 if quick else 7
    runner = _event_loop_runner()
    loop_name = "uvloop" if runner is not asyncio.run else "asyncio"
    with served(_serve, count, timeout=120) as url:
        for size, large in (("small", False), ("large", True)):
            sample = orjson.dumps(pod(0, large=large))
            header(
                f"watch decode, {len(sample) / 1024:.1f} KB Pod ({count} events, "
                f"{count * (len(sample) + 31) / 1e6:.0f} MB stream, {loop_name}, "
                f"server in another process, median of {repeat})"
            )
            ours, baseline = runner(_rates(url, size, count, repeat))
            target = ">= 30k/s and >= 2x" if size == "small" else ">= 2x"
            row(
                "Client.watch over HTTP (1 MiB chunks, orjson, raw)",
                ours,
                "events/s",
                baseline=baseline,
                target=target,
            )
            row("baseline: aiohttp readline() + json.loads over HTTP", baseline, "events/s")
            stream = _stream(min(count, 5000), large=large)
            alone, alone_baseline = _in_process_rates(stream, repeat)
            row(
                "decode alone, in process: LineSplitter + decode_event",
                alone,
                "events/s",
                baseline=alone_baseline,
            )
            row("baseline: json.loads per line, in process", alone_baseline, "events/s")
            lines = stream.splitlines()[:2000]
            held_json = _bytes_held(lines, _json_object)
            held = _bytes_held(lines, _orjson_object)
            events = _bytes_held(lines, decode_event)
            row("memory per decoded object: orjson dicts", held, "bytes", baseline=held_json)
            row("baseline: json.loads dicts", held_json, "bytes")
            row(
                "memory per WatchEvent (orjson dicts + raw bytes)",
                events,
                "bytes",
                baseline=held_json,
            )
            row("raw JSON bytes per object (for reference)", len(sample), "bytes")
