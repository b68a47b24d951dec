"""Text that YAML reads specially reaches the children exactly, and a rollout to it completes.

The API server reads server-side apply bodies as YAML, where raw U+2028, U+2029 and NEL are
line breaks (folding away the blanks around them) and raw DEL, C1 controls, U+FFFE and U+FFFF
are refused. A CompositeController whose ConfigMap children roll out ``RollingInPlace``
copies the parent's ``spec.text`` into each child's data and an annotation; the parent moves
from plain text to text holding every such character. Every child must end up holding it
exactly and the parent must report ``OnLatestRevision``: a child that held a folded copy
would never count as updated, and the rollout would wait on it for good. Runs under both
apply strategies, on the embedded cluster or, with ``METASHARD_E2E_KUBECONFIG``, on a real
one.
"""

from __future__ import annotations

from typing import Any

import pytest

from proto.api.names import REASON_ON_LATEST_REVISION
from proto.kube.client import Client
from tests.e2e.conftest import BOTH_APPLY_STRATEGIES
from tests.e2e.harness import Processes, eventually
from tests.e2e.hookserver import HookServer
from tests.e2e.test_composite import CCS, CONFIGMAPS, THINGS, make_controller, thing

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio, BOTH_APPLY_STRATEGIES]

ANNOTATION = "e2e.metashard.io/text"
CHILDREN = 3
TEXT = (
    "a<b & c>d été \u2028 end | \u2029 | \x85 | \x7f \x80 \x9f | \ufeff \ufffe \uffff"
    " | \t: # 'q' \"d\" \\ \\u2028 | \r\n--- x |   "
)


def copy_text(hook: str, request: dict[str, Any]) -> dict[str, Any]:
    """``CHILDREN`` ConfigMaps ``<parent>-<i>`` holding the parent's ``spec.text``."""
    if request["finalizing"]:
        return {"children": [], "finalized": True}
    parent = request["parent"]
    text = str((parent.get("spec") or {}).get("text", ""))
    children = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{parent['metadata']['name']}-{i}",
                "annotations": {ANNOTATION: text},
            },
            "data": {"text": text},
        }
        for i in range(CHILDREN)
    ]
    return {"children": children}


async def observe(kube: Client, namespace: str) -> dict[str, Any]:
    """Each child's data and annotation text, and the parent's ``Updated`` condition."""
    listed = await kube.list(CONFIGMAPS, namespace=namespace)
    parent = await kube.get(THINGS, "p", namespace=namespace)
    conditions = (parent.get("status") or {}).get("conditions") or []
    updated: dict[str, Any] = next((c for c in conditions if c.get("type") == "Updated"), {})
    return {
        "children": {
            c["metadata"]["name"]: (
                (c.get("data") or {}).get("text"),
                (c["metadata"].get("annotations") or {}).get(ANNOTATION),
            )
            for c in listed.items
            if c["metadata"]["name"] != "kube-root-ca.crt"  # a real cluster's
        },
        "updated": (updated.get("reason"), updated.get("message")),
    }


async def test_a_rollout_to_text_yaml_reads_specially_completes_with_it_intact(
    kube: Client, namespace: str, hooks: HookServer, stack: Processes
) -> None:
    name = await make_controller(kube, hooks, copy_text, method="RollingInPlace")
    seen: dict[str, Any] = {}

    async def holds(text: str) -> bool:
        seen.update(await observe(kube, namespace))
        children = {f"p-{i}": (text, text) for i in range(CHILDREN)}
        return bool(
            seen["children"] == children and seen["updated"][0] == REASON_ON_LATEST_REVISION
        )

    def report() -> str:
        return f"last seen: {seen!r}\n{stack.logs()}"

    try:
        await thing(kube, namespace, "p", name, {"text": "plain"})
        await eventually(lambda: holds("plain"), within=60, message=report)
        await kube.patch(THINGS, "p", {"spec": {"text": TEXT}}, namespace=namespace)
        await eventually(lambda: holds(TEXT), within=60, message=report)
    finally:
        await kube.delete(CCS, name)
