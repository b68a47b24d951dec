"""workers.kinds.composite.steps: whole syncs of a parent against an in-memory cluster
and a scripted hook.

Each test drives the CompositeController reconciler (``workers.kinds.composite``) through
``composite_world.World`` and checks the writes it made (verb, resource, object), the hook
requests, events and outcomes.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import structlog

from proto.api.errors import InvalidControllerError
from proto.hooks.errors import HookRetryAfter, HookStatusError, HookTransportError
from proto.kube import errors
from proto.wire import ControllerDef, ControllerKind, ParentKey
from tests.unit.workers.composite_world import (
    CONFIGMAPS,
    NS,
    SECRETS,
    THINGS,
    World,
    controller,
    definition,
    fanout,
    owner,
)
from workers.apply import LAST_APPLIED_ANNOTATION
from workers.kinds.composite.rollouts import REVISIONS
from workers.reconcile import Claim, Outcome, ReconcileRequest, RequeueAfter
from workers.sync.errors import StaleSnapshot, SyncFailure

pytestmark = pytest.mark.asyncio

FINALIZER = "metacontroller.io/compositecontroller-cc"


def verbs(world: World) -> list[tuple[str, str, str]]:
    return [
        (verb, resource + (f"/{sub}" if sub else ""), name)
        for verb, resource, sub, _, name in world.writes()
    ]


async def test_first_sync_creates_children_and_status_then_nothing() -> None:
    world = World()
    parent = await world.parent(spec={"children": 3, "data": "one"})
    assert await world.sync() == Outcome()
    assert verbs(world) == [
        ("POST", "configmaps", "p-0"),
        ("POST", "configmaps", "p-1"),
        ("POST", "configmaps", "p-2"),
        ("PUT", "things/status", "p"),
    ]
    child = world.get("p-1")
    assert child is not None
    assert child["metadata"]["ownerReferences"] == [owner(parent)]
    assert child["metadata"]["labels"] == {"controller-uid": parent["metadata"]["uid"]}
    assert child["data"] == {"value": "one", "index": "1"}
    recorded = orjson.loads(child["metadata"]["annotations"][LAST_APPLIED_ANNOTATION])
    assert "ownerReferences" not in recorded["metadata"]
    assert world.cluster.get(THINGS, NS, "p")["status"] == {  # type: ignore[index]
        "children": 3,
        "observedGeneration": 1,
    }
    last = world.last_request
    assert last is not None and set(last.writes) == {"configmaps", "things.e2e.metashard.io"}

    assert await world.sync() == Outcome()
    assert world.writes() == []
    assert world.events.emitted == []


async def test_sync_request_carries_the_claimed_children_and_declared_groups() -> None:
    world = World(secrets=True)
    await world.parent(spec={"children": 1, "data": "x"})
    await world.sync()
    await world.sync()
    endpoint, request = world.requests[-1]
    assert endpoint.hook.value == "sync" and endpoint.controller_name == "cc"
    assert request["finalizing"] is False
    assert request["controller"] == world.cc
    assert request["parent"]["metadata"]["name"] == "p"
    assert set(request["children"]) == {"ConfigMap.v1", "Secret.v1"}
    assert list(request["children"]["ConfigMap.v1"]) == ["p-0"]
    assert request["children"]["Secret.v1"] == {}
    assert request["related"] == {}


async def test_sync_request_carries_the_attempt_headers_of_its_claim_and_parent() -> None:
    world = World()
    parent = await world.parent(spec={"children": 1, "data": "x"})
    await world.sync(claim=Claim(epoch=4, generation=17, attempt="w-1/ab12cd34/9"))
    meta = parent["metadata"]
    assert world.hooks.headers[-1] == {
        "X-Metashard-Epoch": "4",
        "X-Metashard-Slot-Generation": "17",
        "X-Metashard-Attempt": "w-1/ab12cd34/9",
        "X-Metashard-Parent-Uid": meta["uid"],
        "X-Metashard-Parent-Resource-Version": meta["resourceVersion"],
        "X-Metashard-Parent-Generation": str(meta["generation"]),
    }


async def test_a_stale_owners_writes_fail_on_their_preconditions_and_change_nothing() -> None:
    """A worker that lost the parent syncs from the snapshot it had: the child update and the
    status write it makes carry the resourceVersions it saw, so both fail with a conflict
    (left to the next sync) and overwrite nothing the new owner wrote."""
    world = World()
    await world.parent(spec={"children": 1, "data": "one"})
    await world.sync()
    key = ParentKey("CompositeController", "cc", "things.e2e.metashard.io", NS, "p")
    stale = world.cluster.snapshot(key, THINGS, [CONFIGMAPS])  # the old owner's snapshot
    await world.cluster.patch(THINGS, "p", {"spec": {"data": "two"}}, namespace=NS)
    await world.sync()  # the new owner
    child, parent = world.get("p-0"), world.cluster.get(THINGS, NS, "p")
    assert child is not None and child["data"]["value"] == "two"
    world.answer = lambda request: {
        "status": {"by": "the old owner"},
        "children": [{**fanout(request)["children"][0], "data": {"value": "stale", "index": "0"}}],
    }
    world.cluster.calls.clear()
    await world.reconciler.reconcile(ReconcileRequest(key, stale))  # conflicts are let go
    assert world.writes() == [
        ("PUT", "configmaps", "", "ns", "p-0"),
        ("PUT", "things", "status", "ns", "p"),
    ]
    assert world.get("p-0") == child and world.cluster.get(THINGS, NS, "p") == parent


async def test_v2_hooks_see_namespace_slash_name_keys_and_related_objects() -> None:
    world = World(version="v2")
    await world.parent(spec={"children": 1, "data": "x"})
    await world.sync()
    related = {"Secret.v1": (orjson.dumps({"metadata": {"name": "s", "namespace": "other"}}),)}
    await world.sync(related=related)
    _, request = world.requests[-1]
    assert list(request["children"]["ConfigMap.v1"]) == [f"{NS}/p-0"]
    assert request["related"] == {
        "Secret.v1": {"other/s": {"metadata": {"name": "s", "namespace": "other"}}}
    }


async def test_spec_change_updates_in_place_and_rewrites_status() -> None:
    world = World()
    await world.parent(spec={"children": 2, "data": "one"})
    await world.sync()
    await world.cluster.patch(THINGS, "p", {"spec": {"data": "two"}}, namespace=NS)
    await world.sync()
    assert verbs(world) == [
        ("PUT", "configmaps", "p-0"),
        ("PUT", "configmaps", "p-1"),
        ("PUT", "things/status", "p"),
    ]
    assert world.get("p-0")["data"]["value"] == "two"  # type: ignore[index]
    assert world.cluster.get(THINGS, NS, "p")["status"]["observedGeneration"] == 2  # type: ignore[index]
    await world.sync()
    assert world.writes() == []


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("OnDelete", []),
        ("Recreate", [("DELETE", "configmaps", "p-0")]),
        (
            "RollingRecreate",
            [
                ("PUT", "controllerrevisions", "old"),
                ("POST", "controllerrevisions", "new"),
                ("DELETE", "configmaps", "p-0"),
            ],
        ),
        ("InPlace", [("PUT", "configmaps", "p-0")]),
        (
            "RollingInPlace",
            [
                ("PUT", "controllerrevisions", "old"),
                ("POST", "controllerrevisions", "new"),
                ("PUT", "configmaps", "p-0"),
            ],
        ),
    ],
)
async def test_update_strategies(method: str, expected: list[tuple[str, str, str]]) -> None:
    """Rolling methods first write the revisions: the old one gives up its only child."""
    world = World(method=method)
    await world.parent(spec={"children": 1, "data": "one"})
    await world.sync()
    old = [r["metadata"]["name"] for r in world.cluster.of(REVISIONS)]
    await world.cluster.patch(THINGS, "p", {"spec": {"data": "two"}}, namespace=NS)
    await world.sync()
    new = [
        r["metadata"]["name"]
        for r in world.cluster.of(REVISIONS)
        if r["metadata"]["name"] not in old
    ]
    rename = {"old": old[0] if old else "", "new": new[0] if new else ""}
    expected = [(v, r, rename.get(n, n)) for v, r, n in expected]
    assert verbs(world) == [*expected, ("PUT", "things/status", "p")]
    if method.endswith("Recreate"):  # the next sync creates it again, at the new value
        await world.sync()
        # A rollout's Updated condition turns to OnLatestRevision.
        status = [("PUT", "things/status", "p")] if method.startswith("Rolling") else []
        assert verbs(world) == [("POST", "configmaps", "p-0"), *status]
        assert world.get("p-0")["data"]["value"] == "two"  # type: ignore[index]


async def test_on_delete_recreates_a_child_someone_deleted() -> None:
    world = World(method="OnDelete")
    await world.parent(spec={"children": 1, "data": "one"})
    await world.sync()
    await world.cluster.patch(THINGS, "p", {"spec": {"data": "two"}}, namespace=NS)
    await world.sync()
    await world.cluster.delete(CONFIGMAPS, "p-0", namespace=NS)
    await world.sync()
    assert verbs(world) == [("POST", "configmaps", "p-0")]
    assert world.get("p-0")["data"]["value"] == "two"  # type: ignore[index]


async def test_undesired_children_are_deleted() -> None:
    world = World()
    await world.parent(spec={"children": 3, "data": "one"})
    await world.sync()
    await world.cluster.patch(THINGS, "p", {"spec": {"children": 1}}, namespace=NS)
    await world.sync()
    assert verbs(world) == [
        ("DELETE", "configmaps", "p-1"),
        ("DELETE", "configmaps", "p-2"),
        ("PUT", "things/status", "p"),
    ]


async def test_foreign_children_are_neither_claimed_nor_touched() -> None:
    world = World()
    await world.parent(spec={"children": 0})
    await world.child(
        "theirs",
        ownerReferences=[
            {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x", "controller": True}
        ],
    )
    await world.child("unlabelled")
    await world.sync()
    assert verbs(world) == [("PUT", "things/status", "p")]
    assert world.requests[-1][1]["children"]["ConfigMap.v1"] == {}


async def test_matching_orphans_are_adopted_and_given_to_the_hook() -> None:
    world = World()
    parent = await world.parent(spec={"children": 1, "data": "one"})
    uid = parent["metadata"]["uid"]
    await world.child("p-0", labels={"controller-uid": uid})
    await world.child("extra", labels={"controller-uid": uid})
    await world.child("dying", labels={"controller-uid": uid}, finalizers=["x"])
    await world.cluster.delete(CONFIGMAPS, "dying", namespace=NS)  # held by its finalizer
    await world.sync()
    assert verbs(world) == [
        ("PATCH", "configmaps", "extra"),
        ("PATCH", "configmaps", "p-0"),
        ("DELETE", "configmaps", "extra"),  # adopted, not desired: deleted
        ("PUT", "configmaps", "p-0"),  # adopted, then updated in place at once
        ("PUT", "things/status", "p"),
    ]
    assert world.get("p-0")["data"] == {"value": "one", "index": "0"}  # type: ignore[index]
    assert sorted(world.requests[-1][1]["children"]["ConfigMap.v1"]) == ["extra", "p-0"]
    assert world.get("p-0")["metadata"]["ownerReferences"] == [owner(parent)]  # type: ignore[index]
    assert world.get("dying")["metadata"].get("ownerReferences") is None  # type: ignore[index]


async def test_children_that_stop_matching_are_released() -> None:
    world = World(generate_selector=False)
    await world.parent(spec={"children": 0, "selector": {"matchLabels": {"app": "a"}}})
    parent = world.cluster.get(THINGS, NS, "p")
    assert parent is not None
    await world.child("mine", labels={"app": "b"}, ownerReferences=[owner(parent)])
    await world.sync()
    assert verbs(world) == [("PATCH", "configmaps", "mine"), ("PUT", "things/status", "p")]
    assert world.get("mine")["metadata"].get("ownerReferences") is None  # type: ignore[index]
    assert world.requests[-1][1]["children"]["ConfigMap.v1"] == {}


async def test_a_conflicting_adoption_is_a_stale_snapshot_without_an_event() -> None:
    world = World()
    parent = await world.parent(spec={"children": 1, "data": "one"})
    await world.child("p-0", labels={"controller-uid": parent["metadata"]["uid"]})
    world.cluster.fail("PATCH", "p-0", errors.Conflict(409, {"reason": "Conflict"}))
    with pytest.raises(StaleSnapshot):
        await world.sync()
    assert world.requests == [] and world.events.emitted == []


async def test_parent_selector_is_required_without_generate_selector() -> None:
    world = World(generate_selector=False)
    await world.parent(spec={"children": 1, "data": "x", "selector": {}})
    with pytest.raises(SyncFailure, match="matchLabels, matchExpressions, or both"):
        await world.sync()
    assert world.writes() == [] and world.requests == []
    assert world.events.emitted[0][2] == "SyncError"


async def test_desired_children_must_match_the_parent_selector() -> None:
    world = World(generate_selector=False)
    await world.parent(spec={"children": 1, "data": "x", "selector": {"matchLabels": {"app": "a"}}})
    with pytest.raises(SyncFailure, match="don't match parent selector"):
        await world.sync()

    def labelled(request: dict[str, Any]) -> dict[str, Any]:
        answer = fanout(request)
        for child in answer["children"]:
            child["metadata"]["labels"] = {"app": "a"}
        return answer

    world.answer = labelled
    await world.sync()
    assert ("POST", "configmaps", "p-0") in verbs(world)


MALFORMED: list[tuple[str, Any, str]] = [
    ("not JSON", b"<html>oops</html>", "not valid JSON"),
    ("not an object", b"[1, 2]", "must be a JSON object"),
    ("children not a list", {"children": {"a": 1}}, "children"),
    ("status not an object", {"status": "ok", "children": []}, "status"),
    ("a null child", {"children": [None]}, "children[0]"),
    (
        "no apiVersion",
        {"children": [{"kind": "ConfigMap", "metadata": {"name": "a"}}]},
        "apiVersion",
    ),
    ("no kind", {"children": [{"apiVersion": "v1", "metadata": {"name": "a"}}]}, "kind"),
    ("no name", {"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}]}, "name"),
    (
        "another namespace",
        {
            "children": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "a", "namespace": "x"},
                }
            ]
        },
        "not in the parent's namespace",
    ),
    (
        "an undeclared type",
        {"children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}}]},
        "not one of the controller's childResources",
    ),
    (
        "labels that do not match",
        {
            "children": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "a", "labels": {"controller-uid": "someone-else"}},
                }
            ]
        },
        "don't match parent selector",
    ),
]


@pytest.mark.parametrize(("case", "answer", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
async def test_malformed_answers_fail_the_sync_and_write_nothing(
    case: str, answer: Any, message: str
) -> None:
    world = World()
    await world.parent(spec={"children": 1, "data": "one"})
    await world.sync()
    await world.cluster.patch(THINGS, "p", {"spec": {"data": "two", "children": 2}}, namespace=NS)
    world.answer = lambda _: answer
    with pytest.raises(SyncFailure) as failure:
        await world.sync()
    assert message in str(failure.value)
    assert world.writes() == []
    ((name, kind, reason, text),) = world.events.emitted
    assert (name, kind, reason) == ("p", "Warning", "SyncError")
    assert text == f"Sync error: {failure.value}"


@pytest.mark.parametrize(
    "failure",
    [
        HookStatusError(500, "internal", url="http://hook/sync"),
        HookTransportError(
            "http error: no answer within 10s", url="http://hook/sync", timed_out=True
        ),
        HookTransportError("http error: connection refused", url="http://hook/sync"),
    ],
)
async def test_hook_failures_fail_the_sync_with_an_event(failure: Exception) -> None:
    world = World()
    await world.parent()
    world.answer = lambda _: failure
    with pytest.raises(SyncFailure, match="sync hook failed for Thing ns/p"):
        await world.sync()
    assert world.writes() == []
    assert [e[2] for e in world.events.emitted] == ["SyncError"]


async def test_a_hook_asking_to_retry_later_requeues_without_failing() -> None:
    world = World()
    await world.parent()
    world.answer = lambda _: HookRetryAfter(7.0, url="http://hook/sync")
    with pytest.raises(RequeueAfter) as requeue:
        await world.sync()
    assert requeue.value.delay == 7.0
    assert world.writes() == [] and world.events.emitted == []


async def test_resync_after_seconds_requeues_the_parent() -> None:
    world = World()
    await world.parent(spec={"children": 0})
    world.answer = lambda _: {"status": {}, "children": [], "resyncAfterSeconds": 2.5}
    assert await world.sync() == Outcome(requeue_after=2.5)
    world.answer = lambda _: {"resyncAfterSeconds": 0}
    assert await world.sync() == Outcome()


async def test_status_is_written_only_when_it_changes() -> None:
    world = World()
    await world.parent(spec={"children": 0})
    world.answer = lambda _: {"status": None}
    await world.sync()
    assert world.cluster.get(THINGS, NS, "p")["status"] == {"observedGeneration": 1}  # type: ignore[index]
    await world.sync()
    assert world.writes() == []
    world.answer = lambda _: {"status": {"phase": "Ready"}}
    await world.sync()
    assert verbs(world) == [("PUT", "things/status", "p")]


@pytest.mark.parametrize("error", [errors.NotFound, errors.Conflict])
async def test_status_not_found_or_conflict_is_let_go(error: type[errors.ApiError]) -> None:
    world = World()
    await world.parent(spec={"children": 0})
    world.cluster.fail("PUT", "p", error(409, {"reason": error.__name__}))
    assert await world.sync() == Outcome()
    assert world.events.emitted == []


async def test_child_write_errors_fail_the_sync_after_the_status_write() -> None:
    world = World()
    await world.parent(spec={"children": 2, "data": "x"})
    world.cluster.fail(
        "POST", "p-0", errors.ServerError(500, {"reason": "InternalError", "message": "boom"})
    )
    with pytest.raises(SyncFailure, match=r"can't reconcile children for Thing ns/p.*boom"):
        await world.sync()
    assert verbs(world) == [
        ("POST", "configmaps", "p-0"),
        ("POST", "configmaps", "p-1"),
        ("PUT", "things/status", "p"),
    ]
    assert [e[2] for e in world.events.emitted] == ["SyncError"]


async def test_a_missing_parent_is_nothing_to_do() -> None:
    world = World()
    assert await world.sync("gone") == Outcome()
    assert world.requests == [] and world.writes() == []


# --- finalizers -------------------------------------------------------------------------------


async def test_finalize_hook_lifecycle() -> None:
    world = World(finalize=True)
    await world.parent(spec={"children": 1, "data": "x"})
    await world.sync()
    assert verbs(world)[0] == ("PATCH", "things", "p")  # the finalizer, before anything else
    assert world.cluster.get(THINGS, NS, "p")["metadata"]["finalizers"] == [FINALIZER]  # type: ignore[index]
    assert world.requests[-1][1]["parent"]["metadata"]["finalizers"] == [FINALIZER]

    await world.cluster.delete(THINGS, "p", namespace=NS)  # held back by the finalizer
    finalize_answers = [
        {
            "children": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "p-0"},
                    "data": {"value": "x", "index": "0"},
                }
            ],
            "finalized": False,
        },
        {"children": [], "finalized": True},
    ]
    world.answer = lambda _: finalize_answers.pop(0)
    await world.sync()
    endpoint, request = world.requests[-1]
    assert endpoint.hook.value == "finalize" and request["finalizing"] is True
    assert world.cluster.get(THINGS, NS, "p") is not None  # not finalized yet

    await world.sync()
    # the finalizer goes, which lets the parent go; no status write for a parent that is gone
    assert verbs(world) == [("PATCH", "things", "p")]
    assert world.cluster.get(THINGS, NS, "p") is None


async def test_children_are_managed_while_finalizing() -> None:
    world = World(finalize=True)
    await world.parent(spec={"children": 2, "data": "x"})
    await world.sync()
    await world.cluster.delete(THINGS, "p", namespace=NS)
    world.answer = lambda _: {"children": [], "finalized": False}
    await world.sync()
    assert verbs(world) == [
        ("DELETE", "configmaps", "p-0"),
        ("DELETE", "configmaps", "p-1"),
        ("PUT", "things/status", "p"),
    ]


async def test_a_parent_being_deleted_adopts_nothing() -> None:
    """Adopted under a dying parent, an orphan would go to the garbage collector once the
    finalizer is removed (Kubernetes' ControllerRefManager)."""
    world = World(finalize=True)
    parent = await world.parent(spec={"children": 1, "data": "x"}, finalizers=[FINALIZER])
    await world.cluster.delete(THINGS, "p", namespace=NS)  # held by our finalizer
    await world.child("p-0", labels={"controller-uid": parent["metadata"]["uid"]})
    wanted = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p-0"}}
    world.answer = lambda _: {"children": [wanted], "finalized": False}
    await world.sync()
    assert world.requests[-1][1]["finalizing"] is True
    assert world.requests[-1][1]["children"]["ConfigMap.v1"] == {}  # not claimed
    assert world.get("p-0")["metadata"].get("ownerReferences") is None  # type: ignore[index]
    assert ("PATCH", "configmaps", "p-0") not in verbs(world)


async def test_no_children_managed_under_a_garbage_collector_finalizer() -> None:
    world = World(finalize=True)
    await world.parent(spec={"children": 1, "data": "x"})
    await world.sync()
    await world.cluster.patch(
        THINGS, "p", {"metadata": {"finalizers": [FINALIZER, "foregroundDeletion"]}}, namespace=NS
    )
    await world.cluster.delete(THINGS, "p", namespace=NS)
    world.answer = lambda _: {"children": [], "finalized": False}
    await world.sync()
    assert world.requests[-1][1]["finalizing"] is True
    assert verbs(world) == [("PUT", "things/status", "p")]


async def test_a_deleting_parent_without_finalize_hook_is_synced_but_its_children_left_to_gc() -> (
    None
):
    world = World()
    await world.parent(spec={"children": 1, "data": "x"}, finalizers=["someone.io/else"])
    await world.sync()
    await world.cluster.delete(THINGS, "p", namespace=NS)
    world.answer = lambda _: {"status": {"phase": "Deleting"}, "children": []}
    await world.sync()
    assert world.requests[-1][1]["finalizing"] is False
    assert verbs(world) == [("PUT", "things/status", "p")]  # no finalizer added, no delete


async def test_finalized_from_sync_is_ignored() -> None:
    world = World(finalize=True)
    await world.parent(spec={"children": 0})
    world.answer = lambda _: {"finalized": True}
    await world.sync()
    await world.sync()
    assert world.cluster.get(THINGS, NS, "p")["metadata"]["finalizers"] == [FINALIZER]  # type: ignore[index]
    assert world.writes() == []


async def test_the_finalizer_goes_when_the_finalize_hook_does() -> None:
    world = World(finalize=True)
    await world.parent(spec={"children": 0}, finalizers=["a", FINALIZER])
    world.reconciler = world.built(definition(controller()))
    await world.sync()
    assert verbs(world)[0] == ("PATCH", "things", "p")
    assert world.cluster.get(THINGS, NS, "p")["metadata"]["finalizers"] == ["a"]  # type: ignore[index]


async def test_unselected_parents_are_ignored_unless_they_carry_our_finalizer() -> None:
    world = World(finalize=True, label_selector={"matchLabels": {"managed": "yes"}})
    await world.parent("a", spec={"children": 0})
    await world.parent("b", spec={"children": 0}, finalizers=[FINALIZER])
    assert await world.sync("a") == Outcome()
    assert world.requests == [] and world.writes() == []
    world.answer = lambda _: {"finalized": True}
    await world.sync("b")
    assert world.requests[-1][0].hook.value == "finalize"
    assert world.cluster.get(THINGS, NS, "b")["metadata"].get("finalizers") is None  # type: ignore[index]


async def test_a_finalizer_conflict_is_a_stale_snapshot() -> None:
    world = World(finalize=True)
    await world.parent()
    world.cluster.fail("PATCH", "p", errors.Conflict(409, {"reason": "Conflict"}))
    with pytest.raises(StaleSnapshot):
        await world.sync()
    assert world.requests == [] and world.events.emitted == []


# --- construction -----------------------------------------------------------------------------


async def test_a_parent_without_status_subresource_cannot_run() -> None:
    world = World()
    with pytest.raises(ValueError, match="no status subresource"):
        world.built(definition(controller(), parent_subresources=()))


async def test_an_invalid_controller_cannot_run() -> None:
    world = World()
    broken = ControllerDef(
        ControllerKind.COMPOSITE, "cc", "u", "1", b'{"kind": "CompositeController"}', ()
    )
    with pytest.raises(InvalidControllerError):
        world.built(broken)


async def test_resources_must_match_the_child_types() -> None:
    world = World()
    full = definition(controller(secrets=True))
    short = ControllerDef(full.kind, full.name, full.uid, "1", full.object, full.resources[:2])
    with pytest.raises(ValueError, match="2 resources for 1 parent and 2 child types"):
        world.built(short)


async def test_secrets_group_is_a_declared_type() -> None:
    world = World(secrets=True)
    await world.parent(spec={"children": 0})
    world.answer = lambda _: {
        "children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]
    }
    await world.sync()
    assert world.cluster.get(SECRETS, NS, "s") is not None


async def test_unknown_fields_fail_strict_hooks_and_are_logged_once_for_loose_ones() -> None:
    strict = World(version="v2")
    await strict.parent(spec={"children": 0})
    strict.answer = lambda _: {"status": {}, "Children": []}
    with pytest.raises(SyncFailure, match='unknown field "Children"'):
        await strict.sync()

    loose = World(version="v1")
    await loose.parent(spec={"children": 0})
    loose.answer = lambda _: {"status": {}, "Children": []}
    with structlog.testing.capture_logs() as logs:
        assert await loose.sync() == Outcome()
        await loose.sync()
    warned = [entry for entry in logs if entry["event"] == "loose decoding of a hook answer"]
    assert [entry["problem"] for entry in warned] == ['unknown field "Children"']


# --- events and conditions from the hook ------------------------------------------------------


def ready(status: str, reason: str = "Up") -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason}


