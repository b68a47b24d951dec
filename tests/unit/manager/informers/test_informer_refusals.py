"""The informer tells who is refused (403) what, and when that ends."""

from __future__ import annotations

from typing import Any

import pytest

from proto.kube.refusal import Refusal
from proto.kube.resources import Resource
from proto.runtime.clock import FakeClock
from tests.unit.manager.informers.fakes import configmap, eventually
from tests.unit.manager.informers.test_informer import api, running, streaming_list
from tests.unit.proto.kube_fake import Reply

USER = "system:serviceaccount:ms:metashard"


def denied(verb: str) -> Reply:
    message = (
        f'configmaps is forbidden: User "{USER}" cannot {verb} resource "configmaps" in API '
        'group "" at the cluster scope'
    )
    body: dict[str, Any] = {
        "kind": "Status",
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "details": {"kind": "configmaps"},
        "code": 403,
    }
    return Reply.json(403, body)


class Refusals:
    def __init__(self) -> None:
        self.told: list[tuple[str, Refusal | None]] = []

    def refused(self, resource: Resource, refusal: Refusal) -> None:
        self.told.append((resource.name, refusal))

    def allowed(self, resource: Resource) -> None:
        self.told.append((resource.name, None))


@pytest.mark.asyncio
async def test_a_refused_watch_is_told_with_who_and_what_and_its_end_too() -> None:
    refusals = Refusals()
    server = api(denied("watch"), denied("watch"), streaming_list(configmap("a", "5"), rv="10"))
    clock = FakeClock()
    async with running(server, clock=clock, refusals=refusals) as h:
        await eventually(lambda: h.informer.synced, clock=clock)
    refusal = Refusal("watch", "configmaps", "", None, USER)
    assert refusals.told == [("configmaps", refusal), ("configmaps", refusal), ("configmaps", None)]
    assert h.metric("metashard_informer_watch_errors_total", reason="Forbidden") == 2
