"""The embedded cluster's kubeconfig reads back with the token it was written with."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.apiserver.cluster import write_kubeconfig
from proto.kube.kubeconfig import load_kubeconfig

URL = "http://127.0.0.1:6443"


@pytest.mark.parametrize(
    "token",
    [
        "5369127934860081",  # digits only: a bare YAML scalar would be an integer
        "0b101",  # a YAML 1.1 binary integer
        "1.5e3",  # a float
        "true",  # a boolean
        "null",  # nothing
        "~",
        "abc: def",  # a mapping
        "# not a comment",
        '"quoted" and \\ back',
        "ünïcode",
        "6d3f0c2e9a41b7f8",  # what secrets.token_hex(8) usually gives
    ],
)
def test_the_token_reads_back_as_the_same_string(tmp_path: Path, token: str) -> None:
    path = tmp_path / "kubeconfig"
    write_kubeconfig(path, URL, token)
    config = load_kubeconfig(str(path))
    assert config.server == URL
    assert config.authorization == f"Bearer {token}"


def test_no_token_means_no_credentials(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    write_kubeconfig(path, URL, None)
    assert load_kubeconfig(str(path)).authorization is None
