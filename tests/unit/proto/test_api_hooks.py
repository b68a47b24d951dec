"""The CompositeController hook contract: requests, responses, desired-children checks."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from proto.api.controllers import HookVersion, ResponseMode
from proto.api.errors import HookResponseError
from proto.api.hooks import (
    ChildType,
    customize_request,
    decode_customize_response,
    decode_sync_response,
    desired_children,
    sync_request,
)
from proto.api.objectmap import TypeKey
from proto.api.related import RelatedRule
from proto.api.selectors import Selector, from_match_labels, parse

LOOSE, STRICT = ResponseMode.LOOSE, ResponseMode.STRICT


def cm(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def body(value: Any) -> bytes:
    return orjson.dumps(value)


# --- requests ---------------------------------------------------------------------------------


def test_sync_request_fields() -> None:
    controller, parent = {"kind": "CompositeController"}, {"kind": "Thing"}
    request = sync_request(
        controller=controller,
        parent=parent,
        children={"ConfigMap.v1": {}},
        related={},
        finalizing=True,
    )
    assert list(request) == ["controller", "parent", "children", "related", "finalizing"]
    assert request["controller"] is controller and request["parent"] is parent
    assert request["children"] == {"ConfigMap.v1": {}} and request["finalizing"] is True
    assert customize_request(controller=controller, parent=parent) == {
        "controller": controller,
        "parent": parent,
    }


# --- sync responses ---------------------------------------------------------------------------


def test_full_response() -> None:
    response = decode_sync_response(
        body(
            {
                "status": {"replicas": 2, "ratio": 0.5},
                "children": [cm("a"), cm("b", "ns")],
                "resyncAfterSeconds": 1.5,
                "finalized": True,
            }
        ),
        mode=STRICT,
    )
    assert response.status == {"replicas": 2, "ratio": 0.5}
    assert isinstance(response.status["replicas"], int)
    assert [c["metadata"]["name"] for c in response.children] == ["a", "b"]
    assert response.resync_after_seconds == 1.5
    assert response.finalized is True
    assert response.warnings == ()


@pytest.mark.parametrize(
    ("value", "status", "resync"),
    [
        ({}, None, None),
        (
            {"status": None, "children": None, "resyncAfterSeconds": None, "finalized": None},
            None,
            None,
        ),
        ({"status": {}, "resyncAfterSeconds": 0}, {}, None),
        ({"resyncAfterSeconds": -3}, None, None),
        ({"resyncAfterSeconds": 30}, None, 30.0),
    ],
)
def test_absent_and_null(value: dict[str, Any], status: Any, resync: float | None) -> None:
    response = decode_sync_response(body(value), mode=STRICT)
    assert response.status == status
    assert response.children == ()
    assert response.resync_after_seconds == resync
    assert response.finalized is False


def test_strict_rejects_what_loose_reports() -> None:
    raw = b'{"Status": {"ready": true}, "children": [], "children": [], "extra": 1}'
    loose = decode_sync_response(raw, mode=LOOSE)
    assert loose.status is None  # "Status" is not "status": decoding is case-sensitive
    assert loose.warnings == (
        'duplicate field "children"',
        'unknown field "Status"',
        'unknown field "extra"',
    )
    with pytest.raises(HookResponseError) as info:
        decode_sync_response(raw, mode=STRICT)
    assert str(info.value) == (
        'strict decoding of the response failed: duplicate field "children"; '
        'unknown field "Status"; unknown field "extra"'
    )


def test_duplicates_inside_children_are_tolerated_even_in_strict_mode() -> None:
    raw = (
        b'{"children": [{"apiVersion": "v1", "kind": "ConfigMap", "kind": "ConfigMap",'
        b' "metadata": {"name": "a"}}]}'
    )
    assert decode_sync_response(raw, mode=STRICT).children[0]["kind"] == "ConfigMap"


MALFORMED = [
    (b"not json", "response is not valid JSON"),
    (b"[]", "response must be a JSON object, not array"),
    (b"null", "response must be a JSON object, not null"),
    (body({"status": []}), "status: must be an object, not array"),
    (body({"status": "ok"}), "status: must be an object, not string"),
    (body({"children": {}}), "children: must be an array, not object"),
    (body({"children": [None]}), "children[0]: a child must be an object, not null"),
    (body({"children": [cm("a"), "b"]}), "children[1]: a child must be an object, not string"),
    (
        body({"children": [{"kind": "ConfigMap", "metadata": {"name": "a"}}]}),
        "children[0].apiVersion: required",
    ),
    (
        body({"children": [{**cm("a"), "apiVersion": ""}]}),
        "children[0].apiVersion: must not be empty",
    ),
    (body({"children": [{**cm("a"), "kind": None}]}), "children[0].kind: required"),
    (
        body({"children": [{**cm("a"), "kind": 3}]}),
        "children[0].kind: must be a string, not number",
    ),
    (
        body({"children": [{"apiVersion": "v1", "kind": "ConfigMap"}]}),
        "children[0].metadata: required",
    ),
    (body({"children": [{**cm("a"), "metadata": []}]}), "children[0].metadata: must be an object"),
    (body({"children": [{**cm("a"), "metadata": {}}]}), "children[0].metadata.name: required"),
    (body({"children": [{**cm("a"), "metadata": {"name": 5}}]}), "metadata.name: must be a string"),
    (
        body({"children": [{**cm("a"), "metadata": {"name": "a", "namespace": 1}}]}),
        "metadata.namespace: must be a string",
    ),
    (body({"resyncAfterSeconds": "5"}), "resyncAfterSeconds: must be a number, not string"),
    (body({"resyncAfterSeconds": True}), "resyncAfterSeconds: must be a number, not boolean"),
    (body({"finalized": "true"}), "finalized: must be a boolean, not string"),
]


@pytest.mark.parametrize(("raw", "message"), MALFORMED)
@pytest.mark.parametrize("mode", [LOOSE, STRICT])
def test_malformed_responses(raw: bytes, message: str, mode: ResponseMode) -> None:
    with pytest.raises(HookResponseError) as info:
        decode_sync_response(raw, mode=mode)
    assert message in str(info.value)


# --- desired children -------------------------------------------------------------------------

CONFIGMAPS = ChildType("v1", "ConfigMap", namespaced=True)
NAMESPACES = ChildType("v1", "Namespace", namespaced=False)
SELECTOR = from_match_labels({"app": "web"})


def check(
    children: list[dict[str, Any]],
    *,
    parent_namespace: str = "ns",
    selector: Selector = SELECTOR,
    generate_selector: bool = False,
) -> list[tuple[str, str, str]]:
    desired = desired_children(
        children,
        parent_namespace=parent_namespace,
        parent_uid="uid-1",
        child_types=[CONFIGMAPS, NAMESPACES],
        selector=selector,
        generate_selector=generate_selector,
    )
    return [(d.type.kind, d.namespace, d.name) for d in desired]


def test_namespace_defaulting_and_order() -> None:
    children = [cm("b", app="web"), cm("a", "ns", app="web")]
    desired = desired_children(
        children,
        parent_namespace="ns",
        parent_uid="u",
        child_types=[CONFIGMAPS],
        selector=SELECTOR,
        generate_selector=False,
    )
    assert [(d.name, d.namespace) for d in desired] == [("b", "ns"), ("a", "ns")]
    assert children[0]["metadata"]["namespace"] == "ns"  # normalized in place
    assert desired[0].object is children[0]
    assert desired[0].type == TypeKey("v1", "ConfigMap")


def test_cluster_scoped_child_types() -> None:
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "n1", "labels": {"app": "web"}},
    }
    assert check([namespace]) == [("Namespace", "", "n1")]
    assert "namespace" not in namespace["metadata"]


def test_cluster_scoped_parent() -> None:
    assert check([cm("a", "x", app="web"), cm("a", "y", app="web")], parent_namespace="") == [
        ("ConfigMap", "x", "a"),
        ("ConfigMap", "y", "a"),
    ]


def test_generate_selector_adds_controller_uid() -> None:
    selector = from_match_labels({"controller-uid": "uid-1"})
    children = [cm("a"), cm("b", **{"controller-uid": "uid-1", "x": "y"})]
    assert check(children, selector=selector, generate_selector=True) == [
        ("ConfigMap", "ns", "a"),
        ("ConfigMap", "ns", "b"),
    ]
    assert children[0]["metadata"]["labels"] == {"controller-uid": "uid-1"}
    assert children[1]["metadata"]["labels"] == {"controller-uid": "uid-1", "x": "y"}


INVALID_CHILDREN = [
    (
        [{**cm("s", app="web"), "kind": "Secret"}],
        {},
        "desired child Secret s has type Secret.v1, which is not one of the controller's "
        "childResources (ConfigMap.v1, Namespace.v1)",
    ),
    ([{**cm("s", app="web"), "apiVersion": "v2"}], {}, "has type ConfigMap.v2, which is not one"),
    (
        [cm("a", "other", app="web")],
        {},
        "desired child ConfigMap other/a is not in the parent's namespace ns",
    ),
    (
        [cm("a", app="web")],
        {"parent_namespace": ""},
        "desired child ConfigMap a needs metadata.namespace",
    ),
    ([cm("a", app="db")], {}, "labels on desired child ConfigMap ns/a don't match parent selector"),
    ([cm("a")], {}, "labels on desired child ConfigMap ns/a don't match parent selector"),
    (
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}],
        {},
        "labels on desired child Namespace /n don't match parent selector",
    ),
    (
        [cm("a", **{"controller-uid": "someone-else"})],
        {"selector": from_match_labels({"controller-uid": "uid-1"}), "generate_selector": True},
        "labels on desired child ConfigMap ns/a don't match parent selector",
    ),
    (
        [cm("a", app="web"), cm("b", app="web"), cm("a", "ns", app="web")],
        {},
        "duplicate desired child ConfigMap ns/a (ConfigMap.v1)",
    ),
    (
        [{**cm("a"), "metadata": {"name": "a", "labels": ["app"]}}],
        {},
        "invalid labels on desired child ConfigMap ns/a: must be an object, not array",
    ),
    (
        [{**cm("a"), "metadata": {"name": "a", "labels": {"app": 1}}}],
        {},
        "invalid labels on desired child ConfigMap ns/a: label 'app' must be a string",
    ),
]


@pytest.mark.parametrize(("children", "options", "message"), INVALID_CHILDREN)
def test_invalid_children(
    children: list[dict[str, Any]], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(HookResponseError) as info:
        check(children, **options)
    assert message in str(info.value)


def test_decoded_then_checked() -> None:
    raw = json.dumps({"children": [cm("x", app="web")], "status": None}).encode()
    response = decode_sync_response(raw, mode=LOOSE)
    assert check(list(response.children)) == [("ConfigMap", "ns", "x")]


# --- customize responses ----------------------------------------------------------------------


def customize(
    value: Any,
    *,
    mode: ResponseMode = STRICT,
    version: HookVersion = HookVersion.V2,
    parent_namespace: str = "ns",
) -> tuple[RelatedRule, ...]:
    return decode_customize_response(
        body(value), mode=mode, version=version, parent_namespace=parent_namespace
    ).related_rules


def test_customize_rules() -> None:
    rules = customize(
        {
            "relatedResources": [
                {
                    "apiVersion": "v1",
                    "resource": "configmaps",
                    "namespace": "global",
                    "names": ["a"],
                },
                {"apiVersion": "v1", "resource": "namespaces", "labelSelector": {}},
                {
                    "apiVersion": "v1",
                    "resource": "secrets",
                    "namespace": "ns",
                    "labelSelector": {"matchLabels": {"k": "v"}},
                },
                {
                    "apiVersion": "v1",
                    "resource": "pods",
                    "namespaceSelector": {"matchLabels": {"team": "a"}},
                },
            ]
        }
    )
    assert rules[0] == RelatedRule("v1", "configmaps", namespace="global", names=frozenset({"a"}))
    assert rules[1].label_selector == Selector.everything()
    assert rules[2].namespace == "ns" and rules[2].label_selector == parse("k=v")
    assert rules[3].namespace_selector == parse("team=a")
    assert customize({}) == () and customize({"relatedResources": None}) == ()


def test_customize_strict_and_loose() -> None:
    value = {"relatedResources": [{"apiVersion": "v1", "resource": "pods", "labelSelectr": {}}]}
    with pytest.raises(
        HookResponseError, match=r'unknown field "relatedResources\[0\].labelSelectr"'
    ):
        customize(value)
    response = decode_customize_response(
        body(value), mode=LOOSE, version=HookVersion.V1, parent_namespace=""
    )
    assert response.warnings == ('unknown field "relatedResources[0].labelSelectr"',)
    assert response.related_rules == (RelatedRule("v1", "pods"),)


CUSTOMIZE_INVALID = [
    ({"relatedResources": {}}, {}, "relatedResources: must be an array, not object"),
    ({"relatedResources": [None]}, {}, "relatedResources[0]: must be an object, not null"),
    ({"relatedResources": [{"resource": "pods"}]}, {}, "relatedResources[0].apiVersion: required"),
    ({"relatedResources": [{"apiVersion": "v1"}]}, {}, "relatedResources[0].resource: required"),
    (
        {
            "relatedResources": [
                {"apiVersion": "v1", "resource": "pods", "names": ["a"], "labelSelector": {}}
            ]
        },
        {},
        "relatedResources[0]: names cannot be combined with labelSelector",
    ),
    (
        {
            "relatedResources": [
                {"apiVersion": "v1", "resource": "pods", "names": ["a"], "namespaceSelector": {}}
            ]
        },
        {},
        "names cannot be combined with namespaceSelector",
    ),
    (
        {
            "relatedResources": [
                {"apiVersion": "v1", "resource": "pods", "namespace": "x", "namespaceSelector": {}}
            ]
        },
        {},
        "namespace cannot be combined with namespaceSelector",
    ),
    (
        {"relatedResources": [{"apiVersion": "v1", "resource": "pods", "names": "a"}]},
        {},
        "relatedResources[0].names: must be an array",
    ),
    (
        {"relatedResources": [{"apiVersion": "v1", "resource": "pods", "names": [1]}]},
        {},
        "relatedResources[0].names[0]: must be a string, not number",
    ),
    (
        {
            "relatedResources": [
                {
                    "apiVersion": "v1",
                    "resource": "pods",
                    "labelSelector": {"matchLabels": {"-": "x"}},
                }
            ]
        },
        {},
        "relatedResources[0].labelSelector: key: Invalid value",
    ),
    (
        {"relatedResources": [{"apiVersion": "v1", "resource": "pods", "namespace": "other"}]},
        {"version": HookVersion.V1},
        "relatedResources[0]: requested related object namespace other differs from parent "
        "object namespace ns (hook version v1)",
    ),
    (
        {"relatedResources": [{"apiVersion": "v1", "resource": "pods", "namespaceSelector": {}}]},
        {"version": HookVersion.V1},
        "relatedResources[0]: namespaceSelector needs hook version v2 for a namespaced parent",
    ),
]


@pytest.mark.parametrize(("value", "options", "message"), CUSTOMIZE_INVALID)
def test_customize_invalid(value: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(HookResponseError) as info:
        customize(value, **options)
    assert message in str(info.value)


def test_v1_rules_allowed_for_cluster_scoped_parent_or_own_namespace() -> None:
    rule = {"apiVersion": "v1", "resource": "pods", "namespace": "other"}
    assert customize({"relatedResources": [rule]}, version=HookVersion.V1, parent_namespace="")
    own = {"apiVersion": "v1", "resource": "pods", "namespace": "ns"}
    assert customize({"relatedResources": [own]}, version=HookVersion.V1)
