"""A rollout to any text takes as many syncs under server-side apply as under dynamic apply.

One CompositeController (ConfigMap children ``<parent>-<i>`` holding the parent's
``spec.text`` as data and as an annotation, as in ``tests.e2e.test_apply_text``, rolled out
one at a time) is synced here, one
sync after another, by the worker's reconciler (``SyncTemplate`` with the composite steps),
each sync from a snapshot listed fresh from the cluster, as the coordinator would serve it.
The parent moves from plain text to text that YAML reads specially (line separators, NEL,
BOM, controls, tabs, ``: ``, ``#``, blanks at either end: ``tests.jsonvalues.YAML_TEXT``).
The syncs and hook calls until the parent reports ``OnLatestRevision`` with every child
holding the text are counted under each apply strategy and rolling method: they must be
equal, and as few as the method allows (``SYNCS``). Under server-side
apply, an apply body that the API server's YAML reading changed would leave a child never
updated and the rollout would not complete at all. On the embedded cluster or, with
``METASHARD_E2E_KUBECONFIG``, on a real one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from loadtest.apiserver.inprocess import ScriptedHooks
from loadtest.dev.crds import install, simple_crd
from proto.api.crds import load_crds
from proto.api.revisions import REVISION_HASH_LABEL
from proto.kube.client import Client
from proto.kube.resources import Resource
from proto.wire import ParentKey, Snapshot
from tests.e2e.test_apply_text import ANNOTATION, CHILDREN, copy_text
from tests.integration.conftest import Kube
from tests.jsonvalues import YAML_TEXT
from tests.unit.workers.composite_world import controller, definition
from workers.kinds.composite.steps import CompositeSteps
from workers.reconcile import ReconcileRequest
from workers.sync.ssa_writes import ServerSideApply
from workers.sync.template import SyncTemplate

pytestmark = pytest.mark.asyncio

THINGS = Resource(
    "e2e.metashard.io", "v1", "things", "Thing", namespaced=True, subresources=("status",)
)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
REVISIONS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "controllerrevisions", "ControllerRevision", True
)
ISSUE_TEXT = "a<b & c>d été \u2028 end"
MAX_SYNCS = 4 * CHILDREN + 4


def answer(request: dict[str, Any]) -> bytes:
    return orjson.dumps(copy_text("sync", request))


class Events:
    def emit(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Count:
    syncs: int
    hook_calls: int


class Syncer:
    """One parent, synced by one strategy's reconciler from snapshots listed from the cluster."""

    def __init__(self, client: Client, namespace: str, method: str, *, server_side: bool):
        self.client = client
        self.namespace = namespace
        self.name = f"p-{uuid.uuid4().hex[:8]}"
        self.key = ParentKey(
            "CompositeController", "cc", "things.e2e.metashard.io", namespace, self.name
        )
        self.hooks = ScriptedHooks(answer)
        events = Events()
        ssa = (
            ServerSideApply(client, field_manager="metacontroller", events=events)
            if server_side
            else None
        )
        spec = definition(controller(method=method))
        steps = CompositeSteps(spec, writer=client, events=events, server_side=server_side)
        self.reconciler = SyncTemplate(
            spec, steps, writer=client, hooks=self.hooks, events=events, ssa=ssa
        )

    async def snapshot(self) -> Snapshot:
        parent = await self.client.get(THINGS, self.name, namespace=self.namespace)
        children = await self.client.list(CONFIGMAPS, namespace=self.namespace)
        revisions = await self.client.list(REVISIONS, namespace=self.namespace)
        return Snapshot(
            epoch=1,
            request_id=1,
            key=self.key,
            parent=orjson.dumps(parent),
            children={"ConfigMap.v1": tuple(orjson.dumps(c) for c in children.items)},
            revisions=tuple(orjson.dumps(r) for r in revisions.items),
            related={},
        )

    async def rolled_out(self, text: str) -> bool:
        """The parent says ``OnLatestRevision`` and each child holds ``text``, labelled."""
        parent = await self.client.get(THINGS, self.name, namespace=self.namespace)
        conditions = (parent.get("status") or {}).get("conditions") or []
        reasons = [c.get("reason") for c in conditions if c.get("type") == "Updated"]
        mine = {f"{self.name}-{i}" for i in range(CHILDREN)}
        held = [
            c["data"]["text"] == text
            and c["metadata"]["annotations"][ANNOTATION] == text
            and REVISION_HASH_LABEL in c["metadata"]["labels"]
            for c in (await self.client.list(CONFIGMAPS, namespace=self.namespace)).items
            if c["metadata"]["name"] in mine
        ]
        return reasons == ["OnLatestRevision"] and len(held) == CHILDREN and all(held)

    async def roll_to(self, text: str) -> Count:
        """Sync until the rollout to ``text`` completed; how many syncs and hook calls."""
        calls = len(self.hooks.requests)
        for syncs in range(1, MAX_SYNCS + 1):
            await self.reconciler.reconcile(ReconcileRequest(self.key, await self.snapshot()))
            if await self.rolled_out(text):
                return Count(syncs, len(self.hooks.requests) - calls)
        raise AssertionError(f"no rollout to {text!r} within {MAX_SYNCS} syncs")

    async def start(self) -> None:
        body = {
            "apiVersion": "e2e.metashard.io/v1",
            "kind": "Thing",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"text": "plain"},
        }
        await self.client.create(THINGS, body)
        await self.roll_to("plain")

    async def change(self, text: str) -> Count:
        patch = {"spec": {"text": text}}
        await self.client.patch(THINGS, self.name, patch, namespace=self.namespace)
        return await self.roll_to(text)


