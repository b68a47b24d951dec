"""workers.sync.ssa_writes's pure parts, and the worker's wiring of its cache to revoked slots
(the writes themselves run against a cluster: tests/integration/test_ssa_children.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs

from proto.kube.errors import Conflict
from proto.wire import ControllerDef, ControllerKind, ParentKey
from workers.apply.cache import Version
from workers.sync.children import ChildTypes, DynamicApplier
from workers.sync.ssa_writes import (
    FORCE_ANNOTATION,
    ServerSideApply,
    applier_of,
    apply_force,
    conflict_message,
)
from workers.worker import WorkerCaches

A = ParentKey("CompositeController", "c", "things.x", "ns", "a")
B = ParentKey("CompositeController", "c", "things.x", "ns", "b")
V = Version("u", 1, "1")


@pytest.mark.parametrize(
    ("annotations", "force"),
    [
        (None, True),
        ({}, True),
        ({FORCE_ANNOTATION: "true"}, True),
        ({FORCE_ANNOTATION: "false"}, False),
        ({FORCE_ANNOTATION: "no"}, True),
    ],
)
def test_apply_force_from_the_controller_annotation(
    annotations: dict[str, str] | None, force: bool
) -> None:
    metadata: dict[str, Any] = {"name": "c"}
    if annotations is not None:
        metadata["annotations"] = annotations
    assert apply_force({"metadata": metadata}) is force


def test_a_conflict_names_each_field_and_manager() -> None:
    err = Conflict(
        409,
        {
            "reason": "Conflict",
            "message": "Apply failed with 2 conflicts",
            "details": {
                "causes": [
                    {
                        "reason": "FieldManagerConflict",
                        "message": 'conflict with "b"',
                        "field": ".data.x",
                    },
                    {
                        "reason": "FieldManagerConflict",
                        "message": 'conflict with "c" using v1',
                        "field": ".data.y",
                    },
                ]
            },
        },
    )
    assert conflict_message("ConfigMap ns/x", err) == (
        "apply of ConfigMap ns/x conflicts with another field manager: "
        '.data.x (conflict with "b"); .data.y (conflict with "c" using v1)'
    )


class _Hooks:
    def __init__(self) -> None:
        self.dropped: list[Callable[[Any], bool]] = []

    def drop_cached(self, predicate: Callable[[Any], bool]) -> None:
        self.dropped.append(predicate)


def test_keys_the_runner_drops_leave_the_apply_cache_too() -> None:
    ssa = ServerSideApply(None, field_manager="m", events=None)  # type: ignore[arg-type]
    for key in (A, B):
        ssa.cache.record(key, "child", V, "h")
    hooks = _Hooks()
    revoked: Callable[[ParentKey], bool] = lambda key: key.name == "a"  # noqa: E731
    WorkerCaches(hooks, ssa).discard(revoked)  # type: ignore[arg-type]
    assert hooks.dropped == [revoked]
    assert not ssa.cache.fresh(A, "child", V, "h")
    assert ssa.cache.fresh(B, "child", V, "h")
    WorkerCaches(hooks, None).discard(revoked)  # type: ignore[arg-type]  # dynamic apply
    assert len(hooks.dropped) == 2


def test_the_force_annotation_under_dynamic_apply_is_a_warning() -> None:
    controller = {"metadata": {"name": "c", "annotations": {FORCE_ANNOTATION: "false"}}}
    definition = ControllerDef(
        kind=ControllerKind.COMPOSITE,
        name="c",
        uid="u",
        resource_version="1",
        object=orjson.dumps(controller),
        resources=(),
    )
    with capture_logs() as logs:
        types = ChildTypes({}, {}, ())
        applier = applier_of(None, definition, types, writer=None)  # type: ignore[arg-type]
        assert isinstance(applier, DynamicApplier)
    assert [(e["log_level"], e["event"]) for e in logs] == [
        ("warning", "the apply-force annotation has no effect under dynamic-apply")
    ]
