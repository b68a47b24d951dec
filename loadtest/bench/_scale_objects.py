"""The scale benchmark's objects as the API server sends them once synced, for in-process
benchmarks of the coordinator.

The fanout job (``../shared/bench``): a Fanout parent (``spec.children``, ``spec.data`` of
100 characters, ``status.observedGeneration``, two managedFields entries) owns K ConfigMaps
(the ``controller-uid`` label, the last-applied annotation metashard writes, the controller
ownerReference, one managedFields entry, ``data`` repeating the parent's). Shapes and sizes
are those recorded from a run of ``loadtest.bench.scale`` on the embedded cluster: about
0.9 KB per Fanout and 1.4 KB per ConfigMap of compact JSON.
"""

from __future__ import annotations

import random
import string
import uuid
from typing import Any

import orjson

API_VERSION = "bench.metashard.io/v1"
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"
TIME = "2026-11-27T18:45:03Z"


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _fields(manager: str, api_version: str, fields: dict[str, Any], **extra: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        "manager": manager,
        "operation": "Update",
        **extra,
        "time": TIME,
    }


def fanout(i: int, namespace: str, rng: random.Random, *, synced: bool = True) -> dict[str, Any]:
    """Parent ``fo-<i>``; ``synced``: with the status its last sync wrote."""
    data = "cold-metashard-" + "".join(rng.choice(string.ascii_letters) for _ in range(85))
    managed = [
        _fields(
            "metashard-scale-bench",
            API_VERSION,
            {"f:spec": {".": {}, "f:children": {}, "f:data": {}}},
        )
    ]
    obj: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Fanout",
        "metadata": {
            "creationTimestamp": TIME,
            "generation": 1,
            "managedFields": managed,
            "name": f"fo-{i:06d}",
            "namespace": namespace,
            "resourceVersion": str(1_000_000 + 4 * i),
            "uid": _uid(rng),
        },
        "spec": {"children": 3, "data": data},
    }
    if synced:
        status: dict[str, Any] = {
            "f:status": {".": {}, "f:children": {}, "f:observedGeneration": {}}
        }
        managed.append(_fields("metashard", API_VERSION, status, subresource="status"))
        obj["status"] = {"children": 3, "observedGeneration": 1}
    return obj


def configmap(parent: dict[str, Any], index: int) -> dict[str, Any]:
    """Child ``index`` of ``parent`` as metashard writes it."""
    meta = parent["metadata"]
    name, namespace, uid = f"{meta['name']}-{index}", meta["namespace"], meta["uid"]
    data = {"value": parent["spec"]["data"], "index": str(index)}
    labels = {"controller-uid": uid}
    applied = {
        "apiVersion": "v1",
        "data": data,
        "kind": "ConfigMap",
        "metadata": {"labels": labels, "name": name, "namespace": namespace},
    }
    owned = {
        "f:data": {".": {}, "f:index": {}, "f:value": {}},
        "f:metadata": {
            "f:annotations": {".": {}, f"f:{LAST_APPLIED}": {}},
            "f:labels": {".": {}, "f:controller-uid": {}},
            "f:ownerReferences": {".": {}, f'k:{{"uid":"{uid}"}}': {}},
        },
    }
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_OID, uid + name)),
            "resourceVersion": str(int(meta["resourceVersion"]) + 1 + index),
            "creationTimestamp": TIME,
            "labels": labels,
            "annotations": {LAST_APPLIED: orjson.dumps(applied).decode()},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "Fanout",
                    "name": meta["name"],
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [_fields("metashard", "v1", owned)],
        },
        "data": data,
    }


def watch_line(event: str, obj: dict[str, Any]) -> bytes:
    """One watch event line as the API server writes it."""
    return b'{"type":"' + event.encode() + b'","object":' + orjson.dumps(obj) + b"}"
