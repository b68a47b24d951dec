"""Cluster configuration: kubeconfig (token, client certificates), in-cluster, resolution order.

Certificates come from ``tests.unit.proto.pki`` (generated at test time).
"""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from proto.kube.cluster import ClusterConfig
from proto.kube.config import load_config, load_incluster_config
from proto.kube.errors import ConfigError, TransportError
from proto.kube.session import Session
from tests.unit.proto.kube_fake import FakeApiServer, Reply
from tests.unit.proto.pki import Pki, server_tls

PATH = "/api/v1/namespaces"


def _write_kubeconfig(
    path: Path, clusters: dict[str, Any], users: dict[str, Any], **extra: Any
) -> Path:
    contexts = extra.pop("contexts", None) or [
        {"name": "main", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}}
    ]
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": c} for name, c in clusters.items()],
        "users": [{"name": name, "user": u} for name, u in users.items()],
        "contexts": contexts,
        "current-context": extra.pop("current", contexts[0]["name"]),
    }
    path.write_bytes(orjson.dumps(document))  # JSON is YAML
    return path


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


@pytest.mark.asyncio
async def test_kubeconfig_with_a_bearer_token_on_a_plain_http_server(tmp_path: Path) -> None:
    server = FakeApiServer()
    server.route("GET", PATH, Reply.json(200, {"kind": "NamespaceList", "items": []}))
    await server.start()
    try:
        kubeconfig = _write_kubeconfig(
            tmp_path / "config", {"c": {"server": server.url}}, {"u": {"token": "s3cret"}}
        )
        config = load_config(str(kubeconfig))
        assert config.server == server.url
        assert config.authorization == "Bearer s3cret"
        assert config.namespace == "team-a"
        assert "s3cret" not in repr(config)
        async with Session(config, qps=0) as session:
            await session.request("GET", PATH)
    finally:
        await server.close()
    assert server.received[0].headers["Authorization"] == "Bearer s3cret"


@pytest.mark.asyncio
async def test_kubeconfig_with_client_certificates_over_tls(tmp_path: Path, pki: Pki) -> None:
    server = FakeApiServer(ssl_context=server_tls(pki, require_client_cert=True))
    server.route("GET", PATH, Reply.json(200, {"kind": "NamespaceList", "items": []}))
    await server.start()
    try:
        cluster = {"server": server.url, "certificate-authority-data": _b64(pki.ca)}
        user = {
            "client-certificate-data": _b64(pki.client_cert),
            "client-key-data": _b64(pki.client_key),
        }
        config = load_config(
            str(_write_kubeconfig(tmp_path / "config", {"c": cluster}, {"u": user}))
        )
        assert config.server.startswith("https://127.0.0.1:")
        assert config.client_cert_file and config.client_key_file and config.ca_file
        assert config.authorization is None
        async with Session(config, qps=0) as session:
            assert (await session.request("GET", PATH)).status == 200
    finally:
        await server.close()
    (peer,) = server.peer_certificates
    assert dict(entry[0] for entry in peer["subject"])["commonName"] == "admin"


@pytest.mark.asyncio
async def test_tls_verification_uses_the_ca_unless_told_to_skip_it(
    tmp_path: Path, pki: Pki
) -> None:
    server = FakeApiServer(ssl_context=server_tls(pki, require_client_cert=False))
    server.route("GET", PATH, Reply.json(200, {"kind": "NamespaceList", "items": []}))
    await server.start()
    try:
        unknown_ca = ClusterConfig(server=server.url)
        async with Session(unknown_ca, qps=0) as session:
            with pytest.raises(
                TransportError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify"
            ):
                await session.request("GET", PATH)
        kubeconfig = _write_kubeconfig(
            tmp_path / "config",
            {"c": {"server": server.url, "insecure-skip-tls-verify": True}},
            {"u": {"token": "t"}},
        )
        insecure = load_config(str(kubeconfig))
        assert insecure.insecure_skip_tls_verify
        async with Session(insecure, qps=0) as session:
            assert (await session.request("GET", PATH)).status == 200
    finally:
        await server.close()