async def test_the_hooks_events_go_on_the_parent() -> None:
    world = World()
    await world.parent(spec={"children": 0})
    world.answer = lambda _: {
        "status": {},
        "events": [
            {"type": "Normal", "reason": "Provisioned", "message": "db is up"},
            {"type": "Warning", "reason": "Slow"},
        ],
    }
    await world.sync()
    assert world.events.emitted == [
        ("p", "Normal", "Provisioned", "db is up"),
        ("p", "Warning", "Slow", ""),
    ]


async def test_conditions_are_merged_into_the_status_and_kept_until_they_change() -> None:
    world = World()
    await world.parent(spec={"children": 0})
    world.answer = lambda _: {"status": {"phase": "Up"}, "conditions": [ready("True")]}
    await world.sync()
    since = "2026-01-01T00:00:00Z"
    condition = {**ready("True"), "message": "", "lastTransitionTime": since}
    status = {"phase": "Up", "conditions": [condition], "observedGeneration": 1}
    assert world.cluster.get(THINGS, NS, "p")["status"] == status  # type: ignore[index]

    world.wall += 60  # the same answer later: nothing to write
    await world.sync()
    assert world.writes() == []

    world.answer = lambda _: {"status": {"phase": "Up"}, "conditions": [ready("True", "StillUp")]}
    await world.sync()
    written = world.cluster.get(THINGS, NS, "p")["status"]["conditions"]  # type: ignore[index]
    assert written == [{**condition, "reason": "StillUp"}]  # the same status: the same time

    world.answer = lambda _: {"status": {"phase": "Down"}, "conditions": [ready("False")]}
    await world.sync()
    written = world.cluster.get(THINGS, NS, "p")["status"]["conditions"]  # type: ignore[index]
    assert written == [
        {**ready("False"), "message": "", "lastTransitionTime": "2026-01-01T00:01:00Z"}
    ]


