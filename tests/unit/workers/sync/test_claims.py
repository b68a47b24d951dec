"""workers.sync.claims: Kubernetes' ClaimObject rules as Metacontroller applies them, and the
ownerReference patches."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.api.selectors import Selector, from_match_labels
from workers.sync.claims import Claimant, adoption_patch, claim, release_patch
from workers.sync.observed import Observed

UID = "parent-uid"
SELECTOR = from_match_labels({"app": "x"})


def child(
    name: str = "c",
    *,
    labels: dict[str, str] | None = None,
    controller: str | None = None,
    namespace: str = "ns",
    deleting: bool = False,
    refs: list[dict[str, Any]] | None = None,
) -> Observed:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"u-{name}"}
    metadata["resourceVersion"] = "7"
    if labels is not None:
        metadata["labels"] = labels
    owner_refs = list(refs or [])
    if controller is not None:
        owner_refs.append(
            {"apiVersion": "v1", "kind": "P", "name": "p", "uid": controller, "controller": True}
        )
    if owner_refs:
        metadata["ownerReferences"] = owner_refs
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}
    return Observed.decode(orjson.dumps(obj))


def parent(*, deleting: bool = False, namespace: str = "ns") -> Claimant:
    return Claimant(UID, namespace, deleting, SELECTOR)


MATCH = {"app": "x"}
OTHER = {"app": "y"}

CASES = [
    # (case, child, parent, expected bucket)
    ("ours and matched", child(labels=MATCH, controller=UID), parent(), "owned"),
    (
        "ours, matched, parent deleting",
        child(labels=MATCH, controller=UID),
        parent(deleting=True),
        "owned",
    ),
    ("ours, not matched", child(labels=OTHER, controller=UID), parent(), "release"),
    ("ours, no labels", child(controller=UID), parent(), "release"),
    (
        "ours, not matched, parent deleting",
        child(labels=OTHER, controller=UID),
        parent(deleting=True),
        None,
    ),
    ("another controller's", child(labels=MATCH, controller="other"), parent(), None),
    ("orphan matched", child(labels=MATCH), parent(), "adopt"),
    (
        "orphan with a non-controller ref",
        child(labels=MATCH, refs=[{"uid": "x"}]),
        parent(),
        "adopt",
    ),
    ("orphan not matched", child(labels=OTHER), parent(), None),
    ("orphan being deleted", child(labels=MATCH, deleting=True), parent(), None),
    ("orphan, parent deleting", child(labels=MATCH), parent(deleting=True), None),
    ("orphan in another namespace", child(labels=MATCH, namespace="b"), parent(), None),
    (
        "orphan under a cluster-scoped parent",
        child(labels=MATCH, namespace="b"),
        parent(namespace=""),
        "adopt",
    ),
]


@pytest.mark.parametrize(
    ("case", "candidate", "claimant", "bucket"), CASES, ids=[c[0] for c in CASES]
)
def test_claim_rules(
    case: str, candidate: Observed, claimant: Claimant, bucket: str | None
) -> None:
    claims = claim([candidate], claimant)
    found = {name: getattr(claims, name) for name in ("owned", "adopt", "release")}
    for name, items in found.items():
        assert items == ((candidate,) if name == bucket else ()), f"{case}: {name}"


def test_claim_keeps_snapshot_order_per_bucket() -> None:
    items = [child(f"c{i}", labels=MATCH, controller=UID if i % 2 else None) for i in range(6)]
    claims = claim(items, parent())
    assert [c.name for c in claims.owned] == ["c1", "c3", "c5"]
    assert [c.name for c in claims.adopt] == ["c0", "c2", "c4"]


LABELS = st.sampled_from([None, MATCH, OTHER, {"app": "x", "more": "1"}])
CONTROLLERS = st.sampled_from([None, UID, "other"])


@given(
    st.lists(
        st.tuples(LABELS, CONTROLLERS, st.booleans(), st.sampled_from(["ns", "b"])), max_size=8
    ),
    st.booleans(),
)
def test_claim_properties(specs: list[Any], deleting: bool) -> None:
    items = [
        child(f"c{i}", labels=labels, controller=ctl, deleting=dead, namespace=ns)
        for i, (labels, ctl, dead, ns) in enumerate(specs)
    ]
    claims = claim(items, parent(deleting=deleting))
    names = [c.name for bucket in (claims.owned, claims.adopt, claims.release) for c in bucket]
    assert len(names) == len(set(names)), "a child is in one bucket at most"
    for c in claims.owned:
        assert c.controller_uid == UID and SELECTOR.matches(c.labels)
    for c in claims.adopt:
        assert c.controller_uid is None and SELECTOR.matches(c.labels)
        assert not c.deleting and c.namespace == "ns" and not deleting
    for c in claims.release:
        assert c.controller_uid == UID and not SELECTOR.matches(c.labels) and not deleting
    for c in items:  # what is ours and matched is always claimed
        if c.controller_uid == UID and SELECTOR.matches(c.labels):
            assert c in claims.owned
        if c.controller_uid not in (None, UID):
            assert c.name not in names


def test_a_selector_that_matches_nothing_claims_nothing_and_releases_ours() -> None:
    ours = child(labels=MATCH, controller=UID)
    claims = claim([ours, child("o", labels=MATCH)], Claimant(UID, "ns", False, Selector.nothing()))
    assert claims.owned == () and claims.adopt == () and claims.release == (ours,)


OWNER = {
    "apiVersion": "v1",
    "kind": "P",
    "name": "p",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


def test_adoption_patch_appends_the_controller_reference_under_the_resource_version() -> None:
    other = {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x"}
    patch = adoption_patch(child(refs=[other]), OWNER)
    assert patch == {"metadata": {"ownerReferences": [other, OWNER], "resourceVersion": "7"}}


def test_adoption_patch_replaces_a_reference_to_the_same_uid() -> None:
    weak = {"apiVersion": "v1", "kind": "P", "name": "p", "uid": UID}
    patch = adoption_patch(child(refs=[weak]), OWNER)
    assert patch["metadata"]["ownerReferences"] == [OWNER]


def test_release_patch_removes_every_reference_to_the_parent() -> None:
    other = {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x"}
    patch = release_patch(child(controller=UID, refs=[other]), UID)
    assert patch == {"metadata": {"ownerReferences": [other], "resourceVersion": "7"}}
    assert release_patch(child(controller=UID), UID)["metadata"]["ownerReferences"] is None
