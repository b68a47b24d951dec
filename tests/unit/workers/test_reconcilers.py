"""workers.reconcilers: the built-in reconcilers per controller kind."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from loadtest.inmemory import MemoryCluster
from proto.hooks.client import HookClient
from proto.http1 import HttpClient
from proto.kube.events import EventRecorder
from proto.wire import ControllerDef, ControllerKind
from tests.unit.workers.composite_world import controller, definition
from workers.kinds.composite.reconciler import CompositeReconciler
from workers.reconcilers import UnsupportedController, WorkerContext, builtin


@pytest.mark.asyncio
async def test_builtin_runs_composite_controllers_only() -> None:
    cluster: Any = MemoryCluster()
    async with HttpClient() as http:
        context = WorkerContext(
            worker_id="w",
            client=cluster,
            http=http,
            registry=CollectorRegistry(),
            hooks=HookClient(http),
            events=EventRecorder(cluster, component="metacontroller"),
        )
        factory = builtin(context)
        assert isinstance(factory(definition(controller())), CompositeReconciler)
        decorator = ControllerDef(ControllerKind.DECORATOR, "dc", "u", "1", b"{}", ())
        with pytest.raises(UnsupportedController, match="DecoratorController"):
            factory(decorator)
