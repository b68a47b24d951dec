"""The Kubernetes protobuf decoder: bodies recorded from kubectl, wire details, a round trip."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtest.apiserver import protobuf
from loadtest.apiserver.protobuf_schema import MESSAGES, ROOTS
from tests.protobuf_wire import encode, envelope, length_delimited, scalar, varint

# Bodies kubectl v1.37 sent for `kubectl create configmap cm1 --from-literal=a=b
# --from-literal=n=1`, `kubectl create deployment web --image=nginx --replicas=0 --port=80` and
# `kubectl create secret generic s1 --from-literal=p=q`.
KUBECTL_BODIES = [
    (
        "6b3873000a0f0a0276311209436f6e6669674d617012250a130a03636d3112001a0022002a0032003800420012"
        "060a016112016212060a016e1201311a002200",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm1"},
            "data": {"a": "b", "n": "1"},
        },
    ),
    (
        "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412b8010a1f0a0377656212001a0022002a00"
        "3200380042005a0a0a0361707012037765621286010800120c0a0a0a0361707012037765621a6c0a1c0a001200"
        "1a0022002a003200380042005a0a0a036170701203776562124c122e0a056e67696e7812056e67696e782a0032"
        "0a0a001000185022002a0042006a007200800100880100900100a201001a0032004200"
        "4a0052005800600068008201008a01009a0100c2010022020a00280038001a0c080010001800200028003800"
        "1a002200",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "nginx",
                                "image": "nginx",
                                "ports": [{"containerPort": 80}],
                                "resources": {},
                            }
                        ]
                    },
                },
                "strategy": {},
            },
            "status": {},
        },
    ),
    (
        "6b3873000a0c0a0276311206536563726574121e0a120a02733112001a0022002a0032003800420012060a0170"
        "1201711a001a002200",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"p": "cQ=="}},
    ),
]


@pytest.mark.parametrize(("hex_body", "expected"), KUBECTL_BODIES)
def test_kubectl_bodies_decode_to_what_kubectl_sends_as_json(
    hex_body: str, expected: dict[str, Any]
) -> None:
    obj, warnings = protobuf.decode(bytes.fromhex(hex_body))
    assert obj == expected
    assert warnings == []


# --- wire details ---------------------------------------------------------------------------


def test_every_table_parses_and_every_root_exists() -> None:
    for name in MESSAGES:
        assert protobuf.table(name)
    assert set(ROOTS.values()) <= set(MESSAGES)


def test_negative_integers_and_pointer_zeros() -> None:
    spec = scalar(1, "i", -1) + scalar(7, "i", 0) + scalar(5, "i", 0)
    obj = protobuf.message("DeploymentSpec", spec, [])
    # replicas is a pointer (kept), paused and minReadySeconds omitempty (zeros dropped)
    assert obj == {"replicas": -1}
    assert protobuf.message("DeploymentSpec", scalar(1, "i", 0), []) == {"replicas": 0}


def test_packed_and_unpacked_repeated_integers() -> None:
    unpacked = scalar(2, "i", 1) + scalar(2, "i", 2)
    packed = length_delimited(2, varint(3) + varint(4))
    obj = protobuf.message("ContainerRestartRuleOnExitCodes", unpacked + packed, [])
    assert obj == {"values": [1, 2, 3, 4]}


def test_specials_time_quantity_intstr() -> None:
    meta = length_delimited(8, scalar(1, "i", 1_700_000_000))
    assert protobuf.message("ObjectMeta", meta, []) == {"creationTimestamp": "2023-11-14T22:13:20Z"}
    assert protobuf.message("ObjectMeta", length_delimited(8, b""), []) == {}
    micro = length_delimited(3, scalar(1, "i", 0) + scalar(2, "i", 123_456_000))
    assert protobuf.message("LeaseSpec", micro, []) == {
        "acquireTime": "1970-01-01T00:00:00.123456Z"
    }
    port = length_delimited(4, scalar(1, "i", 1) + scalar(3, "s", "http")) + scalar(3, "i", 80)
    assert protobuf.message("ServicePort", port, []) == {"targetPort": "http", "port": 80}
    limits = length_delimited(
        1, scalar(1, "s", "cpu") + length_delimited(2, scalar(1, "s", "500m"))
    )
    assert protobuf.message("ResourceRequirements", limits, []) == {"limits": {"cpu": "500m"}}


def test_inlined_structs_merge_into_their_parent() -> None:
    volume = scalar(1, "s", "data") + length_delimited(
        2, length_delimited(2, b"")
    )  # VolumeSource.emptyDir {}
    assert protobuf.message("Volume", volume, []) == {"name": "data", "emptyDir": {}}


def test_unknown_fields_are_skipped_loudly() -> None:
    warnings: list[str] = []
    obj = protobuf.message("ConfigMap", scalar(99, "s", "x") + scalar(4, "b", 1), warnings)
    assert obj == {"immutable": True}
    assert warnings == ["unknown field number 99 in ConfigMap (not decoded)"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"kind":"ConfigMap"}', "prefix"),
        (protobuf.MAGIC + b"\x0a\x05\x0a", "runs past the end"),
        (protobuf.MAGIC + b"\x12\x02\x08", "runs past the end"),
        (protobuf.MAGIC + b"\x0b", "wire type 3"),
        (envelope("v1", "ConfigMap", b"\x08\xff"), "end of data"),
        (
            envelope("v1", "ConfigMap", length_delimited(2, length_delimited(1, b"\xff\xfe"))),
            "UTF-8",
        ),
    ],
)
def test_malformed_bodies_raise(raw: bytes, message: str) -> None:
    with pytest.raises(protobuf.ProtobufError, match=message):
        protobuf.decode(raw)


def test_kinds_without_a_table_are_unsupported() -> None:
    with pytest.raises(protobuf.Unsupported) as caught:
        protobuf.decode(envelope("v1", "Node", b""))
    assert (caught.value.api_version, caught.value.kind) == ("v1", "Node")


# --- round trip -----------------------------------------------------------------------------

names = st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True)
text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
labels = st.dictionaries(names, names, min_size=1, max_size=3)
meta = st.fixed_dictionaries({"name": names}, optional={"labels": labels, "annotations": labels})
containers = st.lists(
    st.fixed_dictionaries(
        {"name": names, "image": names},
        optional={
            "args": st.lists(text, min_size=1, max_size=3),
            "ports": st.lists(
                st.fixed_dictionaries({"containerPort": st.integers(1, 65535)}), min_size=1
            ),
            "resources": st.fixed_dictionaries(
                {"limits": st.dictionaries(st.sampled_from(["cpu", "memory"]), names, min_size=1)}
            ),
        },
    ),
    min_size=1,
    max_size=2,
)
objects = st.one_of(
    st.fixed_dictionaries(
        {"metadata": meta}, optional={"data": st.dictionaries(names, text, min_size=1)}
    ).map(lambda o: ("v1", "ConfigMap", o)),
    st.fixed_dictionaries(
        {"metadata": meta},
        optional={
            "data": st.dictionaries(names, st.binary(max_size=8), min_size=1).map(
                lambda d: {k: base64.b64encode(v).decode() for k, v in d.items()}
            ),
            "type": names,
        },
    ).map(lambda o: ("v1", "Secret", o)),
    st.fixed_dictionaries(
        {
            "metadata": meta,
            "spec": st.fixed_dictionaries(
                {
                    "replicas": st.integers(-(2**31), 2**31 - 1),
                    "template": st.fixed_dictionaries(
                        {
                            "metadata": meta,
                            "spec": st.fixed_dictionaries({"containers": containers}),
                        }
                    ),
                },
                optional={"paused": st.just(True)},
            ),
        }
    ).map(lambda o: ("apps/v1", "Deployment", o)),
)


@given(objects)
def test_round_trip(case: tuple[str, str, dict[str, Any]]) -> None:
    api_version, kind, obj = case
    raw = envelope(api_version, kind, encode(ROOTS[(api_version, kind)], obj))
    decoded, warnings = protobuf.decode(raw)
    assert decoded == {"apiVersion": api_version, "kind": kind, **obj}
    assert warnings == []
