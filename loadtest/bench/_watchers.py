"""A controller that costs nothing: metashard's watches for the fanout job, doing nothing.

``python -m loadtest.bench._watchers --kubeconfig FILE`` runs one
``manager.informers.informer.Informer`` (all namespaces) per resource the coordinator watches for
the fanout CompositeController (CompositeControllers, DecoratorControllers, Fanouts, ConfigMaps),
prints ``synced`` once every first list is in, and runs until SIGINT or SIGTERM. The fanout
benchmark runs it during a raw-client wave to measure what serving a controller's watches costs the
API server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from manager.informers.informer import Informer
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.resources import Resource
from proto.kube.session import Session
from proto.runtime.logs import configure

WATCHED = (
    Resource(
        "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", "CompositeController", False
    ),
    Resource(
        "metacontroller.k8s.io", "v1alpha1", "decoratorcontrollers", "DecoratorController", False
    ),
    Resource("bench.metashard.io", "v1", "fanouts", "Fanout", True),
    Resource("", "v1", "configmaps", "ConfigMap", True),
)


async def watch(kubeconfig: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with Session(load_config(kubeconfig), qps=0) as session:
        informers = [Informer(Client(session), resource) for resource in WATCHED]
        tasks = [asyncio.create_task(informer.run()) for informer in informers]
        for informer in informers:
            await informer.wait_synced()
        print("synced", flush=True)
        await stop.wait()
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench._watchers")
    parser.add_argument("--kubeconfig", required=True)
    args = parser.parse_args()
    configure(fmt="json", level="warning")  # stdout carries only the "synced" line
    asyncio.run(watch(args.kubeconfig))


if __name__ == "__main__":
    main()