async def test_malformed_events_and_conditions_are_one_sync_error_and_the_rest_applies() -> None:
    world = World()
    await world.parent(spec={"children": 1, "data": "d"})

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        return {
            **fanout(request),
            "events": [{"type": "Info", "reason": "R"}, {"type": "Normal", "reason": "Good"}],
            "conditions": [{"type": "Ready", "status": "yes", "reason": "Up"}, ready("True")],
        }

    world.answer = answer
    assert await world.sync() == Outcome()
    assert world.events.emitted == [
        (
            "p",
            "Warning",
            "SyncError",
            "Sync error: sync hook answer for Thing ns/p: left out "
            "events[0].type: must be Normal or Warning, not 'Info'; "
            "conditions[0].status: must be True, False or Unknown, not 'yes'",
        ),
        ("p", "Normal", "Good", ""),
    ]
    assert world.get("p-0") is not None
    status = world.cluster.get(THINGS, NS, "p")["status"]  # type: ignore[index]
    assert status["children"] == 1 and [c["status"] for c in status["conditions"]] == ["True"]


async def test_the_finalize_hook_reports_too() -> None:
    world = World(finalize=True)
    await world.parent(spec={"children": 0})
    await world.sync()
    await world.cluster.delete(THINGS, "p", namespace=NS)
    world.answer = lambda _: {
        "finalized": False,
        "events": [{"type": "Normal", "reason": "Draining", "message": "1 left"}],
        "conditions": [ready("False", "Draining")],
    }
    await world.sync()
    assert ("p", "Normal", "Draining", "1 left") in world.events.emitted
    conditions = world.cluster.get(THINGS, NS, "p")["status"]["conditions"]  # type: ignore[index]
    assert [c["reason"] for c in conditions] == ["Draining"]


