"""Two ``metashard run`` on one cluster, without leader election (the default, as in
Metacontroller): each says loudly that the other acts on the same controllers, and neither
stops acting. Nothing here depends on the embedded cluster.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path
from typing import Any

import pytest

from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.e2e.harness import Processes, eventually
from tests.e2e.test_controller_start import controller

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

EVENTS = Resource("", "v1", "events", "Event", True)
CCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", "CompositeController", False
)
OTHERS = "metashard_coordinator_other_managers"


async def test_two_runs_of_the_same_controllers_warn_about_each_other(
    cluster: str, kube: Client, tmp_path: Path
) -> None:
    lease = f"e2e-two-{secrets.token_hex(3)}"
    # A selector of their own: the controllers of other tests are not theirs.
    selector = f"e2e.metashard.io/two={lease}"
    extra = [
        "--leader-election-id",
        lease,
        "--leader-election-lease-duration",
        "3s",  # a presence Lease renewal every second
        "--target-label-selector",
        selector,
    ]
    name = f"two-{lease}"
    body = controller(name, "e2e.metashard.io", "things")
    body["metadata"]["labels"] = {"e2e.metashard.io/two": lease}
    runs = []
    for i in range(2):
        (tmp_path / f"run{i}").mkdir()
        runs.append(Processes(kubeconfig=cluster, workdir=tmp_path / f"run{i}"))
    try:
        procs = [p.run(1, extra=extra) for p in runs]
        await kube.create(CCS, body)

        def logs() -> str:
            return "\n".join(p.logs() for p in runs)

        async def both_see_the_other() -> bool:
            return [await p.metric(OTHERS) for p in procs] == [1.0, 1.0]

        await eventually(both_see_the_other, within=30, message=logs)

        async def warnings() -> list[dict[str, Any]]:
            listed = await kube.list(
                EVENTS, namespace="default", field_selector=f"involvedObject.name={name}"
            )
            return [e for e in listed.items if e.get("reason") == "OtherManager"]

        async def warned() -> bool:
            return len({e.get("reportingInstance") for e in await warnings()}) == 2

        await eventually(warned, within=30, message=logs)
        event = (await warnings())[0]
        assert event["type"] == "Warning"
        assert "another manager of this controller is active" in event["message"]
        assert f"{lease}-presence" in event["message"]
        for run in runs:
            assert "another manager of the same controllers is active" in run.logs()
        assert all(p.alive for p in procs)
        assert all([await p.ready() for p in procs])  # nothing changes who acts
    finally:
        for run in runs:
            run.close()
        with contextlib.suppress(errors.NotFound):
            await kube.delete(CCS, name)
