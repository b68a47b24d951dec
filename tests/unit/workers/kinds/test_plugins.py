"""workers.kinds.plugins: the built-in reconcilers per controller kind."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from loadtest.apiserver.inprocess import MemoryCluster
from proto.hooks.client import HookClient
from proto.kube.events import EventRecorder
from proto.runtime.http1 import HttpClient
from proto.wire import ControllerDef, ControllerKind, ResourceInfo
from tests.unit.workers.composite_world import controller, definition
from tests.unit.workers.kinds.decorator.test_steps import decorator as decorator_object
from workers.kinds import registry
from workers.kinds.composite.steps import CompositeSteps
from workers.kinds.decorator.steps import DecoratorSteps
from workers.kinds.plugins import WorkerContext, builtin
from workers.sync.template import SyncTemplate


@pytest.mark.asyncio
async def test_builtin_runs_every_kind_in_workers_kinds() -> None:
    cluster: Any = MemoryCluster()
    writer: Any = MemoryCluster()  # stands for the fenced writer: every kind writes through it
    async with HttpClient() as http:
        context = WorkerContext(
            worker_id="w",
            client=cluster,
            writer=writer,
            http=http,
            registry=CollectorRegistry(),
            hooks=HookClient(http),
            events=EventRecorder(cluster, component="metacontroller"),
        )
        factory = builtin(context)
        composite = factory(definition(controller()))
        assert isinstance(composite, SyncTemplate) and composite._writer is writer
        assert isinstance(composite._steps, CompositeSteps) and composite._steps._writer is writer
        decorator = ControllerDef(
            ControllerKind.DECORATOR,
            "dc",
            "u",
            "1",
            orjson.dumps(decorator_object()),
            (
                ResourceInfo("v1", "pods", "Pod", True, ("status",)),
                ResourceInfo("v1", "services", "Service", True, ()),
            ),
        )
        built = factory(decorator)
        assert isinstance(built, SyncTemplate) and built._writer is writer
        assert isinstance(built._steps, DecoratorSteps) and built._steps._writer is writer
        assert set(registry()) == set(ControllerKind)
