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

Kubeconfig files are read by ``proto.kube.kubeconfig`` (client-go's rules; only users with
``exec`` or ``auth-provider`` plugins load the ``kubernetes`` package). A kubeconfig may point at
a plain ``http://`` server and carry nothing but a bearer token.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from proto.kube.cluster import ClusterConfig
from proto.kube.errors import ConfigError
from proto.kube.kubeconfig import load_kubeconfig

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


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
