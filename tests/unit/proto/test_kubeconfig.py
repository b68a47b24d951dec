"""Kubeconfig files: client-go's merge rules, paths, credentials, errors, and parity with
``kubernetes.config`` on what both read the same way.

Sessions over real TLS with these configurations are in ``test_kube_config.py``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proto.kube.cluster import ClusterConfig
from proto.kube.errors import ConfigError
from proto.kube.kubeconfig import load_kubeconfig, load_with_kubernetes


def _doc(
    clusters: dict[str, Any] | None = None,
    users: dict[str, Any] | None = None,
    contexts: dict[str, Any] | None = None,
    current: str | None = None,
) -> dict[str, Any]:
    document: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    for kind, field, entries in (
        ("clusters", "cluster", clusters),
        ("users", "user", users),
        ("contexts", "context", contexts),
    ):
        if entries is not None:
            document[kind] = [{"name": n, field: body} for n, body in entries.items()]
    if current is not None:
        document["current-context"] = current
    return document


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(document))  # JSON is YAML
    return path


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _content(name: str | None) -> bytes | None:
    return Path(name).read_bytes() if name else None


# --- merging and selection ------------------------------------------------------------------


def test_the_first_file_to_name_an_entry_or_set_the_current_context_wins(tmp_path: Path) -> None:
    first = _write(
        tmp_path / "first",
        _doc(
            clusters={"c": {"server": "http://first:1"}},
            users={"u": {"token": "from-first"}},
            contexts={"a": {"cluster": "c", "user": "u", "namespace": "ns-a"}},
            current="a",
        ),
    )
    second = _write(
        tmp_path / "second",
        _doc(
            clusters={"c": {"server": "http://second:1"}, "d": {"server": "http://d:1"}},
            users={"u": {"token": "from-second"}},
            contexts={"b": {"cluster": "d", "user": "u"}},
            current="b",
        ),
    )
    merged = load_kubeconfig(f"{first}{os.pathsep}{tmp_path / 'missing'}{os.pathsep}{second}")
    assert (merged.server, merged.authorization, merged.namespace) == (
        "http://first:1",
        "Bearer from-first",
        "ns-a",
    )
    other = load_kubeconfig(f"{first}{os.pathsep}{second}", context="b")
    assert (other.server, other.authorization, other.namespace) == (
        "http://d:1",
        "Bearer from-first",  # user "u" was named by the first file
        "default",
    )
    # a file without current-context leaves it to the next one
    plain = _write(tmp_path / "plain", _doc(clusters={"x": {"server": "http://x:1"}}))
    assert load_kubeconfig(f"{plain}{os.pathsep}{second}").server == "http://d:1"


def test_relative_paths_are_relative_to_the_file_that_named_the_entry(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.crt").write_bytes(b"CA")
    (tmp_path / "certs" / "tls.crt").write_bytes(b"CERT")
    (tmp_path / "certs" / "tls.key").write_bytes(b"KEY")
    (tmp_path / "certs" / "token").write_text("rotating\n")
    config_dir = tmp_path / "conf"
    users = _write(
        tmp_path / "users.yaml",
        _doc(
            users={
                "u": {
                    "client-certificate": "certs/tls.crt",
                    "client-key": "certs/tls.key",
                    "tokenFile": "certs/token",
                    "token": "static",
                }
            }
        ),
    )
    main = _write(
        config_dir / "config",
        _doc(
            clusters={
                "c": {"server": "https://h:6443", "certificate-authority": "../certs/ca.crt"}
            },
            contexts={"main": {"cluster": "c", "user": "u"}},
            current="main",
        ),
    )
    config = load_kubeconfig(f"{main}{os.pathsep}{users}")
    assert config.ca_file == str(tmp_path / "certs" / "ca.crt")
    assert _content(config.client_cert_file) == b"CERT"
    assert _content(config.client_key_file) == b"KEY"
    # tokenFile is kept as a file (the session re-reads it) and wins over token, as in client-go
    assert config.token_file == str(tmp_path / "certs" / "token")


def test_data_fields_become_private_files_and_win_over_paths(tmp_path: Path) -> None:
    kubeconfig = _write(
        tmp_path / "config",
        _doc(
            clusters={
                "c": {
                    "server": "https://h:6443/",
                    "certificate-authority": "/nonexistent/ca.crt",
                    "certificate-authority-data": _b64(b"CA DATA"),
                    "tls-server-name": "api.internal",
                    "proxy-url": "http://proxy:3128",
                }
            },
            users={"u": {"client-certificate-data": _b64(b"C"), "client-key-data": _b64(b"K")}},
            contexts={"m": {"cluster": "c", "user": "u"}},
            current="m",
        ),
    )
    config = load_kubeconfig(str(kubeconfig))
    assert config.server == "https://h:6443"
    assert (config.tls_server_name, config.proxy) == ("api.internal", "http://proxy:3128")
    assert config.ca_file is not None and _content(config.ca_file) == b"CA DATA"
    assert _content(config.client_cert_file) == b"C" and _content(config.client_key_file) == b"K"
    assert Path(config.ca_file).stat().st_mode & 0o077 == 0
    assert Path(config.ca_file).parent.stat().st_mode & 0o077 == 0
    assert load_kubeconfig(str(kubeconfig)).ca_file == config.ca_file  # one file per content


def test_basic_auth_and_no_user(tmp_path: Path) -> None:
    kubeconfig = _write(
        tmp_path / "config",
        _doc(
            clusters={"c": {"server": "http://h:1"}},
            users={"u": {"username": "admin", "password": "p@ss"}},
            contexts={"basic": {"cluster": "c", "user": "u"}, "anon": {"cluster": "c"}},
            current="basic",
        ),
    )
    basic = load_kubeconfig(str(kubeconfig))
    assert basic.authorization == "Basic " + _b64(b"admin:p@ss")
    assert "p@ss" not in repr(basic)
    anonymous = load_kubeconfig(str(kubeconfig), context="anon")
    assert (anonymous.authorization, anonymous.token_file) == (None, None)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (_doc(clusters={"c": {"server": "http://h"}}), "no current-context"),
        (_doc(clusters={}, contexts={"m": {"cluster": "c"}}, current="m"), "cluster 'c' not found"),
        (_doc(contexts={"m": {"cluster": "c"}}, current="other"), "context 'other' not found"),
        (_doc(clusters={"c": {}}, contexts={"m": {"cluster": "c"}}, current="m"), "no server"),
        (
            _doc(
                clusters={"c": {"server": "https://h", "certificate-authority-data": "*not*"}},
                contexts={"m": {"cluster": "c"}},
                current="m",
            ),
            "certificate-authority-data is not base64",
        ),
        (
            _doc(
                clusters={"c": {"server": "https://h", "certificate-authority": "missing.crt"}},
                contexts={"m": {"cluster": "c"}},
                current="m",
            ),
            "certificate-authority .*missing.crt: no such file",
        ),
        (
            _doc(
                clusters={"c": {"server": "http://h"}},
                users={"u": {"tokenFile": "gone"}},
                contexts={"m": {"cluster": "c", "user": "u"}},
                current="m",
            ),
            "tokenFile .*gone: no such file",
        ),
        (
            _doc(
                clusters={"c": {"server": "http://h", "insecure-skip-tls-verify": "yes"}},
                contexts={"m": {"cluster": "c"}},
                current="m",
            ),
            "insecure-skip-tls-verify must be true or false",
        ),
        (
            _doc(clusters={"c": {"server": 6443}}, contexts={"m": {"cluster": "c"}}, current="m"),
            "server must be a string",
        ),
        ({"clusters": {"c": {}}}, "clusters must be a list"),
        ({"users": [{"user": {}}]}, "every entry of users needs a name"),
        ({"contexts": [{"name": "m", "context": "c"}]}, "context must be a mapping"),
        (
            {"clusters": [{"name": "c", "cluster": {}}, {"name": "c", "cluster": {}}]},
            "clusters 'c' appears twice",
        ),
        (["not", "a", "mapping"], "not a kubeconfig"),
    ],
)
def test_bad_kubeconfigs_say_what_and_where(tmp_path: Path, document: Any, message: str) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_bytes(orjson.dumps(document))
    with pytest.raises(ConfigError, match=message) as caught:
        load_kubeconfig(str(kubeconfig))
    assert str(kubeconfig) in str(caught.value)


def test_errors_never_carry_credentials(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("users: [{name: u, user: {token: sekrit}}]\nclusters: [oops: sekrit2")
    with pytest.raises(ConfigError) as caught:
        load_kubeconfig(str(kubeconfig))
    assert "sekrit" not in str(caught.value)
    bad_key = _write(
        tmp_path / "bad-key",
        _doc(
            clusters={"c": {"server": "https://h"}},
            users={"u": {"client-certificate-data": _b64(b"C"), "client-key-data": "sekrit!"}},
            contexts={"m": {"cluster": "c", "user": "u"}},
            current="m",
        ),
    )
    with pytest.raises(ConfigError, match="client-key-data is not base64") as caught:
        load_kubeconfig(str(bad_key))
    assert "sekrit" not in str(caught.value)


# --- what loads the kubernetes package --------------------------------------------------------


def _kubernetes_modules_after(script: str) -> list[str]:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            script + "\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(result.stdout.strip().replace("'", '"')))


def test_a_kubeconfig_without_plugins_does_not_import_kubernetes(tmp_path: Path) -> None:
    kubeconfig = _write(
        tmp_path / "config",
        _doc(
            clusters={"c": {"server": "https://h", "certificate-authority-data": _b64(b"CA")}},
            users={"u": {"token": "t"}},
            contexts={"m": {"cluster": "c", "user": "u"}},
            current="m",
        ),
    )
    script = (
        f"import sys\nfrom proto.kube.config import load_config\nload_config({str(kubeconfig)!r})\n"
    )
    assert _kubernetes_modules_after(script) == []


def test_exec_plugins_are_run_by_kubernetes_config(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1',"
        " 'kind': 'ExecCredential', 'status': {'token': 'from-plugin'}}))\n"
    )
    kubeconfig = _write(
        tmp_path / "config",
        _doc(
            clusters={"c": {"server": "http://h:1"}},
            users={
                "u": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": sys.executable,
                        "args": [str(plugin)],
                        "interactiveMode": "Never",
                    }
                }
            },
            contexts={"m": {"cluster": "c", "user": "u", "namespace": "team"}},
            current="m",
        ),
    )
    config = load_kubeconfig(str(kubeconfig))
    assert (config.server, config.authorization, config.namespace) == (
        "http://h:1",
        "Bearer from-plugin",
        "team",
    )
    assert config.refresh_authorization is not None
    assert config.refresh_authorization() == "Bearer from-plugin"


# --- parity with kubernetes.config ------------------------------------------------------------

_names = st.sampled_from(["a", "b", "c"])
_blob = st.binary(min_size=1, max_size=8)


@st.composite
def _kubeconfigs(draw: st.DrawFn) -> dict[str, Any]:
    """One file within what both readers read the same way: no tokenFile (client-go's
    precedence differs from the package's), no plugins."""
    clusters: dict[str, Any] = {}
    for name in draw(st.sets(_names, min_size=1)):
        cluster: dict[str, Any] = {
            "server": draw(st.sampled_from(["http://h:1", "https://h:6443", "https://x/p/"]))
        }
        if draw(st.booleans()):
            cluster["certificate-authority-data"] = _b64(draw(_blob))
        if draw(st.booleans()):
            cluster["insecure-skip-tls-verify"] = draw(st.booleans())
        for field, value in (("tls-server-name", "api"), ("proxy-url", "http://p:3128")):
            if draw(st.booleans()):
                cluster[field] = value
        clusters[name] = cluster
    users: dict[str, Any] = {}
    for name in draw(st.sets(_names)):
        user: dict[str, Any] = {}
        auth = draw(st.sampled_from(["none", "token", "basic", "cert"]))
        if auth == "token":
            user["token"] = draw(st.text("abcxyz019.-_", min_size=1, max_size=12))
        elif auth == "basic":
            user["username"], user["password"] = "admin", draw(st.text("pq:@!", min_size=1))
        elif auth == "cert":
            user["client-certificate-data"] = _b64(draw(_blob))
            user["client-key-data"] = _b64(draw(_blob))
        users[name] = user
    contexts: dict[str, Any] = {}
    for name in draw(st.sets(_names, min_size=1)):
        context: dict[str, Any] = {"cluster": draw(st.sampled_from(sorted(clusters)))}
        with_user = draw(st.booleans())
        if users and with_user:
            context["user"] = draw(st.sampled_from(sorted(users)))
        if draw(st.booleans()):
            context["namespace"] = draw(st.sampled_from(["team", "other"]))
        contexts[name] = context
    return _doc(clusters, users, contexts, current=draw(st.sampled_from(sorted(contexts))))


def _observable(config: ClusterConfig) -> tuple[Any, ...]:
    return (
        config.server,
        _content(config.ca_file),
        config.insecure_skip_tls_verify,
        config.tls_server_name,
        _content(config.client_cert_file),
        _content(config.client_key_file),
        config.authorization,
        config.proxy,
        config.namespace,
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(document=_kubeconfigs())
def test_the_same_cluster_and_credentials_as_kubernetes_config(
    tmp_path: Path, document: dict[str, Any]
) -> None:
    kubeconfig = str(_write(tmp_path / "config", document))
    for entry in document["contexts"]:
        name = entry["name"]
        ours = load_kubeconfig(kubeconfig, context=name)
        theirs = load_with_kubernetes(kubeconfig, context=name, namespace=ours.namespace)
        assert _observable(ours) == _observable(theirs), name
        expected = entry["context"].get("namespace", "default")
        assert ours.namespace == expected
