"""The cold-start baseline: a fresh raw-client process that does a cold start's writes.

``python -m loadtest.bench._coldraw --kubeconfig FILE --namespace NS`` lists the Fanouts
waiting in NS, then writes exactly what a perfect controller writes for them (K ConfigMaps
each, then one status patch each) with the shared harness's client, ``--concurrency``
requests in flight, and exits.

``--children plain`` (the default) writes the harness's ConfigMaps as they are.
``--children metacontroller`` writes each as a Metacontroller-compatible controller must create
it (``metacontroller_child``): with the ``controller-uid`` label of ``generateSelector`` and
the last-applied annotation its later updates merge against, the body metashard's own
``workers.apply.create_body`` makes; the same status patches.

The benchmark starts it at t0 and stops the clock when the harness's checker sees every parent
converged, so interpreter start, imports, the list and the writes are all in the figure, as
they are for a controller's cold start.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from loadtest.bench import _harness
from proto.api import names
from workers.apply import ControllerRef, create_body

PLAIN, METACONTROLLER = "plain", "metacontroller"
CHILDREN = (PLAIN, METACONTROLLER)


def metacontroller_child(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``child`` (the hook's desired ConfigMap, without ownerReferences) as a
    Metacontroller-compatible controller POSTs it for ``parent``: the ``controller-uid``
    label, the last-applied annotation, the controller ownerReference."""
    meta = parent["metadata"]
    labels = {**(child["metadata"].get("labels") or {}), names.CONTROLLER_UID_LABEL: meta["uid"]}
    desired = {**child, "metadata": {**child["metadata"], "labels": labels}}
    return create_body(desired, ControllerRef.of(parent))


async def write(kubeconfig: str, namespace: str, concurrency: int, children_as: str) -> None:
    h = _harness.load()
    w = h.workload
    async with h.kube.Kube(
        kubeconfig, concurrency=concurrency, user_agent="metashard-bench-cold/1.0"
    ) as kube:
        parents, _ = await kube.list_all(w.parents_path(namespace))
        if children_as == METACONTROLLER:
            children = [
                metacontroller_child(p, cm)
                for p in parents
                for cm in w.desired_children(p, with_owner=False)
            ]
        else:
            children = [cm for p in parents for cm in w.desired_children(p)]
        await h.kube.bounded(
            children, lambda cm: kube.request("POST", w.configmaps_path(namespace), cm), concurrency
        )
        await h.kube.bounded(
            parents,
            lambda p: kube.request(
                "PATCH",
                f"{w.parents_path(namespace)}/{p['metadata']['name']}/status",
                {"status": w.desired_status(p)},
                ctype=h.kube.MERGE,
            ),
            concurrency,
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench._coldraw")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--children", choices=CHILDREN, default=PLAIN)
    args = parser.parse_args()
    asyncio.run(write(args.kubeconfig, args.namespace, args.concurrency, args.children))


if __name__ == "__main__":
    main()
