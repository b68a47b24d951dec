"""Addresses of the operations endpoints and the checks made before anything binds them.

- Metacontroller's forms: ``:9999`` (all interfaces), ``host:port`` (port 0-65535; 0 picks a
  free port), ``[::1]:8081``, ``0`` or empty to disable; and ``unix:PATH``, a Unix socket
  (what ``metashard run`` gives its workers).
- ``check_bindable`` binds and releases an address now, so that a port in use fails before
  anything starts.
- Cheap to import (no aiohttp): command lines check addresses before the heavier modules load.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass

from proto.runtime.startup import StartupError

# sun_path holds 108 bytes on Linux, 104 on macOS and the BSDs, with the final NUL.
UNIX_PATH_MAX = 107 if sys.platform.startswith("linux") else 103


@dataclass(frozen=True, slots=True)
class TcpAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class UnixAddress:
    path: str

    def __str__(self) -> str:
        return f"unix:{self.path}"


Address = TcpAddress | UnixAddress


@dataclass(frozen=True, slots=True)
class Peer:
    """A local process whose metrics this one serves too: its label value and Unix socket."""

    name: str
    socket: str


def parse_address(address: str) -> Address | None:
    """``":9999"`` -> all interfaces, port 9999; ``"0"``/``""`` -> None (disabled).

    Raises ``ValueError`` for anything else than ``[HOST]:PORT`` (port 0-65535) or
    ``unix:PATH``.
    """
    if address in ("", "0"):
        return None
    if address.startswith("unix:"):
        if not address[5:]:
            raise ValueError(f"address {address!r}: expected unix:PATH")
        return UnixAddress(address[5:])
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(
            f"address {address!r}: expected [HOST]:PORT with a port from 0 to 65535, "
            "or 0 to disable"
        )
    return TcpAddress(host.strip("[]") or "0.0.0.0", int(port))


def check_bindable(address: Address | None, *, what: str) -> None:
    """Bind and release ``address`` now, so that a port in use fails before anything starts.

    Raises ``StartupError`` naming ``what`` (e.g. ``--metrics-address``) and the reason.
    """
    if isinstance(address, TcpAddress):
        try:
            socket.create_server((address.host, address.port)).close()
        except OSError as e:
            raise StartupError(f"{what} {address}: cannot listen: {e.strerror or e}") from e
    elif isinstance(address, UnixAddress):
        folder = os.path.dirname(address.path) or "."
        if not os.path.isdir(folder):
            raise StartupError(f"{what} {address}: no such directory {folder}")
        if len(os.fsencode(address.path)) > UNIX_PATH_MAX:
            raise StartupError(
                f"{what} {address}: a Unix socket path is limited to {UNIX_PATH_MAX} bytes "
                "(use a shorter TMPDIR)"
            )
