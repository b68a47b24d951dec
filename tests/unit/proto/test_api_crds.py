"""The shipped CRDs: well-formed structural schemas that keep every field users write."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from proto.api import names
from proto.api.crds import load_crds
from proto.api.duration import parse_duration
from proto.api.errors import DurationError
from tests.unit.proto.api_examples import FANOUT

_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def validate(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """What an API server would reject (``invalid: ...``) or prune (``pruned: ...``)."""
    problems: list[str] = []
    expected = schema.get("type")
    if expected is not None:
        python_type = _TYPES[expected]
        if not isinstance(value, python_type) or (
            expected in ("integer", "number") and isinstance(value, bool)
        ):
            return [f"invalid: {path}: must be {expected}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"invalid: {path}: {value!r} not in {schema['enum']}")
    if schema.get("format") == "duration":
        try:
            parse_duration(value)
        except DurationError:
            problems.append(f"invalid: {path}: not a duration")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"invalid: {path}.{key}: required")
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key in properties:
                problems += validate(item, properties[key], f"{path}.{key}")
            elif "additionalProperties" in schema:
                problems += validate(item, schema["additionalProperties"], f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields") and (
                properties or (expected == "object" and path != ".metadata")
            ):
                problems.append(f"pruned: {path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], f"{path}[{i}]")
    return problems


def structural_problems(schema: dict[str, Any], path: str = "") -> list[str]:
    """The structural-schema rules a CRD must follow to be accepted."""
    problems = []
    if "type" not in schema:
        problems.append(f"{path}: no type")
    for key in schema.get("required", []):
        if key not in schema.get("properties", {}):
            problems.append(f"{path}: required {key} is not a property")
    if "default" in schema:
        problems += [f"{path}: default: {p}" for p in validate(schema["default"], schema)]
    for key, sub in schema.get("properties", {}).items():
        problems += structural_problems(sub, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            problems += structural_problems(schema[key], f"{path}.{key}")
    return problems


CRDS = {crd["spec"]["names"]["kind"]: crd for crd in load_crds()}


def schema_of(kind: str) -> dict[str, Any]:
    (version,) = CRDS[kind]["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def test_the_three_crds() -> None:
    assert [c["metadata"]["name"] for c in load_crds()] == [
        "compositecontrollers.metacontroller.k8s.io",
        "controllerrevisions.metacontroller.k8s.io",
        "decoratorcontrollers.metacontroller.k8s.io",
    ]
    expected = {
        "CompositeController": ("Cluster", "compositecontrollers", ["cc", "cctl"]),
        "DecoratorController": ("Cluster", "decoratorcontrollers", ["dec", "decorators"]),
        "ControllerRevision": ("Namespaced", "controllerrevisions", None),
    }
    for kind, (scope, plural, short_names) in expected.items():
        crd = CRDS[kind]
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
        assert crd["kind"] == "CustomResourceDefinition"
        assert crd["metadata"]["name"] == f"{plural}.{names.GROUP}"
        assert crd["metadata"]["annotations"]["api-approved.kubernetes.io"].startswith("unapproved")
        spec = crd["spec"]
        assert spec["group"] == names.GROUP and spec["scope"] == scope
        assert spec["names"]["plural"] == plural
        assert spec["names"]["singular"] == plural[:-1]
        assert spec["names"]["listKind"] == f"{kind}List"
        assert spec["names"].get("shortNames") == short_names
        (version,) = spec["versions"]
        assert version["name"] == names.VERSION and version["served"] and version["storage"]
        assert version["subresources"] == {"status": {}}
        assert structural_problems(version["schema"]["openAPIV3Schema"]) == []


def test_files_are_plain_json_documents() -> None:
    files = [f for f in resources.files("proto.api.crds").iterdir() if f.name.endswith(".json")]
    assert len(files) == 3
    for entry in files:
        text = entry.read_text(encoding="utf-8")
        assert "\t" not in text  # YAML forbids tabs in indentation
        assert json.loads(text)["kind"] == "CustomResourceDefinition"


def test_load_returns_fresh_copies() -> None:
    first = load_crds()
    first[0]["spec"]["scope"] = "changed"
    assert load_crds()[0]["spec"]["scope"] == "Cluster"


def test_fields_match_metacontroller() -> None:
    spec = schema_of("CompositeController")["properties"]["spec"]
    assert set(spec["properties"]) == {
        "parentResource",
        "childResources",
        "hooks",
        "resyncPeriodSeconds",
        "generateSelector",
        "endpointConfigs",
    }
    assert spec["required"] == ["parentResource"]
    hooks = spec["properties"]["hooks"]["properties"]
    assert set(hooks) == {"sync", "finalize", "customize", "preUpdateChild", "postUpdateChild"}
    version = hooks["sync"]["properties"]["version"]
    assert version == {"type": "string", "default": "v1", "enum": ["v1", "v2"]}
    webhook = hooks["sync"]["properties"]["webhook"]["properties"]
    assert {
        "url",
        "timeout",
        "path",
        "service",
        "etag",
        "responseUnMarshallMode",
        "caBundle",
    } <= set(webhook)
    assert webhook["timeout"]["format"] == "duration"
    assert webhook["service"]["required"] == ["name", "namespace"]
    assert webhook["responseUnMarshallMode"]["enum"] == ["loose", "strict"]
    child = spec["properties"]["childResources"]["items"]
    assert child["required"] == ["apiVersion", "resource"]
    method = child["properties"]["updateStrategy"]["properties"]["method"]
    assert method["enum"] == [
        "OnDelete",
        "Recreate",
        "InPlace",
        "RollingRecreate",
        "RollingInPlace",
    ]
    parent = spec["properties"]["parentResource"]
    assert parent["properties"]["labelSelector"]["x-kubernetes-map-type"] == "atomic"
    revision = schema_of("ControllerRevision")
    assert revision["required"] == ["metadata", "parentPatch"]
    assert revision["properties"]["parentPatch"]["x-kubernetes-preserve-unknown-fields"] is True
    assert revision["properties"]["children"]["items"]["required"] == ["apiGroup", "kind", "names"]
    decorator = schema_of("DecoratorController")["properties"]["spec"]
    assert decorator["required"] == ["resources"]
    assert set(decorator["properties"]["hooks"]["properties"]) == {"sync", "finalize", "customize"}


RICH_COMPOSITE: dict[str, Any] = {
    "apiVersion": "metacontroller.k8s.io/v1alpha1",
    "kind": "CompositeController",
    "metadata": {"name": "catset-controller", "labels": {"a": "b"}},
    "spec": {
        "parentResource": {
            "apiVersion": "ctl.enisoc.com/v1",
            "resource": "catsets",
            "revisionHistory": {"fieldPaths": ["spec.template"]},
            "labelSelector": {
                "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]
            },
            "ignoreStatusChanges": True,
        },
        "childResources": [
            {
                "apiVersion": "v1",
                "resource": "pods",
                "updateStrategy": {
                    "method": "RollingRecreate",
                    "statusChecks": {"conditions": [{"type": "Ready", "status": "True"}]},
                },
            },
            {"apiVersion": "v1", "resource": "persistentvolumeclaims"},
        ],
        "resyncPeriodSeconds": 30,
        "generateSelector": False,
        "hooks": {
            "sync": {
                "version": "v2",
                "webhook": {
                    "service": {
                        "name": "catset",
                        "namespace": "metacontroller",
                        "port": 8443,
                        "protocol": "https",
                    },
                    "path": "/sync",
                    "timeout": "1m30s",
                    "responseUnMarshallMode": "loose",
                    "etag": {"enabled": True, "cacheTimeoutSeconds": 60, "cacheCleanupSeconds": 30},
                    "caBundle": {
                        "configMapRef": {
                            "name": "ca",
                            "namespace": "metacontroller",
                            "key": "ca.crt",
                        }
                    },
                    "clientTLS": {"secretRef": {"name": "tls", "namespace": "metacontroller"}},
                    "authorization": {
                        "type": "Bearer",
                        "secretRef": {"name": "t", "namespace": "m", "key": "token"},
                    },
                },
            },
            "finalize": {"webhook": {"url": "http://catset.metacontroller/finalize"}},
            "customize": {"webhook": {"url": "http://catset.metacontroller/customize"}},
        },
        "endpointConfigs": [
            {
                "host": "catset.metacontroller:8443",
                "basicAuth": {"secretRef": {"name": "b", "namespace": "m"}, "usernameKey": "u"},
            }
        ],
    },
}

DECORATOR: dict[str, Any] = {
    "apiVersion": "metacontroller.k8s.io/v1alpha1",
    "kind": "DecoratorController",
    "metadata": {"name": "service-per-pod"},
    "spec": {
        "resources": [
            {
                "apiVersion": "apps/v1",
                "resource": "statefulsets",
                "annotationSelector": {
                    "matchExpressions": [{"key": "service-per-pod-label", "operator": "Exists"}]
                },
                "labelSelector": {"matchLabels": {"app": "x"}},
            }
        ],
        "attachments": [
            {"apiVersion": "v1", "resource": "services", "updateStrategy": {"method": "InPlace"}}
        ],
        "resyncPeriodSeconds": 60,
        "hooks": {
            "sync": {
                "webhook": {"url": "http://service-per-pod.metacontroller/sync-service-per-pod"}
            }
        },
    },
}

REVISION: dict[str, Any] = {
    "apiVersion": "metacontroller.k8s.io/v1alpha1",
    "kind": "ControllerRevision",
    "metadata": {
        "name": "catsets.ctl.enisoc.com-5463ba99b804a121d35d14a5ab74546d1e8ba953",
        "namespace": "default",
    },
    "parentPatch": {"spec": {"template": {"anything": ["goes", {"here": 1}]}}},
    "children": [{"apiGroup": "", "kind": "Pod", "names": ["nginx-backend-0"]}],
}


@pytest.mark.parametrize(
    ("kind", "obj"),
    [
        ("CompositeController", FANOUT),
        ("CompositeController", RICH_COMPOSITE),
        ("DecoratorController", DECORATOR),
        ("ControllerRevision", REVISION),
    ],
)
def test_accepts_and_keeps_every_field(kind: str, obj: dict[str, Any]) -> None:
    assert validate(obj, schema_of(kind)) == []


@pytest.mark.parametrize(
    ("kind", "obj", "problem"),
    [
        (
            "CompositeController",
            {**FANOUT, "spec": {**FANOUT["spec"], "parentResource": None}},
            "invalid: .spec.parentResource: must be object",
        ),
        (
            "CompositeController",
            {**FANOUT, "spec": {"hooks": {}}},
            "invalid: .spec.parentResource: required",
        ),
        (
            "CompositeController",
            {
                **FANOUT,
                "spec": {
                    **FANOUT["spec"],
                    "childResources": [
                        {
                            "apiVersion": "v1",
                            "resource": "x",
                            "updateStrategy": {"method": "Sometimes"},
                        }
                    ],
                },
            },
            "not in",
        ),
        (
            "CompositeController",
            {
                **FANOUT,
                "spec": {
                    **FANOUT["spec"],
                    "hooks": {"sync": {"webhook": {"url": "u", "timeout": "10"}}},
                },
            },
            "not a duration",
        ),
        (
            "CompositeController",
            {**FANOUT, "spec": {**FANOUT["spec"], "typo": 1}},
            "pruned: .spec.typo",
        ),
        (
            "ControllerRevision",
            {**REVISION, "parentPatch": None},
            "invalid: .parentPatch: must be object",
        ),
    ],
)
def test_validator_sees_bad_objects(kind: str, obj: dict[str, Any], problem: str) -> None:
    assert any(problem in p for p in validate(obj, schema_of(kind)))
