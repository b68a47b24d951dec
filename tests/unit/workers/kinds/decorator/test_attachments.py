"""workers.kinds.decorator.attachments: which attachments are a target's."""

from __future__ import annotations

from typing import Any

import orjson

from proto.api.names import DECORATOR_ANNOTATION
from workers.kinds.decorator.attachments import split, stamp
from workers.sync.observed import Observed


def obj(
    name: str,
    *,
    ns: str = "ns",
    owner: str | None = None,
    dc: str | None = "dc",
    deleting: bool = False,
) -> Observed:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"uid-{name}"}
    if dc is not None:
        meta["annotations"] = {DECORATOR_ANNOTATION: dc}
    if owner is not None:
        meta["ownerReferences"] = [{"uid": owner, "controller": True, "name": "t", "kind": "X"}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    body = {"metadata": meta}
    return Observed.decode(orjson.dumps(body))


def names(objects: tuple[Observed, ...]) -> list[str]:
    return [o.name for o in objects]


def test_ours_needs_both_the_owner_and_the_annotation() -> None:
    found = split(
        [
            obj("ours", owner="t-uid"),
            obj("sts-pod", owner="t-uid", dc=None),  # owned, not annotated: a StatefulSet's pod
            obj("other-dc", owner="t-uid", dc="other"),
            obj("other-owner", owner="x-uid"),
            obj("orphan"),
            obj("orphan-unannotated", dc=None),
            obj("orphan-deleting", deleting=True),
            obj("orphan-elsewhere", ns="other"),
        ],
        uid="t-uid",
        namespace="ns",
        name="dc",
        deleting=False,
    )
    assert names(found.owned) == ["ours"]
    assert names(found.adoptable) == ["orphan"]


def test_a_target_being_deleted_keeps_what_it_owns_and_may_adopt_nothing() -> None:
    found = split(
        [obj("ours", owner="t-uid"), obj("orphan")],
        uid="t-uid",
        namespace="ns",
        name="dc",
        deleting=True,
    )
    assert names(found.owned) == ["ours"]
    assert names(found.adoptable) == []


def test_a_cluster_scoped_target_may_adopt_in_any_namespace() -> None:
    found = split(
        [obj("a", ns="one"), obj("b", ns="two")], uid="t", namespace="", name="dc", deleting=False
    )
    assert names(found.adoptable) == ["a", "b"]


def test_stamp_sets_the_annotation_and_keeps_the_others() -> None:
    desired: dict[str, Any] = {"metadata": {"name": "x", "annotations": {"keep": "me"}}}
    stamp(desired, "dc")
    assert desired["metadata"]["annotations"] == {"keep": "me", DECORATOR_ANNOTATION: "dc"}
    bare: dict[str, Any] = {"metadata": {"name": "y"}}
    stamp(bare, "dc")
    assert bare["metadata"]["annotations"] == {DECORATOR_ANNOTATION: "dc"}
