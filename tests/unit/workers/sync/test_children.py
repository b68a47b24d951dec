"""workers.sync.children: the plan of child writes per update strategy, and the writes with
the API errors Metacontroller lets go."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.apiserver.inprocess import MemoryCluster
from proto.api.controllers import UpdateMethod
from proto.api.hooks import DesiredChild
from proto.api.objectmap import TypeKey
from proto.kube import errors
from proto.kube.resources import Resource
from workers.apply import LAST_APPLIED_ANNOTATION, ControllerRef, apply_update, create_body
from workers.sync.children import Action, ChildWriter, Plan, Target, Write, plan
from workers.sync.observed import Observed

CM = TypeKey("v1", "ConfigMap")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
OWNER = ControllerRef("e2e.metashard.io/v1", "Thing", "p", "parent-uid")


def desired(name: str, value: str = "v", **extra: Any) -> DesiredChild:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": {"value": value},
        **extra,
    }
    return DesiredChild(CM, "ns", name, obj)


def observed_from(child: DesiredChild, *, deleting: bool = False, **changes: Any) -> Observed:
    """The child as the create path wrote it, as the API server returns it, then ``changes``."""
    body = create_body(child.object, OWNER)
    metadata = {**body["metadata"], "uid": f"uid-{child.name}", "resourceVersion": "5"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return Observed.decode(orjson.dumps({**body, "metadata": metadata, **changes}))


def run(observed: list[Observed], wanted: list[DesiredChild], method: UpdateMethod) -> Plan:
    return plan(observed={CM: observed}, desired=wanted, methods={CM: method}, owner=OWNER)


def test_missing_children_are_created_with_last_applied_and_owner() -> None:
    result = run([], [desired("a"), desired("b")], UpdateMethod.ON_DELETE)
    assert [(w.action, w.name) for w in result.writes] == [
        (Action.CREATE, "a"),
        (Action.CREATE, "b"),
    ]
    body = result.writes[0].body
    assert body is not None
    assert body["metadata"]["ownerReferences"] == [OWNER.as_owner_reference()]
    annotation = orjson.loads(body["metadata"]["annotations"][LAST_APPLIED_ANNOTATION])
    assert annotation == desired("a").object  # recorded before the owner was appended


@pytest.mark.parametrize("method", list(UpdateMethod))
def test_unchanged_children_are_left_alone_by_every_strategy(method: UpdateMethod) -> None:
    child = desired("a")
    assert run([observed_from(child)], [child], method) == Plan((), ())


CHANGED = [
    (UpdateMethod.ON_DELETE, None),
    (UpdateMethod.RECREATE, Action.RECREATE),
    (UpdateMethod.ROLLING_RECREATE, Action.RECREATE),
    (UpdateMethod.IN_PLACE, Action.UPDATE),
    (UpdateMethod.ROLLING_IN_PLACE, Action.UPDATE),
]


@pytest.mark.parametrize(("method", "action"), CHANGED)
def test_changed_children_per_strategy(method: UpdateMethod, action: Action | None) -> None:
    current = observed_from(desired("a", "old"))
    result = run([current], [desired("a", "new")], method)
    if action is None:
        assert result.writes == ()
        return
    (write,) = result.writes
    assert (write.action, write.name, write.namespace) == (action, "a", "ns")
    if action is Action.RECREATE:
        assert write.uid == "uid-a" and write.body is None
    else:
        assert write.body == apply_update(current.obj, desired("a", "new").object)[0]
        assert write.body["data"] == {"value": "new"}
        assert write.body["metadata"]["resourceVersion"] == "5"  # the precondition


def test_an_update_leaves_out_the_observed_managed_fields() -> None:
    managed = [{"manager": "metashard", "operation": "Update", "fieldsV1": {"f:data": {}}}]
    current = observed_from(desired("a", "old"))
    current = Observed.decode(
        orjson.dumps(
            {**current.obj, "metadata": {**current.obj["metadata"], "managedFields": managed}}
        )
    )
    (write,) = run([current], [desired("a", "new")], UpdateMethod.IN_PLACE).writes
    merged = apply_update(current.obj, desired("a", "new").object)[0]
    assert merged["metadata"]["managedFields"] == managed  # what dynamic apply computes
    assert write.body is not None
    assert "managedFields" not in write.body["metadata"]  # the server keeps the live ones
    assert write.body["metadata"] == {
        k: v for k, v in merged["metadata"].items() if k != "managedFields"
    }


def test_in_place_update_keeps_what_others_added() -> None:
    mine = desired("a", "old")
    current = observed_from(mine, data={"value": "old", "sidecar": "theirs"})
    (write,) = run([current], [desired("a", "new")], UpdateMethod.IN_PLACE).writes
    assert write.body is not None
    assert write.body["data"] == {"value": "new", "sidecar": "theirs"}


@pytest.mark.parametrize("method", list(UpdateMethod))
def test_children_being_deleted_are_never_updated(method: UpdateMethod) -> None:
    current = observed_from(desired("a", "old"), deleting=True)
    assert run([current], [desired("a", "new")], method).writes == ()


def test_undesired_children_are_deleted_first_unless_already_going() -> None:
    keep, gone, going = desired("keep"), desired("gone"), desired("going")
    observed = [observed_from(keep), observed_from(gone), observed_from(going, deleting=True)]
    result = run(observed, [desired("new"), keep], UpdateMethod.IN_PLACE)
    assert [(w.action, w.name, w.uid) for w in result.writes] == [
        (Action.DELETE, "gone", "uid-gone"),
        (Action.CREATE, "new", ""),
    ]


def test_a_child_whose_update_cannot_be_computed_fails_alone() -> None:
    bad = observed_from(desired("bad"))
    metadata = {**bad.obj["metadata"], "annotations": {LAST_APPLIED_ANNOTATION: "[1]"}}
    bad = Observed.decode(orjson.dumps({**bad.obj, "metadata": metadata}))
    result = run([bad], [desired("bad", "new"), desired("fresh")], UpdateMethod.IN_PLACE)
    assert [(w.action, w.name) for w in result.writes] == [(Action.CREATE, "fresh")]
    (problem,) = result.errors
    assert "ConfigMap ns/bad" in problem and LAST_APPLIED_ANNOTATION in problem


def test_children_match_by_type_namespace_and_name() -> None:
    secret = TypeKey("v1", "Secret")
    child = desired("a")
    other_type = DesiredChild(secret, "ns", "a", {**child.object, "kind": "Secret"})
    result = plan(
        observed={CM: [observed_from(child)], secret: []},
        desired=[child, other_type],
        methods={CM: UpdateMethod.IN_PLACE, secret: UpdateMethod.IN_PLACE},
        owner=OWNER,
    )
    assert [(w.action, w.type) for w in result.writes] == [(Action.CREATE, secret)]


# --- the writes ---------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.wrote: list[tuple[str, str, str]] = []

    def __call__(
        self, group_resource: str, obj: Mapping[str, Any], *, action: str = "update"
    ) -> None:
        name = obj.get("metadata", {}).get("name", obj["kind"])
        self.wrote.append((action, group_resource, name))


async def existing(cluster: MemoryCluster, name: str) -> dict[str, Any]:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}}
    return await cluster.create(CONFIGMAPS, body)


def writer(cluster: MemoryCluster) -> ChildWriter:
    return ChildWriter(cluster, {CM: Target(CONFIGMAPS, "configmaps")})


@pytest.mark.asyncio
async def test_writes_are_made_and_reported() -> None:
    cluster = MemoryCluster()
    old = await existing(cluster, "old")
    upd = await existing(cluster, "upd")
    recorder = Recorder()
    writes = [
        Write(Action.DELETE, CM, "ns", "old", uid=old["metadata"]["uid"]),
        Write(Action.CREATE, CM, "ns", "new", body=desired("new").object),
        Write(Action.UPDATE, CM, "ns", "upd", body={**upd, "data": {"x": "1"}}),
    ]
    assert await writer(cluster).run(writes, recorder) == []
    assert cluster.get(CONFIGMAPS, "ns", "old") is None
    assert cluster.get(CONFIGMAPS, "ns", "new") is not None
    assert cluster.get(CONFIGMAPS, "ns", "upd")["data"] == {"x": "1"}  # type: ignore[index]
    assert sorted(recorder.wrote) == [
        ("create", "configmaps", "new"),
        ("delete", "configmaps", "Status"),
        ("update", "configmaps", "upd"),
    ]


@pytest.mark.asyncio
async def test_errors_metacontroller_lets_go() -> None:
    cluster = MemoryCluster()
    taken = await existing(cluster, "taken")
    stale = await existing(cluster, "stale")
    await cluster.patch(CONFIGMAPS, "stale", {"data": {"moved": "on"}}, namespace="ns")
    writes = [
        Write(Action.CREATE, CM, "ns", "taken", body=desired("taken").object),  # AlreadyExists
        Write(Action.DELETE, CM, "ns", "missing", uid="u"),  # NotFound
        Write(Action.RECREATE, CM, "ns", "missing2", uid="u"),  # NotFound
        Write(Action.UPDATE, CM, "ns", "missing3", body=desired("missing3").object),  # NotFound
        Write(Action.UPDATE, CM, "ns", "stale", body=stale),  # Conflict
    ]
    recorder = Recorder()
    assert await writer(cluster).run(writes, recorder) == []
    assert recorder.wrote == []
    assert cluster.get(CONFIGMAPS, "ns", "taken") == taken


@pytest.mark.asyncio
async def test_other_errors_are_reported_per_write_and_do_not_stop_the_rest() -> None:
    cluster = MemoryCluster()
    victim = await existing(cluster, "victim")
    boom = errors.ServerError(500, {"reason": "InternalError", "message": "boom"})
    cluster.fail("POST", "a", boom)
    writes = [
        Write(Action.CREATE, CM, "ns", "a", body=desired("a").object),
        Write(Action.CREATE, CM, "ns", "b", body=desired("b").object),
        Write(Action.DELETE, CM, "ns", "victim", uid="not-" + victim["metadata"]["uid"]),
    ]
    problems = await writer(cluster).run(writes, Recorder())
    assert len(problems) == 2
    assert "can't create ConfigMap ns/a" in problems[0] and "boom" in problems[0]
    assert "can't delete ConfigMap ns/victim" in problems[1]
    assert cluster.get(CONFIGMAPS, "ns", "b") is not None
    assert cluster.get(CONFIGMAPS, "ns", "victim") is not None  # uid precondition held


@pytest.mark.asyncio
async def test_deletes_ask_for_background_propagation_with_a_uid_precondition() -> None:
    seen: list[dict[str, Any]] = []

    class Spy(MemoryCluster):
        async def delete(self, resource: Resource, name: str, **options: Any) -> dict[str, Any]:
            seen.append(options)
            return await super().delete(resource, name, **options)

    cluster = Spy()
    child = await existing(cluster, "c")
    await writer(cluster).run(
        [Write(Action.DELETE, CM, "ns", "c", uid=child["metadata"]["uid"])], Recorder()
    )
    assert seen == [
        {"namespace": "ns", "propagation_policy": "Background", "uid": child["metadata"]["uid"]}
    ]


NAMES = st.sampled_from(["a", "b", "c", "d"])
VALUES = st.sampled_from(["1", "2"])


@given(
    observed=st.dictionaries(NAMES, st.tuples(VALUES, st.booleans()), max_size=4),
    wanted=st.dictionaries(NAMES, VALUES, max_size=4),
    method=st.sampled_from([UpdateMethod.IN_PLACE, UpdateMethod.RECREATE]),
)
@settings(max_examples=60, deadline=None)
def test_a_plan_carried_out_converges(
    observed: dict[str, tuple[str, bool]], wanted: dict[str, str], method: UpdateMethod
) -> None:
    """Writing a plan, then planning again from the new state (twice for Recreate, which
    deletes first), leaves nothing to do, and every live child holds its desired value."""

    async def scenario() -> None:
        cluster = MemoryCluster()
        for name, (value, dying) in observed.items():
            obj = create_body(desired(name, value).object, OWNER)
            if dying:
                obj = {**obj, "metadata": {**obj["metadata"], "finalizers": ["hold"]}}
            await cluster.create(CONFIGMAPS, obj)
            if dying:
                await cluster.delete(CONFIGMAPS, name, namespace="ns")
        target = [desired(name, value) for name, value in wanted.items()]

        def current() -> list[Observed]:
            return [Observed.decode(orjson.dumps(o)) for o in cluster.of(CONFIGMAPS)]

        for _ in range(2):
            result = run(current(), target, method)
            assert result.errors == ()
            assert await writer(cluster).run(result.writes, Recorder()) == []
        assert run(current(), target, method) == Plan((), ())
        for child in current():
            if not child.deleting:
                assert child.name in wanted and child.obj["data"] == {"value": wanted[child.name]}
            else:
                assert child.name in observed  # left alone while it goes

    asyncio.run(scenario())
