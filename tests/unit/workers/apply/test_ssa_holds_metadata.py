"""workers.apply.ssa.holds_metadata: the check that keeps the apply cache from hiding a
metadata edit (which moves no generation)."""

from __future__ import annotations

from typing import Any

import pytest

from workers.apply import ControllerRef
from workers.apply.ssa import apply_body, holds_metadata

OWNER = ControllerRef("x/v1", "Set", "s", "uid")
HASH = "controller-revision-hash"


def body() -> dict[str, Any]:
    desired = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"app": "web", HASH: "h1"},
            "annotations": {"note": "n"},
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    return apply_body(desired, OWNER)


def live(**metadata: Any) -> dict[str, Any]:
    """``body()`` as the server answers it, with ``metadata`` changed (None: removed)."""
    applied = body()
    meta = {**applied["metadata"], "uid": "u", "generation": 1, "resourceVersion": "7"}
    meta["labels"] = {**meta["labels"], "added-by-someone": "x"}
    for key, value in metadata.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    return {**applied, "metadata": meta, "status": {"phase": "Pending"}}


@pytest.mark.parametrize(
    ("why", "observed", "held"),
    [
        ("as applied, plus what others added", live(), True),
        ("label removed", live(labels={"app": "web"}), False),
        ("label changed", live(labels={"app": "web", HASH: "h2"}), False),
        ("labels gone", live(labels=None), False),
        ("annotation changed", live(annotations={"note": "other"}), False),
        ("owner reference gone", live(ownerReferences=None), False),
        ("another annotation added", live(annotations={"note": "n", "x": "y"}), True),
    ],
)
def test_holds_metadata(why: str, observed: dict[str, Any], held: bool) -> None:
    assert holds_metadata(observed, body()) is held
