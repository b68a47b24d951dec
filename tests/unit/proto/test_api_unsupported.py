"""proto.api.unsupported: every field metashard accepts but does not act on is found."""

from __future__ import annotations

from typing import Any

import pytest

from proto.api.unsupported import FIELDS, unsupported

HOOK = {"webhook": {"url": "http://h/sync"}}


def composite(**spec: Any) -> dict[str, Any]:
    return {
        "kind": "CompositeController",
        "spec": {
            "parentResource": {"apiVersion": "x/v1", "resource": "things"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": HOOK},
            **spec,
        },
    }


def decorator(**spec: Any) -> dict[str, Any]:
    return {
        "kind": "DecoratorController",
        "spec": {
            "resources": [{"apiVersion": "v1", "resource": "pods"}],
            "attachments": [{"apiVersion": "v1", "resource": "services"}],
            "hooks": {"sync": HOOK},
            **spec,
        },
    }


def paths(kind: str, obj: dict[str, Any]) -> list[str]:
    return [f.path for f in unsupported(kind, obj)]


def test_a_plain_controller_has_nothing_unsupported() -> None:
    assert paths("CompositeController", composite()) == []
    assert paths("DecoratorController", decorator()) == []


@pytest.mark.parametrize(
    "setting",
    [
        {"caBundle": {"secretRef": {"name": "s"}}},
        {"clientTLS": {"secretRef": {"name": "s"}}},
        {"authorization": {"credentials": {"secretRef": {"name": "s"}}}},
        {"basicAuth": {"secretRef": {"name": "s"}}},
        {"etag": {"enabled": True}},
    ],
)
@pytest.mark.parametrize(
    ("kind", "make"), [("CompositeController", composite), ("DecoratorController", decorator)]
)
def test_hook_connection_settings_are_acted_on_for_every_kind(
    setting: dict[str, Any], kind: str, make: Any
) -> None:
    hook = {"webhook": {"url": "https://h", **setting}}
    obj = make(hooks={"sync": HOOK, "finalize": hook}, endpointConfigs=[{"host": "h"}])
    assert paths(kind, obj) == []


def test_rolling_methods_and_status_checks_per_kind() -> None:
    strategy = {"method": "RollingInPlace", "statusChecks": {"conditions": [{"type": "Ready"}]}}
    children = [
        {"apiVersion": "v1", "resource": "configmaps"},
        {"apiVersion": "v1", "resource": "secrets", "updateStrategy": strategy},
    ]
    # CompositeControllers roll out; their status checks count only under a rolling method.
    assert paths("CompositeController", composite(childResources=children)) == []
    idle = {"method": "InPlace", "statusChecks": {"conditions": [{"type": "Ready"}]}}
    found = unsupported(
        "CompositeController",
        composite(childResources=[{"apiVersion": "v1", "resource": "x", "updateStrategy": idle}]),
    )
    assert [f.path for f in found] == ["spec.childResources[0].updateStrategy"]
    assert "statusChecks ignored" in found[0].effect
    found = unsupported("DecoratorController", decorator(attachments=children))
    assert [f.path for f in found] == [
        "spec.attachments[1].updateStrategy.method",
        "spec.attachments[1].updateStrategy.statusChecks",
    ]
    assert "nor in Metacontroller" in found[0].effect
    plain = [{"apiVersion": "v1", "resource": "x", "updateStrategy": {"method": "InPlace"}}]
    assert paths("CompositeController", composite(childResources=plain)) == []


def test_dead_composite_hooks_and_revision_history() -> None:
    obj = composite(hooks={"sync": HOOK, "preUpdateChild": HOOK, "postUpdateChild": HOOK})
    obj["spec"]["parentResource"]["revisionHistory"] = {"fieldPaths": ["spec"]}
    assert paths("CompositeController", obj) == [
        "spec.hooks.preUpdateChild",
        "spec.hooks.postUpdateChild",
    ]


def test_every_row_is_worded_and_names_a_kind() -> None:
    for field in FIELDS:
        assert field.kinds and field.effect and field.path.startswith("spec.")
