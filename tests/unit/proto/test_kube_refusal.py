"""proto.kube.refusal: what a 403 refused and to whom, read from the API server's words."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest

from proto.kube.cluster import ClusterConfig
from proto.kube.errors import Forbidden, api_error
from proto.kube.refusal import Refusal, identity
from proto.kube.resources import Resource
from tests.unit.proto.kube_fake import load_transcript

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
THINGS = Resource("example.com", "v1", "things", "Thing", True)


def forbidden(message: str) -> Forbidden:
    body = {"kind": "Status", "code": 403, "reason": "Forbidden", "message": message}
    error = api_error(403, orjson.dumps(body))
    assert isinstance(error, Forbidden)
    return error


def recorded_403s(shared_dir: Path) -> list[dict[str, Any]]:
    steps = load_transcript(shared_dir, "pending/16-rbac-tokens.json")
    return [s for s in steps if s["response"]["status"] == 403]


def test_the_api_servers_denials_are_read_whole(shared_dir: Path) -> None:
    """Every authorization denial kube-apiserver v1.36 answered in the recorded transcript."""
    read = []
    for step in recorded_403s(shared_dir):
        message = step["response"]["body"]["message"]
        if "cannot" not in message or "path" in message:
            continue  # escalation checks and non-resource URLs: not requests of a controller
        read.append(Refusal.of(forbidden(message), verb="?", resource=CONFIGMAPS))
    assert (
        Refusal("list", "configmaps", "", "conf-rbac", "system:serviceaccount:conf-rbac:reader")
        in read
    )
    assert Refusal("list", "configmaps", "", None, "system:serviceaccount:conf-rbac:reader") in read
    assert (
        Refusal(
            "create",
            "serviceaccounts/token",
            "",
            "conf-rbac",
            "system:serviceaccount:conf-rbac:reader",
        )
        in read
    )
    assert (
        Refusal(
            "list", "deployments", "apps", "conf-rbac", "system:serviceaccount:conf-rbac:reader"
        )
        in read
    )
    assert all(r.verb != "?" and r.user for r in read)


@pytest.mark.parametrize(
    ("message", "what", "who"),
    [
        (
            'things.example.com is forbidden: User "system:serviceaccount:ms:metashard" cannot '
            'watch resource "things" in API group "example.com" at the cluster scope',
            "watch things.example.com at the cluster scope",
            "ServiceAccount ms/metashard",
        ),
        (
            'configmaps "c" is forbidden: User "alice" cannot patch resource "configmaps" in API '
            'group "" in the namespace "ns": RBAC: clusterrole.rbac.authorization.k8s.io '
            '"gone" not found',
            "patch configmaps in namespace ns",
            'User "alice"',
        ),
        (
            'things "t" is forbidden: unable to create new content in namespace ns because it '
            "is being terminated",
            "watch things.example.com at the cluster scope",
            "these credentials",
        ),
    ],
)
def test_what_was_refused_and_whom_to_grant(message: str, what: str, who: str) -> None:
    refusal = Refusal.of(forbidden(message), verb="watch", resource=THINGS)
    assert refusal.what == what
    assert refusal.who(None) == who
    assert refusal.who("ServiceAccount a/b") == "ServiceAccount a/b"


def jwt(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def test_a_service_accounts_token_says_whose_it_is(tmp_path: Path) -> None:
    token = jwt({"sub": "system:serviceaccount:ms:metashard", "aud": ["https://kubernetes"]})
    fixed = ClusterConfig(server="https://k", authorization=f"Bearer {token}")
    assert identity(fixed) == "ServiceAccount ms/metashard"
    path = tmp_path / "token"
    path.write_text(token + "\n")
    assert identity(ClusterConfig(server="https://k", token_file=str(path))) == (
        "ServiceAccount ms/metashard"
    )
    user = jwt({"sub": "alice@example.com"})  # an OIDC token
    for config in (
        ClusterConfig(server="https://k", authorization=f"Bearer {user}"),
        ClusterConfig(server="https://k", authorization="Bearer not-a-jwt"),
        ClusterConfig(server="https://k", authorization="Bearer a.!!!.c"),
        ClusterConfig(server="https://k", authorization="Basic YTpi"),
        ClusterConfig(server="https://k", token_file=str(tmp_path / "missing")),
        ClusterConfig(server="https://k"),
    ):
        assert identity(config) is None
