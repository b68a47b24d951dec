"""``metashard sync`` against a cluster: the one annotation set on a parent, or on a controller
object, and nothing else; the names it cannot resolve are one error line each."""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import uuid
from typing import Any

import pytest

from loadtest.dev.crds import CRDS, install, simple_crd
from manager.cli import sync
from manager.cli.objects import CommandError
from proto.api import names
from proto.api.crds import load_crds
from proto.kube import errors
from proto.kube.resources import Resource
from tests.integration.conftest import KUBECONFIG_ENV, Kube

COMPOSITES, DECORATORS = sync.CONTROLLERS
ASKED = "metashard.io/sync-requested-at"
WHEN = datetime.datetime(2026, 11, 27, 20, 35, 0, 123456, tzinfo=datetime.UTC)


def _kubeconfig(kube: Kube) -> str:
    return str(kube.cluster.kubeconfig) if kube.cluster is not None else os.environ[KUBECONFIG_ENV]


async def _sync(kube: Kube, *argv: str) -> str:
    out = io.StringIO()
    args = sync.parse([*argv, "--kubeconfig", _kubeconfig(kube)])
    await sync.run(args, out, now=lambda: WHEN)
    return out.getvalue()


def _controller(kind: str, name: str, group: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"hooks": {"sync": {"webhook": {"url": "http://hook.invalid/sync"}}}}
    if kind == names.COMPOSITE_CONTROLLER:
        spec["parentResource"] = {"apiVersion": f"{group}/v1", "resource": "widgets"}
    else:
        spec["resources"] = [{"apiVersion": f"{group}/v1", "resource": "widgets"}]
    return {"apiVersion": names.API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


@pytest.mark.asyncio
async def test_a_parent_and_a_controller_get_the_annotation_and_nothing_else(
    kube: Kube, namespace: str
) -> None:
    group = f"sync-{uuid.uuid4().hex[:8]}.example.com"
    crd = simple_crd(group, "Widget")
    await install(kube.client, [*load_crds(), crd])
    widgets = Resource(group, "v1", "widgets", "Widget", True)
    name = f"sync-{uuid.uuid4().hex[:8]}"
    await kube.client.create(
        widgets,
        {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "annotations": {"keep": "me"}},
            "spec": {"size": 1},
        },
        namespace=namespace,
    )
    await kube.client.create(COMPOSITES, _controller(names.COMPOSITE_CONTROLLER, name, group))
    try:
        said = await _sync(kube, "widget/w", "-n", namespace)
        assert said == f"widgets/w: a sync requested ({ASKED}: 2026-11-27T20:35:00.123456Z)\n"
        widget = await kube.client.get(widgets, "w", namespace=namespace)
        assert widget["metadata"]["annotations"] == {
            "keep": "me",
            ASKED: "2026-11-27T20:35:00.123456Z",
        }
        assert widget["spec"] == {"size": 1} and widget["metadata"]["generation"] == 1

        said = await _sync(kube, "--controller", name)
        assert said == (
            f"compositecontrollers/{name}: a sync of every parent requested "
            f"({ASKED}: 2026-11-27T20:35:00.123456Z)\n"
        )
        cc = await kube.client.get(COMPOSITES, name)
        assert cc["metadata"]["annotations"] == {ASKED: "2026-11-27T20:35:00.123456Z"}
        paused = {"metadata": {"annotations": {"metashard.io/paused": "true"}}}
        await kube.client.patch(COMPOSITES, name, paused)
        said = await _sync(kube, "--controller", name)
        assert said.endswith(
            '; it is paused (metashard.io/paused: "true"): nothing syncs until that goes\n'
        )

        await kube.client.create(DECORATORS, _controller(names.DECORATOR_CONTROLLER, name, group))
        with pytest.raises(CommandError, match="names a controller of each kind: say "):
            await _sync(kube, "--controller", name)
        said = await _sync(kube, "--controller", f"dec/{name}")
        assert said.startswith(f"decoratorcontrollers/{name}: a sync of every parent requested")

        with pytest.raises(CommandError, match="widgets/gone not found"):
            await _sync(kube, "widgets/gone", "-n", namespace)
        with pytest.raises(CommandError, match="no CompositeController or DecoratorController"):
            await _sync(kube, "--controller", "gone")
        with pytest.raises(CommandError, match="the server has no resource 'gizmos'"):
            await _sync(kube, "gizmos/x", "-n", namespace)
    finally:
        for resource in (COMPOSITES, DECORATORS):
            with contextlib.suppress(errors.NotFound):
                await kube.client.delete(resource, name)
        with contextlib.suppress(errors.NotFound):
            await kube.client.delete(CRDS, crd["metadata"]["name"])
