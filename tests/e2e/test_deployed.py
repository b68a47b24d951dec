"""The Helm chart as deployed: its objects applied, its containers' command lines run.

The chart is rendered offline (``tests.chart.render``); its ServiceAccount, RBAC objects and
CURVE Secret are applied to a cluster that authorizes with RBAC (the embedded cluster in RBAC
mode, or the real cluster given ``METASHARD_E2E_KUBECONFIG``). Then two coordinators and
three workers are started with exactly the command lines and environment of the rendered
containers (as the kubelet would expand them for pods named like the Deployment's and the
StatefulSet's), authenticated as the chart's ServiceAccount with a token from the TokenRequest
API. Only what a machine is not a cluster for is mapped: the Secret's files are written to a
directory that stands for the mount path, the listen ports are free local ports, and the
coordinator's Service name resolves to 127.0.0.1.

A CompositeController (its child type rolling, so ControllerRevisions are watched and
written too) must converge, the workers are scaled 3 -> 5 -> 2 as a StatefulSet
would (pods added with the next ordinals, removed highest first), and the API server must
have refused nothing the ServiceAccount asked (a missing RBAC rule fails the test). It runs
with the chart's default ``*/*/*`` rules and with the least-privilege rules that
``metashard rbac`` prints for the controller.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import secrets
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml  # type: ignore[import-untyped]

from loadtest.apiserver.background import ClusterProcess
from loadtest.apiserver.cluster import write_kubeconfig
from loadtest.dev.crds import install, simple_crd
from loadtest.dev.processes import REPO, free_port
from manager.cli import rbac as rbac_command
from proto.api.crds import load_crds
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.kube.session import Session
from tests.chart.render import REQUIRED, Container, deployed, render
from tests.e2e.harness import eventually
from tests.e2e.hookserver import HookServer

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

KUBECONFIG_ENV = "METASHARD_E2E_KUBECONFIG"
RELEASE = "ms"
FULLNAME = "ms-metashard"
THINGS = Resource("e2e.metashard.io", "v1", "things", "Thing", namespaced=True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
CCS = Resource(
    "metacontroller.k8s.io",
    "v1alpha1",
    "compositecontrollers",
    "CompositeController",
    namespaced=False,
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
REVISIONS = Resource(
    "metacontroller.k8s.io",
    "v1alpha1",
    "controllerrevisions",
    "ControllerRevision",
    namespaced=True,
)
APPLIED_KINDS = {
    "ServiceAccount",
    "Secret",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
}
PARENTS = 12


@pytest.fixture(scope="module")
def rbac_cluster() -> Iterator[tuple[str, ClusterProcess | None]]:
    """(admin kubeconfig, the embedded cluster in RBAC mode or None on a real cluster)."""
    real = os.environ.get(KUBECONFIG_ENV)
    if real:
        yield real, None
        return
    process = ClusterProcess(rbac=True).start()
    try:
        yield str(process.kubeconfig), process
    finally:
        process.stop()


@pytest_asyncio.fixture
async def admin(rbac_cluster: tuple[str, ClusterProcess | None]) -> AsyncIterator[Client]:
    async with Session(load_config(rbac_cluster[0]), qps=0) as session:
        client = Client(session)
        await install(client, [*load_crds(), simple_crd("e2e.metashard.io", "Thing")])
        yield client


def controller_object(name: str, hooks: HookServer) -> dict[str, Any]:
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": name},
        "spec": {
            "generateSelector": True,
            "parentResource": {
                "apiVersion": "e2e.metashard.io/v1",
                "resource": "things",
                "labelSelector": {"matchLabels": {"deployed": name}},
            },
            "childResources": [
                {
                    "apiVersion": "v1",
                    "resource": "configmaps",
                    "updateStrategy": {"method": "RollingInPlace"},
                }
            ],
            "hooks": {"sync": {"webhook": {"url": hooks.url(name)}}},
        },
    }


async def create_things(admin: Client, namespace: str, controller: str, names: list[str]) -> None:
    """Things selected by ``controller``'s label selector."""
    for parent in names:
        labels = {"deployed": controller}
        metadata = {"name": parent, "namespace": namespace, "labels": labels}
        await admin.create(
            THINGS, {"apiVersion": "e2e.metashard.io/v1", "kind": "Thing", "metadata": metadata}
        )


