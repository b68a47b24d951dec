"""Test PKI: a CA, a server certificate for 127.0.0.1 and a client certificate.

Generated at test time into a temporary directory (with ``cryptography`` when it is
importable, else the ``openssl`` command); no key is stored in the repository.
"""

from __future__ import annotations

import datetime
import importlib.util
import ipaddress
import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _pki_with_cryptography(directory: Path) -> Pki:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def issue(name: str, issuer: Any, issuer_key: Any, **kind: Any) -> tuple[Any, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer or subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        if kind.get("ca"):
            builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        if kind.get("ip"):
            san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(kind["ip"]))])
            builder = builder.add_extension(san, False)
        return builder.sign(issuer_key or key, hashes.SHA256()), key

    def write(name: str, cert: Any, key: Any) -> tuple[Path, Path]:
        cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return cert_path, key_path

    ca_cert, ca_key = issue("test-ca", None, None, ca=True)
    server_cert, server_key = issue("127.0.0.1", ca_cert.subject, ca_key, ip="127.0.0.1")
    client_cert, client_key = issue("admin", ca_cert.subject, ca_key)
    ca, _ = write("ca", ca_cert, ca_key)
    return Pki(
        ca, *write("server", server_cert, server_key), *write("client", client_cert, client_key)
    )


def _pki_with_openssl(directory: Path) -> Pki:
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-subj",
        "/CN=test-ca",
        "-days",
        "1",
    )
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name, cn, extra in (
        ("server", "127.0.0.1", ["-extfile", "san.ext"]),
        ("client", "admin", []),
    ):
        run("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")
        run(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", *extra,
        )  # fmt: skip
    return Pki(
        directory / "ca.crt",
        directory / "server.crt",
        directory / "server.key",
        directory / "client.crt",
        directory / "client.key",
    )


def server_tls(pki: Pki, *, require_client_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    ctx.load_cert_chain(pki.server_cert, pki.server_key)
    ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_NONE
    return ctx


def make_pki(tmp_path: Path) -> Pki:
    """A fresh PKI under ``tmp_path``; skips the test when no generator is available."""
    directory = tmp_path / "pki"
    directory.mkdir()
    if importlib.util.find_spec("cryptography") is not None:
        return _pki_with_cryptography(directory)
    if shutil.which("openssl"):
        return _pki_with_openssl(directory)
    pytest.skip("neither the cryptography package nor the openssl command is available")
