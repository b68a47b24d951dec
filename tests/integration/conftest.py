"""Integration fixtures: a client on a fresh embedded cluster, or on a real cluster.

- ``kube``: a ``Kube`` whose ``client`` talks to a fresh ``EmbeddedCluster`` (started with a
  bearer token, so authentication is exercised), or, when ``METASHARD_E2E_KUBECONFIG`` names
  a kubeconfig, to that real cluster. The same test code runs on both.
- ``namespace``: a fresh namespace for the test, deleted afterwards.
- ``kube.faults()`` returns the emulator's fault hooks and skips the test on a real cluster;
  ``kube.embedded`` tells which one runs.
- ``@pytest.mark.embedded_settings(bookmark_interval=0.5, ...)`` passes ``Settings`` to the
  embedded cluster (a real cluster keeps its own).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from loadtest.apiserver import EmbeddedCluster, Settings
from loadtest.apiserver.faults import FaultControl
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.cluster import ClusterConfig
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.kube.session import Session

KUBECONFIG_ENV = "METASHARD_E2E_KUBECONFIG"
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "embedded_settings(**kwargs): Settings for the embedded cluster of the test"
    )


@dataclass
class Kube:
    """One cluster and an open client to it."""

    config: ClusterConfig
    session: Session
    client: Client
    cluster: EmbeddedCluster | None

    @property
    def embedded(self) -> bool:
        return self.cluster is not None

    def faults(self) -> FaultControl:
        """The emulator's fault hooks; skips the test on a real cluster."""
        if self.cluster is None:
            pytest.skip("needs the embedded cluster's fault hooks")
        return self.cluster.faults

    def require_embedded(self, why: str) -> EmbeddedCluster:
        if self.cluster is None:
            pytest.skip(why)
        return self.cluster


def _settings(request: pytest.FixtureRequest) -> Settings:
    marker = request.node.get_closest_marker("embedded_settings")
    return Settings(**marker.kwargs) if marker is not None else Settings()


@pytest_asyncio.fixture
async def kube(request: pytest.FixtureRequest) -> AsyncIterator[Kube]:
    kubeconfig = os.environ.get(KUBECONFIG_ENV)
    if kubeconfig:
        config = load_config(kubeconfig)
        async with Session(config, qps=50, burst=100) as session:
            yield Kube(config, session, Client(session), None)
        return
    async with EmbeddedCluster(token=secrets.token_hex(8), settings=_settings(request)) as cluster:
        config = load_config(str(cluster.kubeconfig))
        async with Session(config, qps=0) as session:
            yield Kube(config, session, Client(session), cluster)


@pytest_asyncio.fixture
async def namespace(kube: Kube) -> AsyncIterator[str]:
    name = f"it-{uuid.uuid4().hex[:10]}"
    await kube.client.create(NAMESPACES, {"metadata": {"name": name}})
    try:
        yield name
    finally:
        with contextlib.suppress(errors.NotFound):
            await kube.client.delete(NAMESPACES, name, propagation_policy="Background")
