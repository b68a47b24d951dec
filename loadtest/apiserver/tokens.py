"""ServiceAccount tokens: the TokenRequest API and the bearer tokens it issues.

- ``TokenIssuer.issue`` signs a JWT (``HS256`` with a random key per cluster, so tokens of
  one emulator mean nothing to another) carrying the claims kube-apiserver puts in bound
  tokens: ``iss``, ``sub`` (``system:serviceaccount:<ns>:<name>``), ``aud``, ``iat``,
  ``nbf``, ``exp``, ``jti`` and ``kubernetes.io: {namespace, serviceaccount: {name, uid}}``.
- ``TokenIssuer.verify`` returns the claims of a token this issuer signed that is not
  expired and names one of the API server's audiences, else None. Whether the
  ServiceAccount still exists with that uid is the authenticator's check.
- ``token_request`` answers ``POST .../serviceaccounts/<name>/token`` as the real server:
  audiences default to the API server's, ``expirationSeconds`` to 3600 and must be at least
  600 (422 otherwise); the response echoes the spec with ``boundObjectRef: null`` and a
  status of ``{token, expirationTimestamp}`` (the caller adds the managedFields the
  request's create recorded, of the body ``with_defaults`` gives). Binding a token to an object
  (``boundObjectRef``) is not supported and refused with 400, never ignored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from loadtest.apiserver import errors
from loadtest.apiserver.rbac import service_account_user
from proto.api.validation import ErrorType, FieldError

API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_SECONDS = 3600
MIN_SECONDS = 600
MAX_SECONDS = 1 << 32
GROUP = "authentication.k8s.io"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenIssuer:
    """Signs and verifies the cluster's ServiceAccount tokens."""

    def __init__(self, *, key: bytes | None = None, audiences: tuple[str, ...] = (API_AUDIENCE,)):
        self._key = key or os.urandom(32)
        self.audiences = audiences

    def _sign(self, signing_input: str) -> str:
        return _b64(hmac.new(self._key, signing_input.encode(), hashlib.sha256).digest())

    def issue(
        self,
        *,
        namespace: str,
        name: str,
        uid: str,
        audiences: list[str],
        seconds: int,
        now: float | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """A signed token and its claims."""
        issued = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            "aud": audiences,
            "exp": issued + seconds,
            "iat": issued,
            "iss": ISSUER,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
            "nbf": issued,
            "sub": service_account_user(namespace, name),
        }
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signing_input = f"{header}.{payload}"
        return f"{signing_input}.{self._sign(signing_input)}", claims

    def verify(self, token: str, *, now: float | None = None) -> dict[str, Any] | None:
        """The claims of a valid token for one of the API audiences, else None."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        if not hmac.compare_digest(self._sign(f"{parts[0]}.{parts[1]}"), parts[2]):
            return None
        try:
            claims = json.loads(_unb64(parts[1]))
        except ValueError:
            return None
        if not isinstance(claims, dict):
            return None
        moment = time.time() if now is None else now
        exp, nbf = claims.get("exp"), claims.get("nbf", 0)
        if not isinstance(exp, int) or not isinstance(nbf, int) or not nbf <= moment < exp:
            return None
        audiences = claims.get("aud")
        if not isinstance(audiences, list) or not set(audiences) & set(self.audiences):
            return None
        return claims


def with_defaults(body: dict[str, Any]) -> dict[str, Any]:
    """A TokenRequest body as the API server decodes it (``SetDefaults_TokenRequestSpec``):
    ``spec.expirationSeconds`` 3600 when absent or null. The audiences are filled in later,
    by the endpoint, so a request that leaves them out does not own them."""
    spec = body.get("spec")
    spec = dict(spec) if isinstance(spec, dict) else {}
    if spec.get("expirationSeconds") is None:  # Go's nil pointer
        spec["expirationSeconds"] = DEFAULT_SECONDS
    return {**body, "spec": spec}


def token_request(
    issuer: TokenIssuer, account: dict[str, Any], body: dict[str, Any]
) -> dict[str, Any]:
    """The TokenRequest response for ``account`` (the stored ServiceAccount)."""
    spec = with_defaults(body)["spec"]
    meta = account["metadata"]
    audiences = spec.get("audiences") or list(issuer.audiences)
    seconds = spec["expirationSeconds"]
    problems = []
    if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
        raise errors.bad_request("spec.audiences must be a list of strings")
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise errors.bad_request("spec.expirationSeconds must be an integer")
    if seconds < MIN_SECONDS:
        problems.append(
            FieldError(
                ErrorType.INVALID,
                "spec.expirationSeconds",
                "may not specify a duration less than 10 minutes",
                seconds,
            )
        )
    if seconds > MAX_SECONDS:
        problems.append(
            FieldError(
                ErrorType.INVALID,
                "spec.expirationSeconds",
                "may not specify a duration larger than 2^32 seconds",
                seconds,
            )
        )
    if problems:
        raise errors.invalid("TokenRequest", GROUP, "", problems)
    if spec.get("boundObjectRef") is not None:
        raise errors.bad_request(
            "the embedded cluster does not bind tokens to objects: leave spec.boundObjectRef "
            "unset (the token is bound to the ServiceAccount only)"
        )
    now = time.time()
    token, claims = issuer.issue(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        audiences=audiences,
        seconds=seconds,
        now=now,
    )
    return {
        "kind": "TokenRequest",
        "apiVersion": f"{GROUP}/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "creationTimestamp": _format(now),
        },
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": None},
        "status": {"token": token, "expirationTimestamp": _format(claims["exp"])},
    }


def _format(moment: float) -> str:
    return datetime.fromtimestamp(int(moment), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