def least_privilege_values(controller: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """What ``metashard rbac --output values`` prints for ``controller``."""
    path = tmp_path / "controller.yaml"
    path.write_text(yaml.safe_dump(controller))
    out = io.StringIO()
    assert rbac_command.main([str(path), "--no-related", "--output", "values"], out=out) == 0
    values: dict[str, Any] = yaml.safe_load(out.getvalue())
    return values


async def apply(admin: Client, objects: list[dict[str, Any]], namespace: str) -> None:
    discovery = admin.discovery
    for obj in objects:
        if obj["kind"] not in APPLIED_KINDS:
            continue
        resource = await discovery.resolve(obj["apiVersion"], kind=obj["kind"])
        ns = namespace if resource.namespaced else None
        try:
            await admin.create(resource, obj, namespace=ns)
        except errors.AlreadyExists:  # a cluster-scoped object of an earlier run: replace it
            current = await admin.get(resource, obj["metadata"]["name"], namespace=ns)
            body = {**obj, "metadata": {**obj["metadata"], **_version(current)}}
            await admin.replace(resource, body, namespace=ns)


def _version(obj: dict[str, Any]) -> dict[str, str]:
    return {"resourceVersion": obj["metadata"]["resourceVersion"]}


async def service_account_token(admin: Client, namespace: str, name: str) -> str:
    answer = await admin.session.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body=json.dumps(
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            }
        ).encode(),
    )
    token: str = answer.json()["status"]["token"]
    return token


class Deployment:
    """The chart's pods as local processes."""

    def __init__(self, objects: list[dict[str, Any]], namespace: str, workdir: Path) -> None:
        self.roles = deployed(objects)
        self.namespace = namespace
        self.workdir = workdir
        self.link_port = free_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.keys = workdir / "curve"
        self.keys.mkdir(mode=0o700)
        secret = next(
            o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"].endswith("curve")
        )
        for name, value in secret["data"].items():
            (self.keys / name).write_bytes(base64.b64decode(value))

    def command(self, container: Container, pod: str) -> tuple[list[str], dict[str, str]]:
        line = container.command_line(pod_name=pod, namespace=self.namespace)
        mounts = container.volume_mounts()
        (curve_path,) = (p for p, v in mounts.items() if "secret" in v or "projected" in v)
        mapped: list[str] = []
        for arg in line:
            arg = arg.replace(curve_path, str(self.keys))
            arg = arg.replace("tcp://0.0.0.0:7070", f"tcp://127.0.0.1:{self.link_port}")
            arg = arg.replace(
                f"tcp://{FULLNAME}-coordinator:7070", f"tcp://127.0.0.1:{self.link_port}"
            )
            if arg in (":9999", ":8081"):
                arg = f"127.0.0.1:{free_port()}"
            mapped.append(arg)
        assert mapped[0] == "metashard"
        env = container.environment(pod_name=pod, namespace=self.namespace)
        return [sys.executable, "-m", "manager.cli", *mapped[1:]], env

    def start(self, container: Container, pod: str, kubeconfig: Path) -> None:
        argv, env = self.command(container, pod)
        log = (self.workdir / f"{pod}.log").open("ab")
        self.procs[pod] = subprocess.Popen(
            argv,
            cwd=REPO,
            env={**os.environ, **env, "KUBECONFIG": str(kubeconfig), "PYTHONPATH": str(REPO)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self, pod: str) -> None:
        proc = self.procs.pop(pod)
        proc.terminate()
        proc.wait(20)

    def close(self) -> None:
        for pod in list(self.procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.stop(pod)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.stem}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.workdir.glob("*.log"))
        )


