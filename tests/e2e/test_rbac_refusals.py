"""A controller whose resource the ServiceAccount may not watch says so where operators look.

On a cluster that authorizes with RBAC (the embedded cluster in RBAC mode, or the real one
given ``METASHARD_E2E_KUBECONFIG``), a coordinator runs as a ServiceAccount holding exactly
the rules ``metashard rbac`` prints for one controller. A second controller, added later,
names a parent the ServiceAccount may not list or watch: it gets a ``Forbidden`` Warning
event naming the verb, the resource and the ServiceAccount, and saying that ``metashard
rbac`` prints the rules; ``/readyz/controllers`` answers 503 naming it, while ``/readyz``
stays ready and the first controller runs.
"""

from __future__ import annotations

import contextlib
import io
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml  # type: ignore[import-untyped]

from loadtest.apiserver.cluster import write_kubeconfig
from loadtest.dev.crds import CRDS, install, simple_crd
from manager.cli import rbac as rbac_command
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.e2e.harness import Processes, eventually
from tests.e2e.test_controller_start import controller
from tests.e2e.test_deployed import (  # noqa: F401 (fixtures)
    CCS,
    NAMESPACES,
    admin,
    apply,
    rbac_cluster,
    service_account_token,
)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

EVENTS = Resource("", "v1", "events", "Event", True)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
GROUP = "refusals.e2e.metashard.io"


def rbac_manifests(
    objects: list[dict[str, Any]], name: str, namespace: str, directory: Path
) -> list[Any]:
    """What ``metashard rbac`` prints for ``objects``, with bindings to the ServiceAccount
    ``name``."""
    paths = []
    for obj in objects:
        path = directory / f"{obj['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(obj))
        paths.append(str(path))
    out = io.StringIO()
    args = [*paths, "--no-related", "--name", name, "--namespace", namespace]
    assert rbac_command.main(args, out=out) == 0
    printed = [d for d in yaml.safe_load_all(out.getvalue()) if d]
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    role_ref = {"apiGroup": "rbac.authorization.k8s.io"}
    bindings = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {**role_ref, "kind": "ClusterRole", "name": name},
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{name}-leader-election", "namespace": namespace},
            "roleRef": {**role_ref, "kind": "Role", "name": f"{name}-leader-election"},
            "subjects": subject,
        },
    ]
    return [*printed, *bindings]


@pytest_asyncio.fixture
async def account(admin: Client, tmp_path: Path) -> AsyncIterator[tuple[str, str, str]]:  # noqa: F811
    """(namespace, ServiceAccount, its kubeconfig) holding what ``metashard rbac`` prints for
    a controller of ``allowed``; the CRDs ``alloweds`` and ``forbiddens`` installed."""
    namespace = f"refusals-{secrets.token_hex(3)}"
    name = f"ms-{secrets.token_hex(3)}"
    await install(admin, [simple_crd(GROUP, "Allowed"), simple_crd(GROUP, "Forbidden")])
    await admin.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    await admin.create(
        SERVICE_ACCOUNTS,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        namespace=namespace,
    )
    manifests = rbac_manifests(
        [controller("granted", GROUP, "alloweds")], name, namespace, tmp_path
    )
    await apply(admin, manifests, namespace)
    token = await service_account_token(admin, namespace, name)
    kubeconfig = tmp_path / "serviceaccount-kubeconfig"
    admin_config = admin.session.config
    write_kubeconfig(kubeconfig, admin_config.server, token, ca_file=admin_config.ca_file)
    try:
        yield namespace, name, str(kubeconfig)
    finally:
        for cluster_scoped in (
            Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
            Resource(
                "rbac.authorization.k8s.io",
                "v1",
                "clusterrolebindings",
                "ClusterRoleBinding",
                False,
            ),
        ):
            with contextlib.suppress(errors.NotFound):
                await admin.delete(cluster_scoped, name)
        with contextlib.suppress(errors.NotFound):
            await admin.delete(NAMESPACES, namespace)


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, await response.text()


async def test_a_refused_watch_is_a_warning_on_the_controller_and_a_readyz_reason(
    admin: Client,  # noqa: F811
    account: tuple[str, str, str],
    tmp_path: Path,
) -> None:
    namespace, name, kubeconfig = account
    procs = Processes(kubeconfig=kubeconfig, workdir=tmp_path)
    made: list[str] = []
    try:
        coordinator = procs.coordinator()
        await eventually(coordinator.ready, within=30, message=procs.logs)
        granted = f"granted-{name}"
        refused = f"refused-{name}"
        for cc_name, plural in ((granted, "alloweds"), (refused, "forbiddens")):
            await admin.create(CCS, controller(cc_name, GROUP, plural))
            made.append(cc_name)

        async def warnings() -> list[dict[str, Any]]:
            listed = await admin.list(
                EVENTS, namespace="default", field_selector=f"involvedObject.name={refused}"
            )
            return [e for e in listed.items if e.get("reason") == "Forbidden"]

        async def warned() -> bool:
            return bool(await warnings())

        await eventually(warned, within=30, message=procs.logs)
        (event,) = await warnings()
        assert event["type"] == "Warning"
        message = event["message"]
        assert message.startswith(f"ServiceAccount {namespace}/{name} may not "), message
        assert f"forbiddens.{GROUP} at the cluster scope (403 Forbidden)" in message, message
        assert message.split()[4] in ("list", "watch"), message
        assert "`metashard rbac` prints the rules" in message, message

        health = f"http://127.0.0.1:{coordinator.metrics_port}"
        assert await get(f"{health}/readyz") == (200, "ok")
        status, why = await get(f"{health}/readyz/controllers")
        assert status == 503
        assert why.startswith(f"CompositeController {refused}: ServiceAccount "), why
        assert granted not in why

        started = await admin.list(
            EVENTS, namespace="default", field_selector=f"involvedObject.name={granted}"
        )
        assert [e["reason"] for e in started.items] == ["Started"]
    finally:
        procs.close()
        for cc_name in made:
            with contextlib.suppress(errors.NotFound):
                await admin.delete(CCS, cc_name)
        for plural in ("alloweds", "forbiddens"):
            with contextlib.suppress(errors.NotFound):
                await admin.delete(CRDS, f"{plural}.{GROUP}")
