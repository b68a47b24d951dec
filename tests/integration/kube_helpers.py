"""Objects and waiting helpers shared by the integration tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from proto.kube.resources import Resource

T = TypeVar("T")

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
CLUSTER_OWNED = frozenset({"kube-root-ca.crt"})
"""ConfigMaps a real cluster puts in every namespace by itself (tests ignore them)."""
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)


def configmap(name: str, *, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def widget_crd(group: str) -> dict[str, Any]:
    """A namespaced ``Widget`` CRD with a status subresource, in its own group."""
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "listKind": "WidgetList",
                "shortNames": ["wdg"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": open_object, "status": open_object},
                        }
                    },
                }
            ],
        },
    }


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float = 15.0, every: float = 0.1
) -> T:
    """Call ``probe`` until it returns something other than None (or time runs out)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        result = await probe()
        if result is not None:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"still nothing after {within} s")
        await asyncio.sleep(every)
