"""TLS contexts for hook calls, built from resolved connection material.

- ``build_context(ca_bundle, client_cert, client_key)`` returns a client ``SSLContext`` that
  verifies the server's certificate and host name, with TLS 1.2 as the minimum version (as
  Metacontroller sets it): against the PEM roots in ``ca_bundle`` when given, else the system
  trust store; presenting the PEM client certificate and key when given. Bad material raises
  ``ValueError`` saying which part is wrong, never its content.
- The client key never touches the disk where the platform allows: OpenSSL loads it from an
  anonymous in-memory file (``memfd_create``); elsewhere from a private temporary file that
  is removed at once.
- ``TlsContexts`` keeps one context per distinct material, so connections pool per material
  (``proto.runtime.http1``) and a context is built once, not per call. When the material of a key
  (a controller's hook) changes, the context it replaces is handed to ``on_replaced`` (the
  HTTP client discards its idle connections).
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Callable, Hashable, Iterator

Material = tuple[str | None, str | None, str | None]
"""(CA bundle PEM, client certificate PEM, client key PEM)."""


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A path that reads ``data`` for as long as the block runs, then is gone."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("metashard-hook-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="metashard-tls-") as directory:
        path = os.path.join(directory, "client.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        yield path


def build_context(
    ca_bundle: str | None, client_cert: str | None, client_key: str | None
) -> ssl.SSLContext:
    """A verifying client context with TLS 1.2 at least (see the module docstring)."""
    if ca_bundle is None:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies; only the given roots
        try:
            context.load_verify_locations(cadata=ca_bundle)
        except (ssl.SSLError, ValueError) as err:
            raise ValueError(
                f"caBundle: not a usable PEM certificate bundle ({_reason(err)})"
            ) from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if (client_cert is None) != (client_key is None):
        raise ValueError("clientTLS: a certificate and its private key are both required")
    if client_cert is not None and client_key is not None:
        pem = f"{client_cert.strip()}\n{client_key.strip()}\n".encode()
        try:
            with _private_file(pem) as path:
                context.load_cert_chain(path)
        except (ssl.SSLError, ValueError) as err:
            raise ValueError(
                f"clientTLS: the certificate and private key do not load ({_reason(err)})"
            ) from None
    return context


def _reason(err: Exception) -> str:
    reason = getattr(err, "reason", None)
    return str(reason) if reason else type(err).__name__


class TlsContexts:
    """One context per material; the context last used by each key is remembered."""

    def __init__(self, *, on_replaced: Callable[[ssl.SSLContext], None] | None = None) -> None:
        self._by_material: dict[Material, ssl.SSLContext] = {}
        self._by_key: dict[Hashable, Material] = {}
        self._on_replaced = on_replaced

    def get(self, key: Hashable, material: Material) -> ssl.SSLContext:
        """The context for ``material``; raises ``ValueError`` for bad material."""
        context = self._by_material.get(material)
        if context is None:
            context = self._by_material[material] = build_context(*material)
        previous = self._by_key.get(key)
        self._by_key[key] = material
        if previous is not None and previous != material:
            self._release(previous)
        return context

    def forget(self, matches: Callable[[Hashable], bool]) -> None:
        """Drop the keys that match, and the contexts no key uses any more."""
        for key in [k for k in self._by_key if matches(k)]:
            self._release(self._by_key.pop(key))

    def _release(self, material: Material) -> None:
        if material in self._by_key.values():
            return
        context = self._by_material.pop(material, None)
        if context is not None and self._on_replaced is not None:
            self._on_replaced(context)

    def __len__(self) -> int:
        return len(self._by_material)
