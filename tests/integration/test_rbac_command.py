"""``metashard rbac`` against a cluster: controllers listed, resources resolved by discovery."""

from __future__ import annotations

import contextlib
import os
import uuid

import pytest

from loadtest.dev.crds import CRDS, install, simple_crd
from manager.cli.rbac import controllers_from_cluster
from manager.controllers.rbac import GroupResource, RbacError, controller_resources
from proto.api import names
from proto.api.crds import load_crds
from proto.kube import errors
from proto.kube.resources import Resource
from tests.integration.conftest import KUBECONFIG_ENV, Kube

COMPOSITES = Resource(
    names.GROUP, names.VERSION, names.COMPOSITE_CONTROLLERS, "CompositeController", False
)


def _kubeconfig(kube: Kube) -> str:
    return str(kube.cluster.kubeconfig) if kube.cluster is not None else os.environ[KUBECONFIG_ENV]


@pytest.mark.asyncio
async def test_cluster_controllers_resolve_through_discovery(kube: Kube) -> None:
    group = f"rbac-{uuid.uuid4().hex[:8]}.example.com"
    crd = simple_crd(group, "Widget")
    crd["spec"]["names"]["shortNames"] = ["wdg"]
    await install(kube.client, [*load_crds(), crd])
    name = f"rbac-{uuid.uuid4().hex[:8]}"
    controller = {
        "apiVersion": names.API_VERSION,
        "kind": names.COMPOSITE_CONTROLLER,
        "metadata": {"name": name},
        "spec": {
            "parentResource": {"apiVersion": f"{group}/v1", "resource": "wdg"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": {"webhook": {"url": "http://hook.invalid/sync"}}},
        },
    }
    await kube.client.create(COMPOSITES, controller)
    try:
        objects, resolve = await controllers_from_cluster(_kubeconfig(kube))
        (ours,) = [obj for obj in objects if obj["metadata"]["name"] == name]
        found = controller_resources(ours, resolve)
        assert found.parents == (GroupResource(group, "widgets"),)
        assert found.children == (GroupResource("", "configmaps"),)
        with pytest.raises(RbacError, match="has no resource 'gizmos'"):
            resolve(f"{group}/v1", "gizmos")
    finally:
        with contextlib.suppress(errors.NotFound):
            await kube.client.delete(COMPOSITES, name)
        with contextlib.suppress(errors.NotFound):
            await kube.client.delete(CRDS, crd["metadata"]["name"])
