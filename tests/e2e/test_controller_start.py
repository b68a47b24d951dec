"""A controller whose CRD was just created starts at once, and without a warning.

Metacontroller's integration suite creates each test's CRD in one group/version, waits until
discovery serves it, then creates the CompositeController. The coordinator must start it
within a second (its discovery re-reads the group/version on a miss), with no ``CreateError``
about a resource it had not seen yet. A controller created a moment before its CRD is
reported (the resource really is missing then) and starts within a second or so of the CRD
being served. The coordinator runs with the default ``--discovery-interval`` (30 s), so
neither can pass by waiting for the periodic retry. Nothing here depends on the embedded
cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from loadtest.dev.crds import CRDS, install, simple_crd
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.e2e.harness import Processes, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

EVENTS = Resource("", "v1", "events", "Event", True)
CCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", "CompositeController", False
)
CONTROLLERS = 4
START_WITHIN = 1.0  # seconds, as Metacontroller does
LOADED_MACHINE = 2.0  # allowance for a machine running other work (CI)


def controller(name: str, group: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": name},
        "spec": {
            "parentResource": {"apiVersion": f"{group}/v1", "resource": plural},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:9/never"}}},
        },
    }


class Made:
    """The CRDs and controllers a test made, deleted afterwards."""

    def __init__(self, kube: Client) -> None:
        self.kube = kube
        self.group = f"start-{secrets.token_hex(3)}.e2e.metashard.io"
        self.crds: list[str] = []
        self.controllers: list[str] = []

    async def crd(self, kind: str) -> str:
        crd = simple_crd(self.group, kind)
        self.crds.append(crd["metadata"]["name"])
        await install(self.kube, [crd])  # established, and served by discovery
        return str(crd["spec"]["names"]["plural"])

    async def controller(self, plural: str) -> str:
        name = f"{plural}-{self.group}"
        self.controllers.append(name)
        await self.kube.create(CCS, controller(name, self.group, plural))
        return name


@pytest_asyncio.fixture
async def made(kube: Client, procs: Processes) -> AsyncIterator[Made]:
    coordinator = procs.coordinator(extra=["--discovery-interval", "30s"])
    await eventually(coordinator.ready, within=30)
    made = Made(kube)
    yield made
    for name in made.controllers:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CCS, name)
    for name in made.crds:
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CRDS, name)


async def reasons(kube: Client, name: str) -> list[str]:
    listed = await kube.list(
        EVENTS, namespace="default", field_selector=f"involvedObject.name={name}"
    )
    return [e["reason"] for e in listed.items]


async def started_after(kube: Client, name: str, since: float) -> float:
    """Seconds from ``since`` (monotonic) until ``name``'s ``Started`` event is listed."""

    async def started() -> bool:
        return "Started" in await reasons(kube, name)

    await eventually(started, within=40, interval=0.02, message=f"{name} did not start")
    return time.monotonic() - since


async def test_a_controller_of_a_crd_just_served_starts_at_once_without_warning(
    kube: Client, made: Made
) -> None:
    took = []
    for i in range(CONTROLLERS):
        plural = await made.crd(f"Fresh{i}")
        created = time.monotonic()
        name = await made.controller(plural)
        took.append(await started_after(kube, name, created))
        assert "CreateError" not in await reasons(kube, name), took
    assert max(took) < START_WITHIN + LOADED_MACHINE, took


async def test_a_controller_created_before_its_crd_starts_soon_after_it(
    kube: Client, made: Made
) -> None:
    name = await made.controller("laters")
    await asyncio.sleep(0.3)
    await made.crd("Later")
    served = time.monotonic()
    took = await started_after(kube, name, served)
    assert took < START_WITHIN + LOADED_MACHINE, took