def test_context_selection(tmp_path: Path) -> None:
    kubeconfig = _write_kubeconfig(
        tmp_path / "config",
        {"c": {"server": "http://one:1"}, "d": {"server": "http://two:2"}},
        {"u": {"token": "a"}, "v": {"token": "b"}},
        contexts=[
            {"name": "first", "context": {"cluster": "c", "user": "u"}},
            {"name": "second", "context": {"cluster": "d", "user": "v", "namespace": "ns2"}},
        ],
    )
    default = load_config(str(kubeconfig))
    assert (default.server, default.authorization, default.namespace) == (
        "http://one:1",
        "Bearer a",
        "default",
    )
    chosen = load_config(str(kubeconfig), context="second")
    assert (chosen.server, chosen.authorization, chosen.namespace) == (
        "http://two:2",
        "Bearer b",
        "ns2",
    )
    with pytest.raises(ConfigError, match="kubeconfig"):
        load_config(str(kubeconfig), context="third")


def _service_account(directory: Path, token: str = "sa-token") -> Path:
    directory.mkdir(parents=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_text("not read until a session opens")
    (directory / "namespace").write_text("workers\n")
    return directory


def test_in_cluster(tmp_path: Path) -> None:
    sa = _service_account(tmp_path / "sa")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    config = load_incluster_config(environ=env, service_account_dir=sa)
    assert config.server == "https://10.0.0.1:443"
    assert config.token_file == str(sa / "token") and config.ca_file == str(sa / "ca.crt")
    assert config.namespace == "workers" and config.source == "in-cluster"
    v6 = load_incluster_config(
        environ={"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"},
        service_account_dir=sa,
    )
    assert v6.server == "https://[fd00::1]:6443"


def test_resolution_order(tmp_path: Path) -> None:
    explicit = _write_kubeconfig(
        tmp_path / "explicit", {"c": {"server": "http://explicit:1"}}, {"u": {}}
    )
    from_env = _write_kubeconfig(tmp_path / "env", {"c": {"server": "http://env:1"}}, {"u": {}})
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    _write_kubeconfig(home / ".kube" / "config", {"c": {"server": "http://home:1"}}, {"u": {}})
    sa = _service_account(tmp_path / "sa")
    in_cluster = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    everything = {"HOME": str(home), "KUBECONFIG": str(from_env), **in_cluster}

    def server(kubeconfig: str | None, env: dict[str, str]) -> str:
        return load_config(kubeconfig, environ=env, service_account_dir=sa).server

    assert server(str(explicit), everything) == "http://explicit:1"
    assert server(None, everything) == "http://env:1"
    assert server(None, {"HOME": str(home), **in_cluster}) == "https://10.0.0.1:443"
    assert server(None, {"HOME": str(home)}) == "http://home:1"
    # an in-cluster environment without its token files falls through to ~/.kube/config
    broken = load_config(
        environ={"HOME": str(home), **in_cluster}, service_account_dir=tmp_path / "missing"
    )
    assert broken.server == "http://home:1"


def test_nothing_found_lists_what_was_tried(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}
    with pytest.raises(ConfigError) as caught:
        load_config(environ=env, service_account_dir=tmp_path / "no-sa")
    message = str(caught.value)
    assert "--kubeconfig" in message and "$KUBECONFIG" in message
    assert "service-account token" in message
    assert str(tmp_path / ".kube" / "config") in message


def test_bad_kubeconfigs_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(str(tmp_path / "missing"))
    (tmp_path / "empty").write_text("{}")
    with pytest.raises(ConfigError, match="kubeconfig"):
        load_config(str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="no such file"):
        load_config(environ={"KUBECONFIG": str(tmp_path / "nope")})


def test_cluster_config_validates_its_fields() -> None:
    with pytest.raises(ConfigError, match="http"):
        ClusterConfig(server="127.0.0.1:6443")
    with pytest.raises(ConfigError, match="both"):
        ClusterConfig(server="https://h", client_cert_file="c.crt")


def test_the_in_cluster_path_does_not_import_kubernetes(tmp_path: Path) -> None:
    sa = _service_account(tmp_path / "sa")
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from proto.kube.client import Client\n"
        "from proto.kube.config import load_config\n"
        "from proto.kube.session import Session\n"
        "env = {'KUBERNETES_SERVICE_HOST': 'h', 'KUBERNETES_SERVICE_PORT': '1'}\n"
        f"load_config(environ=env, service_account_dir=Path({str(sa)!r}))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_a_server_url_with_userinfo_is_shown_without_it() -> None:
    config = ClusterConfig(server="https://admin:pw5ecret@api.example:6443", source="test")
    assert "pw5ecret" not in repr(config)
    assert "api.example:6443" in repr(config)
    with pytest.raises(ConfigError) as info:
        ClusterConfig(server="ftp://admin:pw5ecret@api.example", source="test")
    assert "pw5ecret" not in str(info.value) and "ftp://" in str(info.value)
