"""workers.sync.children under dynamic apply: a disturbed ``controller-revision-hash`` label.

A rolling child carries the label of the revision it belongs to, and its last-applied
annotation records it. Someone removes the label, or sets it to another value: the
annotation still records the old one. The plan must put the label back in place (an
``UPDATE`` of the merged object), whatever the update method, and recreate only for a
difference beyond the label.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proto.api.controllers import UpdateMethod
from proto.api.hooks import DesiredChild
from proto.api.objectmap import TypeKey
from proto.api.revisions import REVISION_HASH_LABEL
from workers.apply import LAST_APPLIED_ANNOTATION, ControllerRef, create_body
from workers.sync.children import Action, Plan, plan
from workers.sync.observed import Observed

CM = TypeKey("v1", "ConfigMap")
OWNER = ControllerRef("e2e.metashard.io/v1", "Thing", "p", "parent-uid")
LABELS = frozenset((REVISION_HASH_LABEL,))
ROLLING_AND_PLAIN = [
    UpdateMethod.ROLLING_RECREATE,
    UpdateMethod.ROLLING_IN_PLACE,
    UpdateMethod.RECREATE,
    UpdateMethod.IN_PLACE,
]


def wanted(value: str = "v", revision: str = "h1") -> DesiredChild:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "labels": {"app": "web", REVISION_HASH_LABEL: revision},
        },
        "data": {"value": value},
    }
    return DesiredChild(CM, "ns", "a", obj)


def disturbed(child: DesiredChild, label: str | None) -> Observed:
    """``child`` as the create path wrote it, its label then removed (None) or set to
    ``label`` by someone else: the last-applied annotation still records the old one."""
    body = create_body(child.object, OWNER)
    metadata = body["metadata"]
    labels = {k: v for k, v in metadata["labels"].items() if k != REVISION_HASH_LABEL}
    if label is not None:
        labels[REVISION_HASH_LABEL] = label
    metadata = {**metadata, "labels": labels, "uid": "uid-a", "resourceVersion": "5"}
    return Observed.decode(orjson.dumps({**body, "metadata": metadata}))


def run(current: Observed, child: DesiredChild, method: UpdateMethod) -> Plan:
    return plan(
        observed={CM: [current]},
        desired=[child],
        methods={CM: method},
        owner=OWNER,
        in_place_labels=LABELS,
    )


@pytest.mark.parametrize("method", ROLLING_AND_PLAIN)
@pytest.mark.parametrize("label", [None, "wrong", ""])
def test_a_removed_or_changed_label_is_put_back_in_place(
    method: UpdateMethod, label: str | None
) -> None:
    child = wanted()
    current = disturbed(child, label)
    recorded = orjson.loads(current.obj["metadata"]["annotations"][LAST_APPLIED_ANNOTATION])
    assert recorded["metadata"]["labels"][REVISION_HASH_LABEL] == "h1"  # the old record
    (write,) = run(current, child, method).writes
    assert write.action is Action.UPDATE
    assert write.body is not None
    assert write.body["metadata"]["labels"] == {"app": "web", REVISION_HASH_LABEL: "h1"}
    assert write.body["metadata"]["resourceVersion"] == "5"  # the precondition
    assert write.body["data"] == {"value": "v"}


@pytest.mark.parametrize("method", [UpdateMethod.ROLLING_RECREATE, UpdateMethod.RECREATE])
@pytest.mark.parametrize("label", [None, "wrong"])
def test_a_disturbed_label_with_another_change_still_recreates(
    method: UpdateMethod, label: str | None
) -> None:
    current = disturbed(wanted("old"), label)
    (write,) = run(current, wanted("new"), method).writes
    assert (write.action, write.uid) == (Action.RECREATE, "uid-a")


@pytest.mark.parametrize("method", [UpdateMethod.ROLLING_RECREATE, UpdateMethod.RECREATE])
def test_a_new_revision_label_alone_is_written_in_place(method: UpdateMethod) -> None:
    """The child of an older revision that the latest takes over: only the label changes."""
    current = disturbed(wanted(revision="h1"), "h1")
    (write,) = run(current, wanted(revision="h2"), method).writes
    assert write.action is Action.UPDATE
    assert write.body is not None
    assert write.body["metadata"]["labels"][REVISION_HASH_LABEL] == "h2"


def test_another_label_is_not_in_place() -> None:
    current = disturbed(wanted(), "h1")
    metadata: dict[str, Any] = current.obj["metadata"]
    labels = {k: v for k, v in metadata["labels"].items() if k != "app"}
    current = Observed.decode(
        orjson.dumps({**current.obj, "metadata": {**metadata, "labels": labels}})
    )
    (write,) = run(current, wanted(), UpdateMethod.ROLLING_RECREATE).writes
    assert write.action is Action.RECREATE


def test_on_delete_leaves_a_disturbed_label_alone() -> None:
    assert run(disturbed(wanted(), None), wanted(), UpdateMethod.ON_DELETE).writes == ()