# --- pause ------------------------------------------------------------------------------------

PAUSED = {"metashard.io/paused": "true"}


async def test_a_paused_parent_is_neither_sent_to_the_hook_nor_written_and_says_so() -> None:
    world = World(finalize=True)
    await world.parent(spec={"children": 1, "data": "x"}, annotations=PAUSED)
    assert await world.sync() == Outcome()
    assert world.requests == [] and world.writes() == []  # not even our finalizer
    assert world.events.emitted == [
        (
            "p",
            "Normal",
            "Paused",
            'sync skipped: metashard.io/paused is "true" (no hook call, no write until it is '
            'removed or "false")',
        )
    ]
    await world.cluster.patch(
        THINGS, "p", {"metadata": {"annotations": {"metashard.io/paused": "false"}}}, namespace=NS
    )
    await world.sync()
    assert verbs(world)[:2] == [("PATCH", "things", "p"), ("POST", "configmaps", "p-0")]


async def test_a_paused_controller_holds_back_every_parent_without_an_event() -> None:
    world = World()
    await world.parent(spec={"children": 1, "data": "x"})
    cc = controller()
    cc["metadata"]["annotations"] = PAUSED
    world.reconciler = world.built(definition(cc))
    assert await world.sync() == Outcome()
    assert world.requests == [] and world.writes() == [] and world.events.emitted == []
    cc["metadata"]["annotations"] = {"metashard.io/paused": "false"}
    world.reconciler = world.built(definition(cc))
    await world.sync()
    assert ("POST", "configmaps", "p-0") in verbs(world)


