"""End-to-end fixtures: real metashard processes on the embedded cluster, or on a real one.

- ``cluster``: the kubeconfig of an embedded cluster started once per session as its own
  process, or of the real cluster named by ``METASHARD_E2E_KUBECONFIG``
  (``cluster_kubeconfig``, for a module that needs its own cluster). The
  ``metacontroller.k8s.io`` CRDs and the test CRD ``things.e2e.metashard.io`` (namespaced,
  status subresource) are installed once.
- ``kube``: an open client (User-Agent ``metashard-e2e``: its writes are recorded under a
  field manager of their own, as a user's tool, not as metashard's);
  ``namespace``: a fresh namespace per test, deleted afterwards.
- ``procs``: a ``harness.Processes`` for the test's processes, all stopped at the end (their
  logs are printed when the test fails).
- ``hooks``: a programmable hook server (``tests.e2e.hookserver``) for the module.
- ``stack``: one coordinator and two workers with the built-in reconcilers, for the module,
  writing children with the module's ``apply_strategy`` (``dynamic-apply`` unless the module
  parametrizes it: ``pytestmark = BOTH_APPLY_STRATEGIES`` runs each of its tests under both,
  one stack per strategy).
- ``faults``: the embedded cluster's fault hooks (over its admin HTTP endpoints); a test that
  needs them is skipped on a real cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from loadtest.apiserver.background import ClusterProcess, HttpFaults
from loadtest.apiserver.faults import FaultControl
from loadtest.dev.crds import install, simple_crd
from proto.api.crds import load_crds
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.kube.session import Session
from tests.e2e.harness import Processes
from tests.e2e.hookserver import HookServer

KUBECONFIG_ENV = "METASHARD_E2E_KUBECONFIG"
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
E2E_USER_AGENT = "metashard-e2e/1.0"
APPLY_STRATEGIES = ("dynamic-apply", "server-side-apply")
BOTH_APPLY_STRATEGIES = pytest.mark.parametrize(
    "apply_strategy", APPLY_STRATEGIES, indirect=True, scope="module"
)
THINGS_CRD = simple_crd("e2e.metashard.io", "Thing")
PLAIN_CRD = simple_crd("e2e.metashard.io", "Plain", status=False)  # no status subresource


async def _install(kubeconfig: str) -> None:
    async with Session(load_config(kubeconfig), qps=0) as session:
        await install(Client(session), [*load_crds(), THINGS_CRD, PLAIN_CRD])


@contextlib.contextmanager
def cluster_kubeconfig(*, kubelet: bool = False) -> Iterator[str]:
    """The kubeconfig of the real cluster named by ``METASHARD_E2E_KUBECONFIG``, or of a new
    embedded cluster (with the fake kubelet when ``kubelet``) stopped on exit; the CRDs the
    tests need installed either way."""
    real = os.environ.get(KUBECONFIG_ENV)
    if real:
        asyncio.run(_install(real))
        yield real
        return
    process = ClusterProcess(kubelet=kubelet).start()
    try:
        asyncio.run(_install(str(process.kubeconfig)))
        yield str(process.kubeconfig)
    finally:
        process.stop()


@pytest.fixture(scope="session")
def cluster() -> Iterator[str]:
    with cluster_kubeconfig() as kubeconfig:
        yield kubeconfig


@pytest.fixture
def faults(cluster: str) -> Iterator[FaultControl]:
    if os.environ.get(KUBECONFIG_ENV):
        pytest.skip("needs the embedded cluster's fault hooks")
    hooks = HttpFaults(load_config(cluster).server)
    yield hooks
    hooks.clear()


@pytest_asyncio.fixture
async def kube(cluster: str) -> AsyncIterator[Client]:
    async with Session(load_config(cluster), qps=0, user_agent=E2E_USER_AGENT) as session:
        yield Client(session)


@pytest_asyncio.fixture
async def namespace(kube: Client) -> AsyncIterator[str]:
    name = f"e2e-{secrets.token_hex(4)}"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    with contextlib.suppress(errors.NotFound):
        await kube.delete(NAMESPACES, name)


@pytest.fixture
def procs(cluster: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Processes]:
    processes = Processes(kubeconfig=cluster, workdir=tmp_path)
    yield processes
    processes.close()
    report = request.node.stash.get(_REPORT, None)
    if report is not None and report.failed:
        print(processes.logs())


@pytest.fixture(scope="module")
def hooks() -> Iterator[HookServer]:
    server = HookServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def apply_strategy(request: pytest.FixtureRequest) -> str:
    """The ``--apply-strategy`` of the module's ``stack`` (see the module docstring)."""
    return str(getattr(request, "param", APPLY_STRATEGIES[0]))


def start_stack(
    cluster: str, workdir: Path, apply_strategy: str, env: dict[str, str] | None = None
) -> Processes:
    """A coordinator and two workers (``w-a``, ``w-b``) under ``apply_strategy``."""
    processes = Processes(kubeconfig=cluster, workdir=workdir, env=env or {})
    processes.coordinator()
    strategy = ["--apply-strategy", apply_strategy]
    processes.worker("w-a", extra=strategy)
    processes.worker("w-b", extra=strategy)
    return processes


@pytest.fixture(scope="module")
def stack(
    cluster: str, tmp_path_factory: pytest.TempPathFactory, apply_strategy: str
) -> Iterator[Processes]:
    processes = start_stack(cluster, Path(tmp_path_factory.mktemp("stack")), apply_strategy)
    yield processes
    processes.close()


_REPORT = pytest.StashKey[pytest.TestReport]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_REPORT] = report
    return report
