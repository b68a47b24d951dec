"""Built-in specs: typed decoding (Go's wording) and the 422 rules controllers run into."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtest.apiserver import spec_decode, validation_builtin
from loadtest.apiserver.registry import DecodeError


def deployment(**pod_spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec},
        },
    }


GOOD_CONTAINER = {"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}


@pytest.mark.parametrize(
    ("kind", "obj", "message"),
    [
        (
            "Pod",
            {"spec": {"containers": "nginx"}},
            "json: cannot unmarshal string into Go struct field PodSpec.spec.containers "
            "of type []v1.Container",
        ),
        (
            "Pod",
            {"spec": {"containers": ["nginx"]}},
            "json: cannot unmarshal string into Go struct field PodSpec.spec.containers "
            "of type v1.Container",
        ),
        (
            "Deployment",
            deployment(
                containers=[{"name": "a", "image": "b", "ports": [{"containerPort": "80"}]}]
            ),
            "json: cannot unmarshal string into Go struct field "
            "ContainerPort.spec.template.spec.containers.ports.containerPort of type int32",
        ),
        (
            "Deployment",
            {"spec": {"replicas": "3"}},
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas "
            "of type int32",
        ),
        (
            "Service",
            {"spec": {"selector": {"app": 1}}},
            "json: cannot unmarshal number into Go struct field ServiceSpec.spec.selector "
            "of type string",
        ),
        (
            "Pod",
            {"spec": {"volumes": [{"name": "v", "emptyDir": []}]}},
            "json: cannot unmarshal array into Go struct field VolumeSource.spec.volumes.emptyDir "
            "of type v1.EmptyDirVolumeSource",
        ),
    ],
)
def test_wrong_types_are_refused_with_gos_wording(
    kind: str, obj: dict[str, Any], message: str
) -> None:
    with pytest.raises(DecodeError) as caught:
        spec_decode.decode_spec(kind, obj)
    assert str(caught.value) == message


def test_unknown_fields_are_pruned_and_reported_with_their_paths() -> None:
    obj = deployment(
        containers=[{"name": "web", "image": "nginx", "imagePullPolcy": "Always", "tty": None}],
        restartPolicy="Always",
        bogus=1,
    )
    obj["spec"]["replicas"] = 2.0
    unknown = spec_decode.decode_spec("Deployment", obj)
    assert unknown == [
        "spec.template.spec.containers[0].imagePullPolcy",
        "spec.template.spec.bogus",
    ]
    assert obj["spec"]["template"]["spec"] == {
        "containers": [{"name": "web", "image": "nginx"}],
        "restartPolicy": "Always",
    }
    assert obj["spec"]["replicas"] == 2 and isinstance(obj["spec"]["replicas"], int)


def test_kinds_outside_the_list_are_left_alone() -> None:
    obj = {"spec": {"anything": [1, "x"]}}
    assert spec_decode.decode_spec("Widget", obj) == []
    assert obj == {"spec": {"anything": [1, "x"]}}


container = st.fixed_dictionaries(
    {"name": st.from_regex(r"[a-z]{1,8}", fullmatch=True), "image": st.just("nginx")},
    optional={
        "args": st.lists(st.text(max_size=5), max_size=2),
        "ports": st.lists(st.fixed_dictionaries({"containerPort": st.integers(1, 65535)})),
        "resources": st.fixed_dictionaries({"limits": st.fixed_dictionaries({"cpu": st.just(1)})}),
    },
)


@given(st.lists(container, min_size=1, max_size=3))
def test_well_typed_pods_decode_unchanged(containers: list[dict[str, Any]]) -> None:
    obj = {"spec": {"containers": containers, "restartPolicy": "Never"}}
    before = copy.deepcopy(obj)
    assert spec_decode.decode_spec("Pod", obj) == []
    assert obj == before


def messages(kind: str, obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in validation_builtin.validate(kind, obj, None)]


def test_a_good_deployment_and_service_pass() -> None:
    assert messages("Deployment", deployment(containers=[GOOD_CONTAINER])) == []
    service = {"spec": {"ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}}
    assert messages("Service", service) == []


LABEL_ERROR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


@pytest.mark.parametrize(
    ("kind", "obj", "expected"),
    [
        ("Pod", {"spec": {}}, ["spec.containers: Required value"]),
        ("Deployment", {"spec": {}}, ["spec.template.spec.containers: Required value"]),
        (
            "Deployment",
            deployment(containers=[{}]),
            [
                "spec.template.spec.containers[0].name: Required value",
                "spec.template.spec.containers[0].image: Required value",
            ],
        ),
        (
            "Pod",
            {"spec": {"containers": [{"name": "Web_1", "image": "x"}]}},
            [f'spec.containers[0].name: Invalid value: "Web_1": {LABEL_ERROR}'],
        ),
        (
            "Pod",
            {
                "spec": {
                    "initContainers": [{"name": "a", "image": "x"}],
                    "containers": [{"name": "a", "image": "x"}],
                }
            },
            ['spec.containers[0].name: Duplicate value: "a"'],
        ),
        (
            "Pod",
            {
                "spec": {
                    "containers": [
                        {
                            "name": "a",
                            "image": "x",
                            "ports": [{"containerPort": 0}, {"containerPort": 70000}],
                            "env": [{"value": "v"}],
                            "imagePullPolicy": "always",
                        }
                    ],
                    "restartPolicy": "Sometimes",
                }
            },
            [
                "spec.containers[0].ports[0].containerPort: Required value",
                "spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be "
                "between 1 and 65535, inclusive",
                "spec.containers[0].env[0].name: Required value",
                'spec.containers[0].imagePullPolicy: Unsupported value: "always": supported '
                'values: "Always", "IfNotPresent", "Never"',
                'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
                '"Always", "OnFailure", "Never"',
            ],
        ),
        (
            "CronJob",
            {
                "spec": {
                    "jobTemplate": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "volumes": [{"name": "data"}],
                                    "containers": [
                                        {
                                            "name": "a",
                                            "image": "x",
                                            "volumeMounts": [{"name": "dta", "mountPath": "/d"}],
                                        }
                                    ],
                                }
                            }
                        }
                    }
                }
            },
            [
                "spec.jobTemplate.spec.template.spec.containers[0].volumeMounts[0].name: "
                'Not found: "dta"'
            ],
        ),
        (
            "Service",
            {
                "spec": {
                    "type": "ClusterIP",
                    "ports": [
                        {"port": 0, "protocol": "tcp"},
                        {"name": "b", "port": 80, "targetPort": 70000, "nodePort": 30000},
                    ],
                }
            },
            [
                "spec.ports[0].name: Required value",
                "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                'spec.ports[0].protocol: Unsupported value: "tcp": supported values: "SCTP", '
                '"TCP", "UDP"',
                "spec.ports[1].targetPort: Invalid value: 70000: must be between 1 and 65535, "
                "inclusive",
                "spec.ports[1].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
            ],
        ),
        (
            "Service",
            {
                "spec": {
                    "type": "Public",
                    "ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}],
                }
            },
            [
                'spec.type: Unsupported value: "Public": supported values: "ClusterIP", '
                '"ExternalName", "LoadBalancer", "NodePort"',
                'spec.ports[1].name: Duplicate value: "a"',
            ],
        ),
    ],
)
def test_rules_and_their_wording(kind: str, obj: dict[str, Any], expected: list[str]) -> None:
    assert messages(kind, obj) == expected
