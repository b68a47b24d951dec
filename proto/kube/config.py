"""Where the cluster is and how to authenticate: ``load_config() -> ClusterConfig``.

Resolution order (controller-runtime's ``config.GetConfig``):

1. the ``kubeconfig`` argument (a ``--kubeconfig`` flag): it must load, or ``ConfigError``;
2. ``$KUBECONFIG`` (one path or an ``os.pathsep``-separated list, merged): it must load;
3. in-cluster, when ``KUBERNETES_SERVICE_HOST`` and ``KUBERNETES_SERVICE_PORT`` are set: the
   service-account token (re-read every minute by the session, since projected tokens rotate),
   CA and namespace under ``/var/run/secrets/kubernetes.io/serviceaccount``; if these files are
   missing the search goes on;
4. ``~/.kube/config``.

When nothing works, ``ConfigError`` lists every place tried and why it failed.

Kubeconfig files are resolved by ``kubernetes.config`` (token, token file, client certificates
and keys inline or as files, exec and auth-provider plugins, CA, ``insecure-skip-tls-verify``,
``tls-server-name``, ``proxy-url``). That package costs ~44 MB and ~0.4 s to import, so it is
imported only on the kubeconfig path: in-cluster processes never load it. A kubeconfig may point
at a plain ``http://`` server and carry nothing but a bearer token.

``ClusterConfig`` is a frozen value; callers may also build one directly (e.g. for a local
emulator: ``ClusterConfig(server="http://127.0.0.1:8080")``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proto.kube.errors import ConfigError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Everything the session needs to reach and authenticate to one API server.

    - ``server``: base URL, ``https://host:port`` or ``http://...`` (may carry a path prefix).
    - ``authorization``: a fixed ``Authorization`` header value (``Bearer ...``/``Basic ...``).
    - ``token_file``: a bearer-token file, re-read periodically (wins over ``authorization``).
    - ``refresh_authorization``: returns the current header value (kubeconfig auth plugins);
      blocking, called periodically off the event loop.
    """

    server: str
    ca_file: str | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None
    authorization: str | None = None
    token_file: str | None = None
    refresh_authorization: Callable[[], str | None] | None = None
    proxy: str | None = None
    namespace: str = "default"
    source: str = ""

    def __post_init__(self) -> None:
        if not self.server.startswith(("http://", "https://")):
            raise ConfigError(f"server must be an http:// or https:// URL, got {self.server!r}")
        if (self.client_cert_file is None) != (self.client_key_file is None):
            raise ConfigError("a client certificate needs both a certificate and a key file")

    def __repr__(self) -> str:  # never print credentials
        auth = "token-file" if self.token_file else ("set" if self.authorization else "none")
        return f"ClusterConfig(server={self.server!r}, source={self.source!r}, auth={auth})"


def load_config(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> ClusterConfig:
    """Resolve the cluster configuration (see the module docstring for the order).

    ``environ`` and ``service_account_dir`` default to the process's own; tests pass their own.
    Raises ``ConfigError`` naming what was tried.
    """
    env = os.environ if environ is None else environ
    if kubeconfig:
        return load_kubeconfig(kubeconfig, context=context)
    if env.get("KUBECONFIG"):
        return load_kubeconfig(env["KUBECONFIG"], context=context)
    tried: list[str] = ["--kubeconfig (not given)", "$KUBECONFIG (not set)"]
    if env.get("KUBERNETES_SERVICE_HOST") and env.get("KUBERNETES_SERVICE_PORT"):
        try:
            return load_incluster_config(environ=env, service_account_dir=service_account_dir)
        except ConfigError as exc:
            tried.append(f"in-cluster ({exc})")
    else:
        tried.append("in-cluster (KUBERNETES_SERVICE_HOST/PORT not set)")
    home = env.get("HOME") or str(Path.home())
    default = Path(home) / ".kube" / "config"
    if default.is_file():
        return load_kubeconfig(str(default), context=context)
    tried.append(f"{default} (no such file)")
    raise ConfigError("no cluster configuration found; tried: " + "; ".join(tried))


def load_incluster_config(
    *,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> ClusterConfig:
    """The pod's own service account: env vars for the address, token and CA from files."""
    env = os.environ if environ is None else environ
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    port = env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set")
    token_file = service_account_dir / "token"
    ca_file = service_account_dir / "ca.crt"
    try:
        token = token_file.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the service-account token {token_file}: {exc}") from exc
    if not token:
        raise ConfigError(f"the service-account token {token_file} is empty")
    if not ca_file.is_file():
        raise ConfigError(f"the service-account CA {ca_file} does not exist")
    try:
        namespace = (service_account_dir / "namespace").read_text().strip() or "default"
    except OSError:
        namespace = "default"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return ClusterConfig(
        server=f"https://{host}:{port}",
        ca_file=str(ca_file),
        token_file=str(token_file),
        namespace=namespace,
        source="in-cluster",
    )


def load_kubeconfig(path: str, *, context: str | None = None) -> ClusterConfig:
    """Load one kubeconfig (or an ``os.pathsep``-separated list, merged) through
    ``kubernetes.config``; ``context`` defaults to the file's ``current-context``."""
    paths = [p for p in path.split(os.pathsep) if p]
    if not any(Path(p).expanduser().is_file() for p in paths):
        raise ConfigError(f"kubeconfig {path}: no such file")
    try:
        # Imported here on purpose: ~44 MB and ~0.4 s, needed only on this path.
        from kubernetes import client as k8s_client
        from kubernetes import config as kubernetes_config
    except ImportError as exc:  # pragma: no cover - kubernetes is a declared dependency
        raise ConfigError(f"reading a kubeconfig needs the kubernetes package: {exc}") from exc
    k8s_config: Any = kubernetes_config  # untyped package
    configuration: Any = k8s_client.Configuration()
    try:
        contexts, active = k8s_config.list_kube_config_contexts(config_file=path)
        k8s_config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except Exception as exc:  # the loader raises ConfigException, KeyError, ValueError, ...
        raise ConfigError(f"kubeconfig {path}: {exc}") from exc
    chosen = context or (active or {}).get("name")
    namespace = "default"
    for entry in contexts or ():
        if entry.get("name") == chosen:
            namespace = (entry.get("context") or {}).get("namespace") or "default"
    authorization = configuration.api_key.get("BearerToken")
    hook = configuration.refresh_api_key_hook
    refresh: Callable[[], str | None] | None = None
    if hook is not None:

        def refresh_from_plugin() -> str | None:
            hook(configuration)
            value = configuration.api_key.get("BearerToken")
            return str(value) if value else None

        refresh = refresh_from_plugin

    return ClusterConfig(
        server=str(configuration.host).rstrip("/"),
        ca_file=configuration.ssl_ca_cert or None,
        insecure_skip_tls_verify=not configuration.verify_ssl,
        tls_server_name=getattr(configuration, "tls_server_name", None) or None,
        client_cert_file=configuration.cert_file or None,
        client_key_file=configuration.key_file or None,
        authorization=str(authorization) if authorization else None,
        refresh_authorization=refresh,
        proxy=configuration.proxy or None,
        namespace=namespace,
        source=f"kubeconfig {path} context {chosen}",
    )
