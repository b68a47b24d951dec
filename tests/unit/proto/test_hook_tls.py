"""TLS contexts for hooks: verification on, TLS 1.2 at least, one context per material."""

from __future__ import annotations

import ssl

import pytest

from proto.hooks.tls import TlsContexts, build_context
from tests.unit.proto.pki import Pki


def test_contexts_verify_and_refuse_tls_below_1_2(pki: Pki) -> None:
    for context in (
        build_context(None, None, None),
        build_context(pki.ca.read_text(), None, None),
        build_context(pki.ca.read_text(), pki.client_cert.read_text(), pki.client_key.read_text()),
    ):
        assert context.minimum_version == ssl.TLSVersion.TLSv1_2
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_bad_material_is_named_never_shown(pki: Pki) -> None:
    key = pki.client_key.read_text()
    with pytest.raises(ValueError, match="a certificate and its private key are both required"):
        build_context(None, pki.client_cert.read_text(), None)
    with pytest.raises(ValueError, match="clientTLS: the certificate and private key") as info:
        build_context(None, "garbage", key)
    assert key not in str(info.value)
    with pytest.raises(ValueError, match="caBundle: not a usable PEM"):
        build_context("nope", None, None)


def test_one_context_per_material_and_replaced_ones_are_handed_back(pki: Pki) -> None:
    replaced: list[ssl.SSLContext] = []
    contexts = TlsContexts(on_replaced=replaced.append)
    ca = pki.ca.read_text()
    first = contexts.get(("cc", "sync"), (ca, None, None))
    assert contexts.get(("cc", "finalize"), (ca, None, None)) is first
    plain = contexts.get(("cc", "sync"), (None, None, None))
    assert replaced == []  # finalize still uses the CA context
    contexts.get(("cc", "finalize"), (None, None, None))
    assert replaced == [first] and len(contexts) == 1
    contexts.forget(lambda key: True)
    assert replaced == [first, plain] and len(contexts) == 0
