"""Kubeconfig files read as client-go reads them: ``load_kubeconfig(path, context=...)``.

- ``path`` is one file or an ``os.pathsep``-separated list (``$KUBECONFIG``). Files that do not
  exist are skipped; at least one must exist. Each is YAML (JSON is YAML).
- Merging follows client-go's loading rules: the first file to name a cluster, a user or a
  context wins, and so does the first file to set ``current-context`` (the ``kubernetes``
  Python package lets the last one win; kubectl does not). A name repeated within one file is
  an error.
- The context is ``context`` (the ``--context`` flag) or ``current-context``. Its cluster must
  exist and have a ``server``. A user it names that no file defines means no credentials, as in
  client-go. The namespace is the context's, else ``default``.
- Relative file paths are relative to the directory of the file that defined the entry.
- Credentials: ``tokenFile`` (re-read periodically by the session; it wins over ``token``, as
  in client-go), ``token``, ``username`` + ``password`` (Basic), ``client-certificate`` +
  ``client-key``. For ``https://`` servers, the CA and client certificate come from the
  ``*-data`` field (base64, preferred) or the file. Cluster options:
  ``insecure-skip-tls-verify``, ``tls-server-name``, ``proxy-url``.
- ``*-data`` contents go to files in a private temporary directory, removed when the process
  exits: Python's ``ssl`` loads client certificates only from files.
- A user with an ``exec`` or ``auth-provider`` plugin is resolved by ``kubernetes.config``, which
  runs the plugin and refreshes its token (``ClusterConfig.refresh_authorization``). That
  package is large and slow to import (it loads every generated API model), so no other
  kubeconfig loads it.
- Errors are ``ConfigError``s that name the file, entry and field, never a credential's value.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proto.kube.cluster import ClusterConfig
from proto.kube.errors import ConfigError

KINDS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))
PLUGINS = ("exec", "auth-provider")


@dataclass(frozen=True, slots=True)
class _Entry:
    """One named cluster, user or context, and the file that defined it."""

    body: Mapping[str, Any]
    origin: Path


def load_kubeconfig(path: str, *, context: str | None = None) -> ClusterConfig:
    """The cluster and credentials of ``context`` (default: the current context) in ``path``."""
    files = [Path(p).expanduser() for p in path.split(os.pathsep) if p]
    existing = [f for f in files if f.is_file()]
    if not existing:
        raise ConfigError(f"kubeconfig {path}: no such file")
    entries: dict[str, dict[str, _Entry]] = {kind: {} for kind, _ in KINDS}
    current: str | None = None
    for file in existing:
        document = _read(file)
        for kind, field in KINDS:
            for name, entry in _named(document, kind, field, file).items():
                entries[kind].setdefault(name, entry)
        current = current or _optional_str(document, "current-context", f"kubeconfig {file}")
    chosen = context or current
    if not chosen:
        raise ConfigError(f"kubeconfig {path}: no current-context, and no --context given")
    ctx = entries["contexts"].get(chosen)
    if ctx is None:
        raise ConfigError(f"kubeconfig {path}: context {chosen!r} not found")
    where = f"kubeconfig {ctx.origin} context {chosen!r}"
    cluster_name = _optional_str(ctx.body, "cluster", where)
    cluster = entries["clusters"].get(cluster_name or "")
    if cluster is None:
        raise ConfigError(f"{where}: cluster {cluster_name!r} not found")
    user_name = _optional_str(ctx.body, "user", where)
    user = entries["users"].get(user_name or "")
    namespace = _optional_str(ctx.body, "namespace", where) or "default"
    source = f"kubeconfig {path} context {chosen}"
    if user is not None and any(plugin in user.body for plugin in PLUGINS):
        return load_with_kubernetes(path, context=chosen, namespace=namespace)
    return _resolve(cluster, user, namespace=namespace, source=source)


def _resolve(cluster: _Entry, user: _Entry | None, *, namespace: str, source: str) -> ClusterConfig:
    c = _Fields(cluster, "cluster")
    server = c.text("server")
    if not server:
        raise ConfigError(f"{c.where}: no server")
    u = _Fields(user, "user") if user is not None else None
    authorization: str | None = None
    token_file: str | None = None
    if u is not None:
        token = u.text("token")
        token_file = u.path("tokenFile")
        username, password = u.text("username"), u.text("password")
        if token:
            authorization = f"Bearer {token}"
        elif username and password:
            basic = base64.b64encode(f"{username}:{password}".encode()).decode()
            authorization = f"Basic {basic}"
    tls = server.startswith("https")
    return ClusterConfig(
        server=server.rstrip("/"),
        ca_file=c.file("certificate-authority") if tls else None,
        insecure_skip_tls_verify=c.flag("insecure-skip-tls-verify"),
        tls_server_name=c.text("tls-server-name"),
        client_cert_file=u.file("client-certificate") if tls and u is not None else None,
        client_key_file=u.file("client-key") if tls and u is not None else None,
        authorization=authorization,
        token_file=token_file,
        proxy=c.text("proxy-url"),
        namespace=namespace,
        source=source,
    )


class _Fields:
    """Typed reads of one entry's fields, with errors that say where."""

    def __init__(self, entry: _Entry, kind: str) -> None:
        self.entry = entry
        self.where = f"kubeconfig {entry.origin} {kind}"

    def text(self, field: str) -> str | None:
        return _optional_str(self.entry.body, field, self.where)

    def flag(self, field: str) -> bool:
        value = self.entry.body.get(field, False)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.where}: {field} must be true or false")
        return value

    def path(self, field: str) -> str | None:
        """An existing file, relative to the directory of the entry's kubeconfig."""
        value = self.text(field)
        if not value:
            return None
        name = os.path.normpath(self.entry.origin.parent / value)
        if not Path(name).is_file():
            raise ConfigError(f"{self.where}: {field} {name}: no such file")
        return name

    def file(self, field: str) -> str | None:
        """``<field>-data`` (base64) written to a private file, else ``<field>`` (a path)."""
        data = self.text(f"{field}-data")
        if data:
            try:
                content = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise ConfigError(f"{self.where}: {field}-data is not base64") from None
            return _DATA_FILES.path(content)
        return self.path(field)


