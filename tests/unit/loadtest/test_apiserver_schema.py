from __future__ import annotations

import re
from typing import Any

import pytest

from loadtest.apiserver import builtins, fields, rules
from loadtest.apiserver.errors import ApiError
from loadtest.apiserver.registry import DecodeError
from loadtest.apiserver.schema import Field, top
from loadtest.apiserver.structural import CustomKind

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name", "protocol"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "protocol": {"type": "string", "default": "TCP"},
                            "port": {"x-kubernetes-int-or-string": True},
                        },
                    },
                },
                "name": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
                "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "nothing": {"type": "string", "nullable": True},
                "embedded": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            },
        }
    },
}
KIND = CustomKind(SCHEMA, kind="Thing", group="example.com")


def errors_of(spec: dict[str, Any]) -> list[str]:
    obj = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec}
    KIND.default(obj, None)
    return [str(e) for e in KIND.validate(obj, None)]


def test_pruning_reports_unknown_paths_and_keeps_preserved_ones() -> None:
    obj = {
        "apiVersion": "x/v1",
        "kind": "Thing",
        "metadata": {"name": "t", "bogus": 1},
        "spec": {"ports": [{"name": "a", "extra": 1}], "embedded": {"kind": "K", "any": {"x": 1}}},
        "status": {"ready": True},
    }
    unknown = KIND.decode(obj)
    assert unknown == ["metadata.bogus", "spec.ports[0].extra", "status"]
    assert obj["spec"] == {
        "ports": [{"name": "a"}],
        "embedded": {"kind": "K", "any": {"x": 1}, "metadata": {}},
    }


def test_defaults_apply_inside_list_items() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "t"}, "spec": {"ports": [{"name": "a"}]}}
    KIND.default(obj, None)
    assert obj["spec"]["ports"] == [{"name": "a", "protocol": "TCP"}]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"name": "a"},
            'spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long',
        ),
        ({"name": "abcde"}, "spec.name: Too long: may not be more than 4 bytes"),
        (
            {"name": "AB"},
            "spec.name: Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'",
        ),
        ({"ratio": 0}, "spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"),
        (
            {"labels": {"a": 1}},
            'spec.labels.a: Invalid value: "integer": '
            'spec.labels.a in body must be of type string: "integer"',
        ),
        (
            {"ports": [{"name": "a", "port": True}]},
            'spec.ports[0].port: Invalid value: "boolean": '
            'spec.ports[0].port in body must be of type integer,string: "boolean"',
        ),
        (
            {"ports": [{"name": "a"}, {"name": "a", "protocol": "TCP"}]},
            'spec.ports[1]: Duplicate value: {"name":"a","protocol":"TCP"}',
        ),
    ],
)
def test_validation_messages(spec: dict[str, Any], expected: str) -> None:
    assert errors_of(spec) == [expected]


def test_valid_values_pass() -> None:
    assert (
        errors_of(
            {"name": "ab", "ratio": 0.5, "nothing": None, "ports": [{"name": "a", "port": "http"}]}
        )
        == []
    )


def test_builtin_struct_decoding_matches_go() -> None:
    kind = rules.CONFIG_MAP
    obj = {"metadata": {"name": "x", "labels": {}}, "data": {"k": "v"}, "dataa": 1}
    assert kind.decode(obj) == ["dataa"]
    assert obj == {"metadata": {"name": "x"}, "data": {"k": "v"}}
    with pytest.raises(
        DecodeError,
        match=r"cannot unmarshal number into Go struct field ConfigMap\.data of type string",
    ):
        kind.decode({"data": {"k": 1}})
    with pytest.raises(
        DecodeError, match=r"Go struct field ObjectMeta\.metadata\.labels of type string"
    ):
        kind.decode({"metadata": {"labels": {"a": True}}})


def test_lease_times_are_parsed_and_rewritten() -> None:
    lease = top("Lease", {"spec": Field(rules.LEASE_SPEC, omitempty=False)})
    obj = {"spec": {"renewTime": "2030-01-01T01:00:00.000000+01:00", "leaseTransitions": 0}}
    lease.decode(obj)
    assert obj["spec"] == {"renewTime": "2030-01-01T00:00:00.000000Z", "leaseTransitions": 0}
    with pytest.raises(DecodeError, match=re.escape('cannot parse "Z" as ".000000"')):
        lease.decode({"spec": {"acquireTime": "2030-01-01T00:00:00Z"}})


def test_field_selectors() -> None:
    registry = {rt.plural + "/" + rt.group: rt for rt in builtins.builtin_types()}
    configmaps, pods = registry["configmaps/"], registry["pods/"]
    terms = fields.parse("metadata.name=a,metadata.namespace!=b", configmaps)
    assert fields.matches(terms, {"metadata": {"name": "a", "namespace": "c"}})
    assert not fields.matches(terms, {"metadata": {"name": "a", "namespace": "b"}})
    phase = fields.parse("status.phase==Running", pods)
    assert fields.matches(phase, {"metadata": {}, "status": {"phase": "Running"}})
    with pytest.raises(ApiError, match=re.escape('"data.k" is not a known field selector')):
        fields.parse("data.k=1", configmaps)
    with pytest.raises(ApiError, match=re.escape("field label not supported: spec.image")):
        fields.parse("spec.image=x", pods)
    with pytest.raises(ApiError, match="can't understand 'oops'"):
        fields.parse("oops", configmaps)
    events = registry["events/events.k8s.io"]
    (term,) = fields.parse("regarding.name=w1", events)
    assert term.field == "involvedObject.name"
