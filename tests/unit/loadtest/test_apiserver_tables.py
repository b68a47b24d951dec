"""Tables: negotiation, human durations, the JSONPath subset, built-in and CRD printers."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtest.apiserver import tables
from loadtest.apiserver.errors import ApiError
from loadtest.apiserver.printers import human_duration

KUBECTL_GET = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z
CREATED = "2023-11-14T22:08:20Z"  # five minutes before NOW


@pytest.mark.parametrize(
    ("accept", "form"),
    [
        (None, "json"),
        ("", "json"),
        (KUBECTL_GET, "v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "v1beta1"),
        ("application/json, application/json;as=Table;v=v1;g=meta.k8s.io", "json"),
        ("application/vnd.kubernetes.protobuf, */*", "json"),
        ("application/json;as=Table;v=v2;g=meta.k8s.io", None),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", None),
        ("application/yaml", None),
    ],
)
def test_negotiate(accept: str | None, form: str | None) -> None:
    assert tables.negotiate(accept) == form


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (125, "2m5s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (47 * 3600, "47h"),
        (49 * 3600, "2d1h"),
        (8 * 86400, "8d"),
        (800 * 86400, "2y70d"),
        (365 * 86400 * 9, "9y"),
    ],
)
def test_human_duration_matches_apimachinery(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


@given(st.integers(0, 10**10))
def test_human_duration_never_empty_and_starts_with_a_digit(seconds: int) -> None:
    assert human_duration(seconds)[0].isdigit()


CONDITIONS = {
    "status": {
        "conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]
    },
    "spec": {"items": [{"name": "a"}, {"name": "b"}]},
}


@pytest.mark.parametrize(
    ("path", "found"),
    [
        ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
        (".status.conditions[?(@.type=='Synced')].status", ["False"]),
        (".spec.items[*].name", ["a", "b"]),
        (".spec.items[1].name", ["b"]),
        (".spec.items[-1].name", ["b"]),
        (".spec.items[5].name", []),
        ("{.spec.items[0]}", [{"name": "a"}]),
        (".spec.missing.deeper", []),
    ],
)
def test_jsonpath_subset(path: str, found: list[Any]) -> None:
    assert tables.jsonpath(CONDITIONS, path) == found


def test_jsonpath_outside_the_subset_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported JSONPath"):
        tables.parse_jsonpath(".spec..name")


def _cells(group: str, plural: str, obj: dict[str, Any]) -> list[Any]:
    printer = tables.builtin_printer(group, plural)
    cells = printer.cells(obj, NOW)
    assert len(cells) == len(printer.columns)
    return cells


def meta(name: str = "x", **more: Any) -> dict[str, Any]:
    return {"name": name, "creationTimestamp": CREATED, **more}


def test_builtin_rows() -> None:
    pod = {
        "metadata": meta("p"),
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.5",
            "containerStatuses": [
                {"ready": True, "restartCount": 2, "state": {"running": {}}},
                {"ready": False, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoop"}}},
            ],
        },
    }
    assert _cells("", "pods", pod) == [
        "p", "1/2", "CrashLoop", "3", "5m", "10.0.0.5", "n1", "<none>", "<none>",
    ]  # fmt: skip
    svc = {
        "metadata": meta("s"),
        "spec": {
            "type": "NodePort",
            "clusterIP": "10.96.0.9",
            "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}],
            "selector": {"b": "2", "a": "1"},
        },
    }
    assert _cells("", "services", svc) == [
        "s", "NodePort", "10.96.0.9", "<none>", "80:30080/TCP,53/UDP", "5m", "a=1,b=2",
    ]  # fmt: skip
    deploy = {
        "metadata": meta("d"),
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "d"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
            },
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3},
    }
    assert _cells("apps", "deployments", deploy) == [
        "d", "2/3", 3, 0, "5m", "c", "nginx", "app=d,tier in (a,b)",
    ]  # fmt: skip
    secret = {"metadata": meta("s"), "type": "Opaque", "data": {"a": "", "b": ""}}
    assert _cells("", "secrets", secret) == ["s", "Opaque", 2, "5m"]
    cm = {"metadata": meta("c"), "data": {"a": "1"}, "binaryData": {"b": ""}}
    assert _cells("", "configmaps", cm) == ["c", 2, "5m"]
    assert _cells("", "namespaces", {"metadata": meta(), "status": {"phase": "Active"}}) == [
        "x", "Active", "5m",
    ]  # fmt: skip
    lease = {"metadata": meta(), "spec": {"holderIdentity": "me"}}
    assert _cells("coordination.k8s.io", "leases", lease) == ["x", "me", "5m"]
    assert _cells("apiextensions.k8s.io", "customresourcedefinitions", {"metadata": meta()}) == [
        "x", CREATED,
    ]  # fmt: skip
    assert _cells("batch", "jobs", {"metadata": meta()}) == ["x", "5m"]


def test_event_rows() -> None:
    event = {
        "metadata": meta("e"),
        "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
        "reason": "Pulled",
        "message": " done \n",
        "type": "Normal",
        "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": CREATED,
        "lastTimestamp": "2023-11-14T22:13:00Z",
        "count": 4,
    }
    assert _cells("", "events", event) == [
        "20s", "Normal", "Pulled", "pod/p", "spec.containers{c}", "kubelet, n1", "done", "5m",
        4, "e",
    ]  # fmt: skip
    series = {**event, "series": {"count": 9, "lastObservedTime": "2023-11-14T22:13:10.000000Z"}}
    assert _cells("", "events", series)[0] == "10s"
    assert _cells("", "events", series)[8] == 9


def test_crd_printer_columns() -> None:
    version = {
        "name": "v1",
        "additionalPrinterColumns": [
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Ready", "type": "string", "jsonPath": '.status.c[?(@.t=="R")].s'},
            {"name": "Tags", "type": "string", "jsonPath": ".spec.tags", "priority": 1},
            {"name": "Ok", "type": "boolean", "jsonPath": ".spec.size"},
            {"name": "Born", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
    }
    printer = tables.crd_printer(version)
    assert [c.name for c in printer.columns] == ["Name", "Size", "Ready", "Tags", "Ok", "Born"]
    assert printer.columns[3].priority == 1
    obj = {
        "metadata": meta("w"),
        "spec": {"size": 3.0, "tags": ["a"]},
        "status": {"c": [{"t": "R", "s": "yes"}]},
    }
    assert printer.cells(obj, NOW) == ["w", 3, "yes", '["a"]', None, "5m"]
    assert printer.cells({"metadata": {"name": "bare"}}, NOW) == ["bare", *[None] * 5]
    default = tables.crd_printer({"name": "v1"})
    assert [c.name for c in default.columns] == ["Name", "Age"]
    assert default.columns[1].type == "date"


@pytest.mark.parametrize(
    ("include", "row_object"),
    [
        ("None", None),
        ("Object", {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}}),
        (
            "Metadata",
            {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "c"},
            },
        ),
    ],
)
def test_table_include_object(include: str, row_object: dict[str, Any] | None) -> None:
    obj = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}}
    body = tables.table(
        tables.builtin_printer("", "configmaps"),
        [obj],
        version="v1",
        include=include,
        now=NOW,
        list_meta={"resourceVersion": "7"},
    )
    assert body["kind"] == "Table" and body["apiVersion"] == "meta.k8s.io/v1"
    assert body["metadata"] == {"resourceVersion": "7"}
    assert [c["name"] for c in body["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert body["rows"][0]["cells"] == ["c", 0, "<unknown>"]
    assert body["rows"][0].get("object") == row_object


def test_include_object_is_checked() -> None:
    assert tables.include_object({}) == "Metadata"
    with pytest.raises(ApiError):
        tables.include_object({"includeObject": "All"})


def test_watch_events_become_one_row_tables_with_headers_once() -> None:
    transform = tables.watch_transform(
        tables.builtin_printer("", "configmaps"), version="v1", include="None", now=lambda: NOW
    )
    cm = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": meta("c", resourceVersion="5")}
    first = orjson.loads(transform(orjson.dumps({"type": "ADDED", "object": cm}) + b"\n"))
    assert first["type"] == "ADDED" and first["object"]["kind"] == "Table"
    assert first["object"]["metadata"] == {"resourceVersion": "5"}
    assert [c["name"] for c in first["object"]["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert first["object"]["rows"] == [{"cells": ["c", 0, "5m"]}]
    second = orjson.loads(transform(orjson.dumps({"type": "DELETED", "object": cm}) + b"\n"))
    assert second["object"]["columnDefinitions"] is None
    bookmark = b'{"type":"BOOKMARK","object":{"kind":"ConfigMap"}}\n'
    assert transform(bookmark) == bookmark