def denials(process: ClusterProcess | None, user: str) -> list[dict[str, str]]:
    if process is None:
        return []  # a real cluster's 403s show up as errors in the processes' behaviour
    with urllib.request.urlopen(f"{process.url}/_emulator/rbac/denials", timeout=10) as r:
        found: list[dict[str, str]] = json.loads(r.read())["denials"]
    return [d for d in found if d.get("user") == user]


@pytest.mark.parametrize("rules", ["chart default", "metashard rbac"])
async def test_the_chart_as_deployed_runs_a_controller_and_scales(
    rules: str,
    rbac_cluster: tuple[str, ClusterProcess | None],
    admin: Client,
    hooks: HookServer,
    tmp_path: Path,
) -> None:
    namespace = f"deployed-{secrets.token_hex(3)}"
    name = f"deployed-{secrets.token_hex(3)}"
    controller = controller_object(name, hooks)
    hooks.program(
        name,
        lambda _, request: {
            "status": {"seen": True},
            "children": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": request["parent"]["metadata"]["name"]},
                    "data": {"from": "deployed"},
                }
            ],
        },
    )
    values = {} if rules == "chart default" else least_privilege_values(controller, tmp_path)
    objects = render({**REQUIRED, **values}, name=RELEASE, namespace=namespace)
    await admin.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    deployment = Deployment(objects, namespace, tmp_path)
    try:
        await apply(admin, objects, namespace)
        account = next(o for o in objects if o["kind"] == "ServiceAccount")["metadata"]["name"]
        token = await service_account_token(admin, namespace, account)
        kubeconfig = tmp_path / "serviceaccount-kubeconfig"
        admin_config = load_config(rbac_cluster[0])
        write_kubeconfig(kubeconfig, admin_config.server, token, ca_file=admin_config.ca_file)
        for i in range(2):
            deployment.start(
                deployment.roles.coordinator, f"{FULLNAME}-coordinator-{i}", kubeconfig
            )
        workers = [f"{FULLNAME}-worker-{i}" for i in range(3)]
        for pod in workers:
            deployment.start(deployment.roles.worker, pod, kubeconfig)
        await admin.create(CCS, controller)
        parents = [f"p{i}" for i in range(PARENTS)]
        await create_things(admin, namespace, name, parents)

        async def converged(expected: set[str]) -> bool:
            listed = await admin.list(CONFIGMAPS, namespace=namespace)
            return expected <= {o["metadata"]["name"] for o in listed.items}

        await eventually(lambda: converged(set(parents)), within=60, message=deployment.logs)
        # kubectl scale --replicas=5, then --replicas=2 (a StatefulSet adds the next ordinals
        # and removes the highest first).
        for pod in (f"{FULLNAME}-worker-3", f"{FULLNAME}-worker-4"):
            deployment.start(deployment.roles.worker, pod, kubeconfig)
        more = [f"q{i}" for i in range(PARENTS)]
        await create_things(admin, namespace, name, more)
        await eventually(lambda: converged(set(parents + more)), within=60, message=deployment.logs)
        for pod in (f"{FULLNAME}-worker-4", f"{FULLNAME}-worker-3", f"{FULLNAME}-worker-2"):
            await asyncio.to_thread(deployment.stop, pod)
        last = [f"r{i}" for i in range(PARENTS)]
        await create_things(admin, namespace, name, last)
        everything = set(parents + more + last)
        await eventually(lambda: converged(everything), within=60, message=deployment.logs)
        revisions = await admin.list(REVISIONS, namespace=namespace)
        owners = {
            ref["name"]
            for o in revisions.items
            for ref in o["metadata"].get("ownerReferences", ())
            if ref.get("controller")
        }
        assert owners == everything, deployment.logs()
        user = f"system:serviceaccount:{namespace}:{account}"
        assert denials(rbac_cluster[1], user) == [], deployment.logs()
        assert all(p.poll() is None for p in deployment.procs.values()), deployment.logs()
    finally:
        deployment.close()
        with contextlib.suppress(errors.NotFound):
            await admin.delete(CCS, name)
        with contextlib.suppress(errors.NotFound):
            await admin.delete(NAMESPACES, namespace)
