"""The value every API client is built from: ``ClusterConfig``, one API server and its credentials.

``proto.kube.config`` finds one (kubeconfig, in-cluster); callers may also build one directly (e.g.
for a local emulator: ``ClusterConfig(server="http://127.0.0.1:8080")``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from proto.kube.errors import ConfigError
from proto.runtime.redact import masked_url


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
            shown = masked_url(self.server)
            raise ConfigError(f"server must be an http:// or https:// URL, got {shown!r}")
        if (self.client_cert_file is None) != (self.client_key_file is None):
            raise ConfigError("a client certificate needs both a certificate and a key file")

    def __repr__(self) -> str:  # never print credentials
        auth = "token-file" if self.token_file else ("set" if self.authorization else "none")
        server = masked_url(self.server)
        return f"ClusterConfig(server={server!r}, source={self.source!r}, auth={auth})"