async def counts(kube: Kube, namespace: str, method: str, text: str) -> dict[str, Count]:
    """The syncs of a rollout from plain text to ``text`` under each strategy."""
    found = {}
    for strategy, server_side in (("dynamic-apply", False), ("server-side-apply", True)):
        syncer = Syncer(kube.client, namespace, method, server_side=server_side)
        await syncer.start()
        found[strategy] = await syncer.change(text)
    return found


SYNCS = {"RollingInPlace": CHILDREN + 1, "RollingRecreate": 2 * CHILDREN}
"""Syncs of a rollout: RollingInPlace moves one child a sync, and one more sync sees the last
updated; RollingRecreate deletes a child in one sync and creates it in the next, and the
sync that creates the last one finds every child on the latest revision."""
METHODS = list(SYNCS)


@pytest_asyncio.fixture
async def things(kube: Kube) -> None:
    """The Thing CRD (the parents) and Metacontroller's (their ControllerRevisions)."""
    await install(kube.client, [*load_crds(), simple_crd("e2e.metashard.io", "Thing")])


@pytest.mark.usefixtures("things")
@pytest.mark.parametrize("method", METHODS)
async def test_a_rollout_to_the_issues_text_takes_as_many_syncs_under_both_strategies(
    kube: Kube, namespace: str, method: str
) -> None:
    found = await counts(kube, namespace, method, ISSUE_TEXT)
    print(f"{method}: {found}")
    assert found["server-side-apply"] == found["dynamic-apply"]
    assert found["dynamic-apply"].syncs == SYNCS[method]


@pytest.mark.usefixtures("things")
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(text=" \u2028 \u2029 \x85 \x7f \x80 \ufffe \ufeff\t: # ", method="RollingInPlace")
@given(text=YAML_TEXT, method=st.sampled_from(METHODS))
async def test_a_rollout_to_any_text_takes_as_many_syncs_under_both_strategies(
    kube: Kube, namespace: str, text: str, method: str
) -> None:
    assume(text != "plain")
    found = await counts(kube, namespace, method, text)
    assert found["server-side-apply"] == found["dynamic-apply"], found
    assert found["dynamic-apply"].syncs == SYNCS[method], found
