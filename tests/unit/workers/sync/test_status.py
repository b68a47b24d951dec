"""workers.sync.status: the hook's status plus observedGeneration, written only on change."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given

from tests.jsonvalues import json_values
from workers.sync import status


@pytest.mark.parametrize(
    ("hook_status", "generation", "expected"),
    [
        (None, 3, {"observedGeneration": 3}),
        ({}, 3, {"observedGeneration": 3}),
        ({"ready": True}, 1, {"ready": True, "observedGeneration": 1}),
        ({"observedGeneration": 9, "a": 1}, 2, {"observedGeneration": 2, "a": 1}),
        ({"a": 1}, None, {"a": 1, "observedGeneration": 0}),  # GetGeneration of nothing
        ({"a": 1}, True, {"a": 1, "observedGeneration": 0}),
    ],
)
def test_desired(hook_status: dict[str, Any] | None, generation: Any, expected: Any) -> None:
    assert status.desired(hook_status, generation) == expected


def test_desired_does_not_change_the_hook_status() -> None:
    hook_status = {"a": 1}
    status.desired(hook_status, 4)
    assert hook_status == {"a": 1}


@pytest.mark.parametrize(
    ("current", "wanted", "changed"),
    [
        ({"a": 1, "observedGeneration": 1}, {"observedGeneration": 1, "a": 1}, False),
        ({"a": 1, "observedGeneration": 1}, {"a": 2, "observedGeneration": 1}, True),
        ({"a": 3, "observedGeneration": 1}, {"a": 3.0, "observedGeneration": 1}, True),
        ({"a": False, "observedGeneration": 1}, {"a": 0, "observedGeneration": 1}, True),
        ({"observedGeneration": 1}, {"observedGeneration": 2}, True),
        (None, {"observedGeneration": 1}, True),
        ({"a": None, "observedGeneration": 1}, {"observedGeneration": 1}, True),
    ],
)
def test_changed(current: Any, wanted: dict[str, Any], changed: bool) -> None:
    parent: dict[str, Any] = {"metadata": {"name": "p"}}
    if current is not None:
        parent["status"] = current
    assert status.changed(parent, wanted) is changed


@given(json_values())
def test_a_status_written_once_is_unchanged_on_the_next_sync(value: Any) -> None:
    wanted = status.desired({"v": value}, 5)
    written = status.body({"metadata": {"name": "p", "resourceVersion": "3"}}, wanted)
    read_back = orjson.loads(orjson.dumps(written))
    assert not status.changed(read_back, status.desired({"v": value}, 5))


def test_body_replaces_only_the_status_and_keeps_the_resource_version() -> None:
    parent = {"metadata": {"name": "p", "resourceVersion": "3"}, "spec": {"x": 1}, "status": {}}
    body = status.body(parent, {"observedGeneration": 1})
    assert body == {
        "metadata": {"name": "p", "resourceVersion": "3"},
        "spec": {"x": 1},
        "status": {"observedGeneration": 1},
    }
    assert parent["status"] == {}


def test_body_leaves_out_the_managed_fields() -> None:
    managed = [{"manager": "metashard", "operation": "Update", "subresource": "status"}]
    parent = {"metadata": {"name": "p", "resourceVersion": "3", "managedFields": managed}}
    body = status.body(parent, {})
    assert body == {"metadata": {"name": "p", "resourceVersion": "3"}, "status": {}}
    assert parent["metadata"]["managedFields"] == managed
