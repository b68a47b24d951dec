"""``make demo``: metashard running a CompositeController on the embedded cluster.

What it does, in order (Ctrl-C stops everything cleanly):
1. starts the embedded cluster (a Kubernetes API-server emulator) and writes its kubeconfig;
2. installs the ``metacontroller.k8s.io`` CRDs and an example CRD, ``Greeting``
   (``demo.metashard.io/v1``: ``spec.message``, ``spec.replicas``);
3. serves an example sync hook on localhost: each Greeting wants ``replicas`` ConfigMaps
   carrying its message, and reports ``status.configMaps``;
4. creates the ``greetings`` CompositeController pointing at that hook;
5. starts ``metashard run --processes 2`` against the cluster;
6. creates a few Greetings, changes one, and prints their convergence (children created,
   status written) until Ctrl-C, with where to find the metrics.

metashard's log goes to ``metashard.log`` in a directory of its own under the temporary
directory; it is kept when the demo stops, and its path is printed at the start and the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from aiohttp import web

from loadtest.apiserver.background import ClusterProcess
from loadtest.dev import crds, webhook
from loadtest.dev.crds import simple_crd
from loadtest.dev.processes import REPO, free_port
from proto.api.crds import load_crds
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.kube.session import Session

GREETINGS = Resource(
    "demo.metashard.io", "v1", "greetings", "Greeting", True, subresources=("status",)
)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
CCS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", "CompositeController", False
)
NAMESPACE = "default"
PARENTS = ["hello", "bonjour", "hola", "ciao", "hallo"]

GREETING_CRD = simple_crd(
    "demo.metashard.io",
    "Greeting",
    schema={
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "message": {"type": "string"},
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 20},
                },
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    },
)


async def sync_hook(request: web.Request) -> web.Response:
    """The example sync hook: ``replicas`` ConfigMaps with the message; status counts them."""
    body = await request.json()
    parent = body["parent"]
    name = parent["metadata"]["name"]
    spec = parent.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    children = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-{i}"},
            "data": {"message": str(spec.get("message", "")), "index": str(i)},
        }
        for i in range(replicas)
    ]
    observed = len(body["children"].get("ConfigMap.v1", {}))
    return web.json_response({"status": {"configMaps": observed}, "children": children})


async def install(client: Client, hook_url: str) -> None:
    await crds.install(client, [*load_crds(), GREETING_CRD])
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(
            CCS,
            {
                "apiVersion": "metacontroller.k8s.io/v1alpha1",
                "kind": "CompositeController",
                "metadata": {"name": "greetings"},
                "spec": {
                    "generateSelector": True,
                    "parentResource": {
                        "apiVersion": "demo.metashard.io/v1",
                        "resource": "greetings",
                    },
                    "childResources": [
                        {
                            "apiVersion": "v1",
                            "resource": "configmaps",
                            "updateStrategy": {"method": "InPlace"},
                        }
                    ],
                    "hooks": {"sync": {"webhook": {"url": hook_url}}},
                },
            },
        )


async def state(client: Client) -> list[tuple[str, int, int, Any, bool]]:
    """(name, replicas, children, status.configMaps, observed current generation) per parent."""
    parents = await client.list(GREETINGS, namespace=NAMESPACE)
    children = await client.list(CONFIGMAPS, namespace=NAMESPACE)
    owned: dict[str, int] = {}
    for cm in children.items:
        for ref in cm["metadata"].get("ownerReferences") or ():
            if ref.get("controller"):
                owned[ref["name"]] = owned.get(ref["name"], 0) + 1
    rows = []
    for parent in parents.items:
        meta, status = parent["metadata"], parent.get("status") or {}
        rows.append(
            (
                meta["name"],
                parent["spec"].get("replicas", 1),
                owned.get(meta["name"], 0),
                status.get("configMaps"),
                status.get("observedGeneration") == meta.get("generation"),
            )
        )
    return rows


def show(rows: list[tuple[str, int, int, Any, bool]], started: float) -> bool:
    converged = all(r[1] == r[2] == r[3] and r[4] for r in rows)
    print(f"\n[{time.monotonic() - started:5.1f}s] {'converged' if converged else 'converging'}")
    print(f"  {'GREETING':<10} {'WANTS':>5} {'CONFIGMAPS':>10} {'STATUS':>7}  OBSERVED")
    for name, wants, have, status, observed in rows:
        print(f"  {name:<10} {wants:>5} {have:>10} {status!s:>7}  {'yes' if observed else 'no'}")
    return converged


async def demo(kubeconfig: str, stop: asyncio.Event, log: IO[bytes]) -> None:
    hook_port, metrics_port = free_port(), free_port()
    hook = await webhook.serve("/sync", sync_hook, port=hook_port)
    async with Session(load_config(kubeconfig), qps=0) as session:
        client = Client(session)
        await install(client, f"http://127.0.0.1:{hook_port}/sync")
        metashard = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "manager.cli", "run", "--processes", "2"),
            *("--kubeconfig", kubeconfig, "--metrics-address", f"127.0.0.1:{metrics_port}"),
            *("--health-probe-bind-address", f"127.0.0.1:{metrics_port}"),
            *("--log-format", "console"),
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log,
        )
        try:
            print(f"metashard: coordinator + 2 workers (pid {metashard.pid}), log in {log.name}")
            print(
                f"metrics:   http://127.0.0.1:{metrics_port}/metrics "
                "(the coordinator's and both workers')"
            )
            await converge(client, kubeconfig, stop)
        finally:
            metashard.send_signal(signal.SIGTERM)
            await asyncio.wait_for(metashard.wait(), 30)
            await hook.cleanup()


async def converge(client: Client, kubeconfig: str, stop: asyncio.Event) -> None:
    """Create the Greetings, change one once all converged, print progress until stopped."""
    for i, name in enumerate(PARENTS):
        with contextlib.suppress(errors.AlreadyExists):
            await client.create(
                GREETINGS,
                {
                    "apiVersion": "demo.metashard.io/v1",
                    "kind": "Greeting",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "spec": {"message": f"{name}, world", "replicas": i + 1},
                },
            )
    started = time.monotonic()
    changed = False
    while not stop.is_set():
        converged = show(await state(client), started)
        if converged and not changed:
            print("\nchanging 'hello' to 4 replicas and a new message...")
            await client.patch(
                GREETINGS,
                "hello",
                {"spec": {"replicas": 4, "message": "hello again"}},
                namespace=NAMESPACE,
            )
            changed = True
        elif converged:
            print("\nall converged. Try it yourself (Ctrl-C stops the demo):")
            print(f"  KUBECONFIG={kubeconfig} kubectl get greetings,configmaps")
            print(f"  KUBECONFIG={kubeconfig} kubectl edit greeting hola")
            await stop.wait()
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


async def _main(kubeconfig: str, log: IO[bytes]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await demo(kubeconfig, stop, log)


def main() -> int:
    print("starting the embedded cluster...")
    cluster = ClusterProcess().start()
    # Not in the cluster's directory: that one is removed when the cluster stops.
    log_path = Path(tempfile.mkdtemp(prefix="metashard-demo-")) / "metashard.log"
    try:
        print(f"cluster:   {cluster.url} (kubeconfig {cluster.kubeconfig})")
        with log_path.open("ab") as log:
            asyncio.run(_main(str(cluster.kubeconfig), log))
    finally:
        cluster.stop()
        print(f"stopped. metashard's log is kept in {log_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
