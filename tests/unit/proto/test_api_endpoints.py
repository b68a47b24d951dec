"""Webhook connection settings: parsing and exclusivity, endpoint matching, resolution."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.api.endpoints import (
    Authorization,
    BasicAuth,
    CABundle,
    ClientTLS,
    Connection,
    EndpointConfig,
    ETag,
    KeyRef,
    ObjectRef,
    RefKind,
    Settings,
    decode_connections,
    effective_settings,
    encode_connections,
    match_endpoint_config,
    parse_endpoint_configs,
    parse_etag,
    parse_settings,
    resolve,
)
from proto.api.errors import InvalidControllerError, UnresolvedReference
from proto.api.fields import Fields

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
OPS = ObjectRef(RefKind.SECRET, "ops", "auth")


def settings(obj: dict[str, Any]) -> Settings:
    return parse_settings(Fields.of(obj, "spec.hooks.sync.webhook", InvalidControllerError))


def ref(name: str = "auth", namespace: str = "ops", **extra: str) -> dict[str, str]:
    return {"name": name, "namespace": namespace, **extra}


# --- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({}, Settings()),
        ({"caBundle": {"inline": PEM}}, Settings(ca_bundle=CABundle(inline=PEM))),
        (
            {"caBundle": {"configMapRef": ref("roots")}},
            Settings(
                ca_bundle=CABundle(
                    ref=KeyRef(ObjectRef(RefKind.CONFIG_MAP, "ops", "roots"), "ca.crt")
                )
            ),
        ),
        (
            {"caBundle": {"secretRef": ref("roots", key="bundle.pem")}},
            Settings(
                ca_bundle=CABundle(
                    ref=KeyRef(ObjectRef(RefKind.SECRET, "ops", "roots"), "bundle.pem")
                )
            ),
        ),
        (
            {"clientTLS": {"secretRef": ref()}},
            Settings(client_tls=ClientTLS(KeyRef(OPS, "tls.crt"), KeyRef(OPS, "tls.key"))),
        ),
        (
            {"clientTLS": {"secretRef": ref(), "certKey": "c", "privateKeyKey": "k"}},
            Settings(client_tls=ClientTLS(KeyRef(OPS, "c"), KeyRef(OPS, "k"))),
        ),
        (
            {"authorization": {"secretRef": ref(key="token")}},
            Settings(authorization=Authorization("Bearer", KeyRef(OPS, "token"))),
        ),
        (
            {"authorization": {"type": "Token", "secretRef": ref(key="t")}},
            Settings(authorization=Authorization("Token", KeyRef(OPS, "t"))),
        ),
        (
            {"basicAuth": {"secretRef": ref()}},
            Settings(basic_auth=BasicAuth(KeyRef(OPS, "username"), KeyRef(OPS, "password"))),
        ),
        (
            {"basicAuth": {"secretRef": ref(), "usernameKey": "u", "passwordKey": "p"}},
            Settings(basic_auth=BasicAuth(KeyRef(OPS, "u"), KeyRef(OPS, "p"))),
        ),
    ],
)
def test_settings_parse_with_metacontroller_defaults(
    obj: dict[str, Any], expected: Settings
) -> None:
    assert settings(obj) == expected


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"authorization": {"secretRef": ref(key="t")}, "basicAuth": {"secretRef": ref()}},
            "spec.hooks.sync.webhook: authorization and basicAuth are mutually exclusive",
        ),
        (
            {"authorization": {"type": "basic", "secretRef": ref(key="t")}},
            'authorization.type: "basic" is not supported; use the basicAuth field instead',
        ),
        ({"authorization": {"type": "Be arer", "secretRef": ref(key="t")}}, "must be one word"),
        ({"authorization": {"secretRef": ref()}}, "authorization.secretRef.key: required"),
        ({"authorization": {}}, "authorization.secretRef: required"),
        ({"caBundle": {}}, "caBundle: none of inline, secretRef, or configMapRef"),
        (
            {"caBundle": {"inline": PEM, "configMapRef": ref()}},
            "caBundle: more than one of inline, secretRef, or configMapRef",
        ),
        ({"caBundle": {"secretRef": {"name": "x"}}}, "caBundle.secretRef.namespace: required"),
        ({"clientTLS": {}}, "clientTLS.secretRef: required"),
        ({"basicAuth": {"secretRef": {"namespace": "o"}}}, "basicAuth.secretRef.name: required"),
    ],
)
def test_invalid_settings_name_the_field(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidControllerError, match=message.replace(".", r"\.")):
        settings(obj)


def test_endpoint_configs_need_a_host_and_follow_the_same_rules() -> None:
    spec = {
        "endpointConfigs": [
            {"host": "a", "authorization": {"secretRef": ref(key="t")}},
            {"host": "b:8443"},
        ]
    }
    configs = parse_endpoint_configs(Fields.of(spec, "spec", InvalidControllerError))
    assert [c.host for c in configs] == ["a", "b:8443"]
    assert configs[1].settings.empty
    bad = {"endpointConfigs": [{"host": "a", "authorization": {}, "basicAuth": {}}]}
    with pytest.raises(InvalidControllerError, match=r"spec\.endpointConfigs\[0\]: .*exclusive"):
        parse_endpoint_configs(Fields.of(bad, "spec", InvalidControllerError))
    with pytest.raises(InvalidControllerError, match=r"endpointConfigs\[0\]\.host: required"):
        parse_endpoint_configs(Fields.of({"endpointConfigs": [{}]}, "spec", InvalidControllerError))


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({}, ETag()),
        ({"enabled": True}, ETag(enabled=True)),
        ({"enabled": True, "cacheTimeoutSeconds": 60}, ETag(True, 60, None)),
        ({"enabled": True, "cacheCleanupSeconds": 5}, ETag(True, None, 5)),
    ],
)
def test_etag_each_number_is_optional_on_its_own(obj: dict[str, Any], expected: ETag) -> None:
    assert parse_etag(Fields.of(obj, "etag", InvalidControllerError)) == expected


def test_etag_numbers_must_not_be_negative() -> None:
    with pytest.raises(InvalidControllerError, match="cacheTimeoutSeconds: must not be negative"):
        parse_etag(Fields.of({"cacheTimeoutSeconds": -1}, "etag", InvalidControllerError))


# --- which endpoint config applies --------------------------------------------------------------


def configs(*hosts: str) -> tuple[EndpointConfig, ...]:
    return tuple(
        EndpointConfig(host, Settings(authorization=Authorization("Bearer", KeyRef(OPS, host))))
        for host in hosts
    )


@pytest.mark.parametrize(
    ("url", "hosts", "chosen"),
    [
        ("https://hooks.example/sync", ("hooks.example",), "hooks.example"),
        ("https://hooks.example/sync", ("hooks.example:443",), "hooks.example:443"),
        ("https://hooks.example:443/sync", ("hooks.example",), "hooks.example"),
        ("https://HOOKS.example/sync", ("hooks.EXAMPLE",), "hooks.EXAMPLE"),
        ("http://hooks.example/sync", ("hooks.example:80",), "hooks.example:80"),
        ("http://hooks.example:80/sync", ("hooks.example",), "hooks.example"),
        ("https://hooks.example:8443/sync", ("hooks.example",), None),
        (
            "https://hooks.example:8443/sync",
            ("hooks.example", "hooks.example:8443"),
            "hooks.example:8443",
        ),
        ("http://hooks.example/sync", ("hooks.example:443",), None),
        ("https://hooks.example/sync", ("hooks.example:80",), None),
        ("https://other.example/sync", ("hooks.example",), None),
        ("https://hooks.example/sync", ("hooks.example", "HOOKS.EXAMPLE"), "hooks.example"),
        # service-form webhooks: <protocol>://<name>.<namespace>:<port><path>
        ("http://hooks.ops:80/sync", ("hooks.ops",), "hooks.ops"),
        ("https://hooks.ops:8443/sync", ("hooks.ops:8443",), "hooks.ops:8443"),
        ("https://hooks.ops:8443/sync", ("hooks.ops",), None),
        ("https://user:pw@hooks.example/sync", ("hooks.example",), "hooks.example"),
        ("http://[::1]:8080/sync", ("[::1]:8080",), "[::1]:8080"),
        ("http://host:bad/sync", ("host",), None),
    ],
)
def test_endpoint_config_matching(url: str, hosts: tuple[str, ...], chosen: str | None) -> None:
    found = match_endpoint_config(url, configs(*hosts))
    assert (found.host if found else None) == chosen


def test_a_webhook_that_sets_any_field_ignores_endpoint_configs() -> None:
    own = Settings(ca_bundle=CABundle(inline=PEM))
    matching = configs("hooks.example")
    assert effective_settings("https://hooks.example/x", own, matching) is own
    assert (
        effective_settings("https://hooks.example/x", Settings(), matching) == matching[0].settings
    )
    assert effective_settings("https://elsewhere/x", Settings(), matching) == Settings()


@given(st.sampled_from(["a.example", "B.Example", "c.ops"]), st.sampled_from(["http", "https"]))
def test_a_default_port_never_changes_the_match(host: str, scheme: str) -> None:
    port = 443 if scheme == "https" else 80
    known = configs("a.example", "b.example:443", "c.ops:80")
    plain = match_endpoint_config(f"{scheme}://{host}/p", known)
    explicit = match_endpoint_config(f"{scheme}://{host}:{port}/p", known)
    assert plain == explicit


# --- resolution --------------------------------------------------------------------------------


def lookup_in(objects: Mapping[ObjectRef, Mapping[str, bytes]]) -> Any:
    return objects.get


def test_resolution_builds_the_header_and_the_tls_material() -> None:
    secret = {b"t": b"tok\n", b"u": b"alice", b"p": b" s3cret ", b"tls.crt": b"C", b"tls.key": b"K"}
    data = {k.decode(): v for k, v in secret.items()}
    roots = ObjectRef(RefKind.CONFIG_MAP, "ops", "roots")
    lookup = lookup_in({OPS: data, roots: {"ca.crt": PEM.encode()}})
    bearer = Settings(
        ca_bundle=CABundle(ref=KeyRef(roots, "ca.crt")),
        client_tls=ClientTLS(KeyRef(OPS, "tls.crt"), KeyRef(OPS, "tls.key")),
        authorization=Authorization("Bearer", KeyRef(OPS, "t")),
    )
    assert resolve(bearer, lookup) == Connection(PEM, "C", "K", "Bearer tok")
    basic = Settings(basic_auth=BasicAuth(KeyRef(OPS, "u"), KeyRef(OPS, "p")))
    assert resolve(basic, lookup) == Connection(
        authorization="Basic " + base64.b64encode(b"alice:s3cret").decode()
    )
    assert resolve(Settings(), lookup) == Connection()


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        ({}, "Secret ops/auth not found"),
        ({OPS: {"other": b"x"}}, "Secret ops/auth has no key 't'"),
        ({OPS: {"t": b"  "}}, 'key "t" of Secret ops/auth is empty'),
        ({OPS: {"t": b"ab\ncd"}}, 'key "t" of Secret ops/auth holds a line break'),
        ({OPS: {"t": b"\xff\xfe"}}, 'key "t" of Secret ops/auth is not UTF-8 text'),
    ],
)
def test_unusable_references_name_object_and_key_never_the_value(
    objects: dict[ObjectRef, dict[str, bytes]], message: str
) -> None:
    with pytest.raises(UnresolvedReference) as caught:
        resolve(Settings(authorization=Authorization("Bearer", KeyRef(OPS, "t"))), objects.get)
    assert str(caught.value).startswith(message)
    assert "ab\ncd" not in str(caught.value)


def test_a_ca_bundle_without_a_certificate_is_refused() -> None:
    with pytest.raises(UnresolvedReference, match=r"caBundle\.inline holds no PEM certificate"):
        nothing: dict[ObjectRef, dict[str, bytes]] = {}
        resolve(Settings(ca_bundle=CABundle(inline="not a pem")), nothing.get)


def test_connections_round_trip_as_json() -> None:
    connections = {
        "sync": Connection(PEM, "C", "K", "Bearer t"),
        "finalize": Connection(error='Secret ops/auth has no key "t"'),
        "customize": Connection(),
    }
    data = encode_connections(connections)
    assert decode_connections(data) == {k: v for k, v in connections.items() if k != "customize"}
    assert encode_connections({"sync": Connection()}) == b""
    assert decode_connections(b"") == {}
    with pytest.raises(ValueError, match="must map names to strings"):
        decode_connections(b'{"sync": {"caBundle": 1}}')