async def test_a_paused_parent_being_deleted_is_finalized() -> None:
    world = World(finalize=True)
    await world.parent(spec={"children": 1, "data": "x"})
    await world.sync()
    await world.cluster.patch(THINGS, "p", {"metadata": {"annotations": PAUSED}}, namespace=NS)
    await world.cluster.delete(THINGS, "p", namespace=NS)  # held back by the finalizer
    world.answer = lambda _: {"children": [], "finalized": True}
    await world.sync()
    assert world.requests[-1][0].hook.value == "finalize"
    assert world.cluster.get(THINGS, NS, "p") is None
    assert [reason for _, _, reason, _ in world.events.emitted] == []


async def test_an_unselected_paused_parent_carrying_our_finalizer_is_finalized() -> None:
    world = World(finalize=True, label_selector={"matchLabels": {"managed": "yes"}})
    await world.parent(spec={"children": 0}, finalizers=[FINALIZER], annotations=PAUSED)
    world.answer = lambda _: {"finalized": True}
    await world.sync()
    assert world.requests[-1][0].hook.value == "finalize"


async def test_an_unreadable_pause_is_a_warning_and_the_parent_is_synced() -> None:
    world = World()
    await world.parent(
        spec={"children": 1, "data": "x"}, annotations={"metashard.io/paused": "yes"}
    )
    await world.sync()
    assert ("POST", "configmaps", "p-0") in verbs(world)
    assert world.events.emitted == [
        (
            "p",
            "Warning",
            "InvalidAnnotation",
            'annotation metashard.io/paused: \'yes\' is neither "true" nor "false"; not paused',
        )
    ]
