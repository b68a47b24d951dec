"""ServiceAccount tokens: signing, verification and the TokenRequest answer."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtest.apiserver import errors
from loadtest.apiserver.tokens import API_AUDIENCE, TokenIssuer, token_request, with_defaults

ACCOUNT = {"metadata": {"name": "app", "namespace": "ns", "uid": "u-1"}}


def _issue(issuer: TokenIssuer, audiences: list[str], *, now: float = 1000.0) -> str:
    token, _ = issuer.issue(
        namespace="ns", name="app", uid="u-1", audiences=audiences, seconds=600, now=now
    )
    return token


def test_a_token_verifies_with_its_claims_until_it_expires() -> None:
    issuer = TokenIssuer()
    token = _issue(issuer, [API_AUDIENCE])
    claims = issuer.verify(token, now=1000.0)
    assert claims is not None
    assert claims["sub"] == "system:serviceaccount:ns:app"
    assert claims["kubernetes.io"]["serviceaccount"] == {"name": "app", "uid": "u-1"}
    assert issuer.verify(token, now=1599.0) is not None
    assert issuer.verify(token, now=1600.0) is None
    assert issuer.verify(token, now=999.0) is None


def test_foreign_audience_other_cluster_and_garbage_are_refused() -> None:
    issuer = TokenIssuer()
    assert issuer.verify(_issue(issuer, ["https://audience.example.com"]), now=1000.0) is None
    assert TokenIssuer().verify(_issue(issuer, [API_AUDIENCE]), now=1000.0) is None
    assert issuer.verify("not.a-token", now=1000.0) is None


@given(st.integers(0, 200), st.sampled_from("abcdefXYZ0123-_"))
def test_any_changed_character_breaks_the_signature(position: int, char: str) -> None:
    issuer = TokenIssuer(key=b"k" * 32)
    token = _issue(issuer, [API_AUDIENCE])
    index = position % len(token)
    changed = token[:index] + char + token[index + 1 :]
    if changed != token:
        # the signature is compared as text over the exact header.payload text
        assert issuer.verify(changed, now=1000.0) is None


def test_token_request_defaults_and_validation() -> None:
    issuer = TokenIssuer()
    answer = token_request(
        issuer, ACCOUNT, {"spec": {"audiences": None, "expirationSeconds": None}}
    )
    assert answer["spec"] == {
        "audiences": [API_AUDIENCE],
        "expirationSeconds": 3600,
        "boundObjectRef": None,
    }
    assert answer["metadata"]["uid"] == "u-1"
    payload = answer["status"]["token"].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["exp"] - claims["iat"] == 3600
    with pytest.raises(errors.ApiError) as short:
        token_request(issuer, ACCOUNT, {"spec": {"expirationSeconds": 60}})
    assert short.value.code == 422
    assert short.value.message == (
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid '
        "value: 60: may not specify a duration less than 10 minutes"
    )
    with pytest.raises(errors.ApiError) as bound:
        token_request(issuer, ACCOUNT, {"spec": {"boundObjectRef": {"kind": "Pod", "name": "p"}}})
    assert bound.value.code == 400


@pytest.mark.parametrize(
    ("body", "spec"),
    [
        ({}, {"expirationSeconds": 3600}),
        ({"spec": None}, {"expirationSeconds": 3600}),
        ({"spec": {"expirationSeconds": None}}, {"expirationSeconds": 3600}),
        ({"spec": {"expirationSeconds": 600}}, {"expirationSeconds": 600}),
        ({"spec": {"audiences": ["a"]}}, {"audiences": ["a"], "expirationSeconds": 3600}),
    ],
)
def test_decoding_defaults_the_expiration_but_not_the_audiences(
    body: dict[str, object], spec: dict[str, object]
) -> None:
    assert with_defaults(body) == {**body, "spec": spec}
