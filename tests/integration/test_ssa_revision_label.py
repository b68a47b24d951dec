"""workers.sync.ssa_writes on a cluster: a disturbed ``controller-revision-hash`` label.

A Pod child (it has a ``metadata.generation``, which a label edit does not change) is applied
with its revision label; someone then removes the label or sets it to another value. The
next apply of the same body must put it back, in place, under both rolling methods, although
the apply cache has the body recorded for the Pod's uid and generation. On the embedded
cluster or, with ``METASHARD_E2E_KUBECONFIG``, on a real one (the Pods need no node).
"""

from __future__ import annotations

from typing import Any

import pytest

from proto.api.controllers import UpdateMethod
from proto.api.objectmap import TypeKey
from proto.api.revisions import REVISION_HASH_LABEL
from tests.integration.conftest import Kube
from tests.integration.test_ssa_children import CONFIGMAPS, POD, PODS, TARGETS, World
from workers.sync import children
from workers.sync.apply_metrics import ApplyResult
from workers.sync.ssa_writes import ChildApplier

pytestmark = pytest.mark.asyncio

IN_PLACE_LABELS = frozenset((REVISION_HASH_LABEL,))


class RollingWorld(World):
    """``World`` whose applier writes a change of only the revision label in place."""

    def applier(self, type_key: TypeKey, method: UpdateMethod) -> ChildApplier:
        types = children.ChildTypes(TARGETS, {type_key: method}, ())
        return self.ssa.for_controller(
            controller=self.controller,
            queue="CompositeController-c",
            types=types,
            in_place_labels=IN_PLACE_LABELS,
        )


def pod(label: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "web", REVISION_HASH_LABEL: label}},
        "spec": {"containers": [{"name": "c", "image": "img:1"}]},
    }


@pytest.mark.parametrize("method", [UpdateMethod.ROLLING_RECREATE, UpdateMethod.ROLLING_IN_PLACE])
@pytest.mark.parametrize("label", [None, "wrong"])
async def test_a_removed_or_changed_revision_label_is_applied_back_in_place(
    kube: Kube, namespace: str, method: UpdateMethod, label: str | None
) -> None:
    parent = await kube.client.create(
        CONFIGMAPS, {"metadata": {"name": "parent"}}, namespace=namespace
    )
    world = RollingWorld(kube.client, namespace, parent, True)
    assert await world.sync(POD, method, pod("h1")) == []
    first = await kube.client.get(PODS, "p", namespace=namespace)
    assert await world.sync(POD, method, pod("h1")) == []
    assert world.metrics.counts[ApplyResult.SKIPPED] == 1  # the cache knows it

    # kubectl label pod p controller-revision-hash- (or =wrong)
    patch = {"metadata": {"labels": {REVISION_HASH_LABEL: label}}}
    edited = await kube.client.patch(PODS, "p", patch, namespace=namespace)
    assert edited["metadata"]["labels"].get(REVISION_HASH_LABEL) == label
    assert edited["metadata"]["generation"] == first["metadata"]["generation"]

    assert await world.sync(POD, method, pod("h1")) == []
    child = await kube.client.get(PODS, "p", namespace=namespace)
    assert child["metadata"]["labels"] == {"app": "web", REVISION_HASH_LABEL: "h1"}
    assert child["metadata"]["uid"] == first["metadata"]["uid"]
    assert world.writes[-1] == "apply" and "recreate" not in world.writes

    assert await world.sync(POD, method, pod("h1")) == []  # and then the cache holds again
    assert world.metrics.counts[ApplyResult.SKIPPED] == 2
