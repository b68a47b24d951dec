"""CURVE keys of the worker link, read from a directory (a mounted Kubernetes Secret).

``--curve-keys DIR`` names a directory with some of these files, each holding one 32-byte
Curve25519 key as Z85 text (40 characters, as ZeroMQ's tools print them) or base64 (44):

- ``server.secret``: the coordinator's secret key. Required by the coordinator; workers
  without ``server.public`` derive the coordinator's public key from it.
- ``server.public``: the coordinator's public key, for workers.
- ``worker.secret``: the workers' secret key. Required by workers; the coordinator admits
  its public key.
- ``worker.public``: worker public keys the coordinator admits, one per line.

Two ways to deploy them:
- **Shared**: one Secret with ``server.secret`` and ``worker.secret`` mounted on both roles
  (what the Helm chart generates). Outsiders without the Secret cannot connect; a worker could
  impersonate the coordinator, but workers are this installation's own pods.
- **Separated**: the coordinator gets ``server.secret`` + ``worker.public``, workers get
  ``worker.secret`` + ``server.public`` (``metashard curve-keys DIR`` writes all four).

Every problem (a missing directory or file, a key of the wrong length or alphabet) is a
``CurveKeyError`` naming the file, never its content.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from pathlib import Path

import zmq
from zmq.utils import z85

SERVER_SECRET = "server.secret"
SERVER_PUBLIC = "server.public"
WORKER_SECRET = "worker.secret"
WORKER_PUBLIC = "worker.public"


class CurveKeyError(ValueError):
    """The key directory cannot be used; the message says which file and why."""


@dataclass(frozen=True, slots=True)
class ServerCurve:
    """The coordinator's key pair and the worker public keys it admits (all Z85)."""

    public: bytes
    secret: bytes
    admitted: frozenset[bytes]


@dataclass(frozen=True, slots=True)
class ClientCurve:
    """A worker's key pair and the coordinator's public key (all Z85)."""

    server_public: bytes
    public: bytes
    secret: bytes


def parse_key(text: str, *, source: str) -> bytes:
    """One key as Z85 bytes, from Z85 (40 characters) or base64 (44) text."""
    value = text.strip()
    raw: bytes | None = None
    if len(value) == 40:
        try:
            raw = z85.decode(value.encode("ascii"))
        except (ValueError, UnicodeEncodeError, KeyError, IndexError, OverflowError):
            raw = None
    elif len(value) == 44:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) != 32:
        raise CurveKeyError(
            f"{source}: not a 32-byte key (expected 40 characters of Z85 or 44 of base64)"
        )
    return z85.encode(raw)


def _read(directory: Path, name: str) -> str | None:
    path = directory / name
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CurveKeyError(f"{path}: cannot read it ({e.strerror})") from None


def _directory(directory: str | os.PathLike[str]) -> Path:
    path = Path(directory)
    if not path.is_dir():
        raise CurveKeyError(f"CURVE key directory {path} does not exist or is not a directory")
    return path


def _key(directory: Path, name: str) -> bytes | None:
    """The key in file ``name`` (None when the file is absent)."""
    text = _read(directory, name)
    return None if text is None else parse_key(text, source=str(directory / name))


def _secret(directory: Path, name: str, whose: str) -> bytes:
    """The secret key in file ``name``, which must exist."""
    secret = _key(directory, name)
    if secret is None:
        raise CurveKeyError(f"{directory / name} is missing: {whose} secret key")
    return secret


def server_keys(directory: str | os.PathLike[str]) -> ServerCurve:
    """What the coordinator needs: its key pair, and the worker keys to admit."""
    path = _directory(directory)
    secret = _secret(path, SERVER_SECRET, "the coordinator's")
    admitted: set[bytes] = set()
    worker_secret = _key(path, WORKER_SECRET)
    if worker_secret is not None:
        admitted.add(zmq.curve_public(worker_secret))
    publics = _read(path, WORKER_PUBLIC)
    for number, line in enumerate((publics or "").splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("#"):
            admitted.add(parse_key(line, source=f"{path / WORKER_PUBLIC} line {number}"))
    if not admitted:
        raise CurveKeyError(
            f"{path}: no worker key to admit (needs {WORKER_PUBLIC} or {WORKER_SECRET})"
        )
    return ServerCurve(zmq.curve_public(secret), secret, frozenset(admitted))


def client_keys(directory: str | os.PathLike[str]) -> ClientCurve:
    """What a worker needs: its key pair and the coordinator's public key."""
    path = _directory(directory)
    secret = _secret(path, WORKER_SECRET, "the workers'")
    server_public = _key(path, SERVER_PUBLIC)
    if server_public is None:
        server_secret = _key(path, SERVER_SECRET)
        if server_secret is None:
            raise CurveKeyError(
                f"{path}: no coordinator key (needs {SERVER_PUBLIC} or {SERVER_SECRET})"
            )
        server_public = zmq.curve_public(server_secret)
    return ClientCurve(server_public, zmq.curve_public(secret), secret)


def generate(directory: str | os.PathLike[str]) -> Path:
    """Write a new set of the four files (mode 0600) into ``directory`` (created 0700)."""
    path = Path(directory)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for role in ("server", "worker"):
        public, secret = zmq.curve_keypair()
        for name, value in ((f"{role}.secret", secret), (f"{role}.public", public)):
            target = path / name
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(value.decode("ascii") + "\n")
    return path