def _read(file: Path) -> Mapping[str, Any]:
    import yaml  # type: ignore[import-untyped]  # only kubeconfig users pay for it

    try:
        document = yaml.safe_load(file.read_bytes())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"kubeconfig {file}: {_first_line(exc)}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"kubeconfig {file}: not a kubeconfig (a YAML mapping)")
    return document


def _named(document: Mapping[str, Any], kind: str, field: str, file: Path) -> dict[str, _Entry]:
    items = document.get(kind) or []
    if not isinstance(items, list):
        raise ConfigError(f"kubeconfig {file}: {kind} must be a list")
    named: dict[str, _Entry] = {}
    for item in items:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"kubeconfig {file}: every entry of {kind} needs a name")
        body = item.get(field) or {}
        if not isinstance(body, dict):
            raise ConfigError(f"kubeconfig {file}: {kind} {name!r}: {field} must be a mapping")
        if name in named:
            raise ConfigError(f"kubeconfig {file}: {kind} {name!r} appears twice")
        named[name] = _Entry(body, file)
    return named


def _optional_str(body: Mapping[str, Any], field: str, where: str) -> str | None:
    value = body.get(field)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {field} must be a string")
    return value


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


DATA_FILES_PREFIX = "metashard-kubeconfig-"
"""``<prefix><pid>-<random>``: the private directory (0700) of a process's ``*-data`` files.
A process killed with SIGKILL leaves it behind; ``metashard run`` removes those of dead
processes (``manager.cli.rundir``)."""


class _DataFiles:
    """Private files holding ``*-data`` contents, one per distinct content, removed at exit."""

    def __init__(self) -> None:
        self._directory: str | None = None
        self._files: dict[str, str] = {}

    def path(self, content: bytes) -> str:
        digest = hashlib.sha256(content).hexdigest()
        if digest not in self._files:
            if self._directory is None:
                prefix = f"{DATA_FILES_PREFIX}{os.getpid()}-"
                self._directory = tempfile.mkdtemp(prefix=prefix)
                atexit.register(shutil.rmtree, self._directory, ignore_errors=True)
            name = os.path.join(self._directory, digest[:32])
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(content)
            self._files[digest] = name
        return self._files[digest]


_DATA_FILES = _DataFiles()


def load_with_kubernetes(path: str, *, context: str, namespace: str) -> ClusterConfig:
    """Resolve ``context`` through ``kubernetes.config``: what runs ``exec`` and
    ``auth-provider`` plugins, and refreshes the token they return."""
    try:
        # Imported here on purpose: large and slow to import, needed only for plugins.
        from kubernetes import client as k8s_client
        from kubernetes import config as kubernetes_config
    except ImportError as exc:  # pragma: no cover - kubernetes is a declared dependency
        raise ConfigError(f"kubeconfig plugins need the kubernetes package: {exc}") from exc
    k8s_config: Any = kubernetes_config  # untyped package
    configuration: Any = k8s_client.Configuration()
    try:
        k8s_config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except Exception as exc:  # the loader raises ConfigException, KeyError, ValueError, ...
        raise ConfigError(f"kubeconfig {path}: {exc}") from exc
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
        source=f"kubeconfig {path} context {context}",
    )
