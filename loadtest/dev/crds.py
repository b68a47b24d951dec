"""Custom resource definitions for tests, benchmarks and the demo, and installing them.

- ``simple_crd(group, kind)``: a CRD with one served version ``v1``, the status subresource
  (unless ``status=False``) and a schema that keeps unknown fields (or the ``schema`` given).
- ``install(client, crds)``: create the CRDs (existing ones are left alone) and wait until
  every one of them is established (its ``Established`` condition is ``True``) and served
  by discovery: objects of its kind can be created then.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource

CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
OPEN_SCHEMA: Mapping[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def simple_crd(
    group: str,
    kind: str,
    *,
    plural: str | None = None,
    scope: str = "Namespaced",
    schema: Mapping[str, Any] = OPEN_SCHEMA,
    status: bool = True,
) -> dict[str, Any]:
    plural = plural or kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}} if status else {},
                    "schema": {"openAPIV3Schema": dict(schema)},
                }
            ],
        },
    }


async def install(client: Client, crds: Iterable[Mapping[str, Any]], *, wait: float = 30) -> None:
    """Create ``crds`` and wait until they are established and served. Raises
    ``TimeoutError``."""
    crds = list(crds)
    for crd in crds:
        with contextlib.suppress(errors.AlreadyExists):
            await client.create(CRDS, dict(crd))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    for crd in crds:
        name = crd["metadata"]["name"]
        while not _established(await client.get(CRDS, name)):
            if loop.time() > deadline:
                raise TimeoutError(f"the CustomResourceDefinition {name} is not established")
            await asyncio.sleep(0.1)
        spec = crd["spec"]
        version = f"{spec['group']}/{spec['versions'][0]['name']}"
        while True:
            try:
                await client.resource(version, resource=spec["names"]["plural"])
                break
            except errors.ResourceNotFound:
                if loop.time() > deadline:
                    raise TimeoutError(
                        f"the CustomResourceDefinition {name} is not served"
                    ) from None
                await asyncio.sleep(0.1)
                await client.discovery.refresh()


def _established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
