"""proto.api.decorator: DecoratorController objects and the decorator hook contract."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from proto.api.controllers import ResponseMode, UpdateMethod
from proto.api.decorator import decode_decorator_response, parse_decorator_controller
from proto.api.errors import HookResponseError, InvalidControllerError


def dc(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "DecoratorController",
        "metadata": {"name": "dc", "uid": "u"},
        "spec": {
            "resources": [{"apiVersion": "v1", "resource": "pods"}],
            "hooks": {"sync": {"webhook": {"url": "http://h/sync"}}},
            **spec,
        },
    }


def test_defaults_and_selectors() -> None:
    spec = parse_decorator_controller(
        dc(
            resources=[
                {
                    "apiVersion": "apps/v1",
                    "resource": "statefulsets",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "annotationSelector": {
                        "matchAnnotations": {"service-per-pod-label": "pod-name"},
                        "matchExpressions": [{"key": "ports", "operator": "Exists"}],
                    },
                },
                {"apiVersion": "v1", "resource": "pods"},
            ],
            attachments=[
                {"apiVersion": "v1", "resource": "services"},
                {
                    "apiVersion": "v1",
                    "resource": "configmaps",
                    "updateStrategy": {"method": "RollingInPlace"},
                },
            ],
            resyncPeriodSeconds=0,
        )
    )
    assert spec.finalizer == "metacontroller.io/decoratorcontroller-dc"
    assert spec.resync_period_seconds == 1.0  # Metacontroller's floor
    assert [a.update_strategy.method for a in spec.attachments] == [
        UpdateMethod.ON_DELETE,
        UpdateMethod.ROLLING_IN_PLACE,
    ]
    statefulsets, pods = spec.resources
    assert (statefulsets.api_version, statefulsets.resource) == ("apps/v1", "statefulsets")
    labels, annotations = {"app": "web"}, {"service-per-pod-label": "pod-name", "ports": "80"}
    assert statefulsets.matches(labels, annotations)
    assert not statefulsets.matches(labels, {"ports": "80"})
    assert not statefulsets.matches(annotations, labels)  # swapped
    assert not statefulsets.matches(None, None)
    assert pods.matches(None, None)  # no selectors: everything


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"resources": []}, "spec.resources: required"),
        ({"hooks": {}}, "spec.hooks.sync: required (a DecoratorController needs a sync hook)"),
        (
            {
                "resources": [
                    {
                        "apiVersion": "v1",
                        "resource": "pods",
                        "annotationSelector": {"matchAnnotations": {"a": "not a label value"}},
                    }
                ]
            },
            "spec.resources[0].annotationSelector",
        ),
        (
            {
                "attachments": [
                    {"apiVersion": "v1", "resource": "services"},
                    {"apiVersion": "v1", "resource": "services"},
                ]
            },
            "spec.attachments[1]: duplicate attachment resource services",
        ),
        (
            {
                "attachments": [
                    {"apiVersion": "v1", "resource": "x", "updateStrategy": {"method": "Sometimes"}}
                ]
            },
            'unknown update method "Sometimes"',
        ),
    ],
)
def test_invalid_controllers_name_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidControllerError, match=re.escape(message)):
        parse_decorator_controller(dc(**spec))


def test_a_response_with_everything() -> None:
    body = {
        "labels": {"a": "1", "gone": None},
        "annotations": {"b": "2"},
        "status": {"ok": True},
        "attachments": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}],
        "resyncAfterSeconds": 2.5,
    }
    response = decode_decorator_response(orjson.dumps(body), mode=ResponseMode.STRICT)
    assert response.labels == {"a": "1", "gone": None}
    assert response.annotations == {"b": "2"}
    assert response.status == {"ok": True}
    assert [a["metadata"]["name"] for a in response.attachments] == ["s"]
    assert response.resync_after_seconds == 2.5 and response.finalized is False


def test_an_empty_response_changes_nothing() -> None:
    response = decode_decorator_response(b"{}", mode=ResponseMode.STRICT)
    assert (response.labels, response.annotations, response.status) == ({}, {}, None)
    assert response.attachments == () and response.resync_after_seconds is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"labels": {"a": 1}}, "labels.a: must be a string or null, not number"),
        ({"attachments": [None]}, "attachments[0]"),
        ({"attachments": [{"kind": "Service", "metadata": {"name": "s"}}]}, "apiVersion"),
    ],
)
def test_malformed_responses(body: dict[str, Any], message: str) -> None:
    with pytest.raises(HookResponseError, match=re.escape(message)):
        decode_decorator_response(orjson.dumps(body), mode=ResponseMode.LOOSE)


def test_unknown_fields_strict_fails_loose_warns() -> None:
    body = orjson.dumps({"labels": {}, "children": []})
    with pytest.raises(HookResponseError, match="children"):
        decode_decorator_response(body, mode=ResponseMode.STRICT)
    loose = decode_decorator_response(body, mode=ResponseMode.LOOSE)
    assert any("children" in w for w in loose.warnings)
