"""The cold-start baseline: a fresh raw-client process that does a cold start's writes.

``python -m loadtest.bench._coldraw --kubeconfig FILE --namespace NS`` lists the Fanouts
waiting in NS, then writes exactly what a perfect controller writes for them (K ConfigMaps
each, then one status patch each) with the shared harness's client, ``--concurrency``
requests in flight, and exits. The fanout benchmark starts it at t0 and stops the clock when
the harness's checker sees every parent converged, so interpreter start, imports, the list
and the writes are all in the figure, as they are for a controller's cold start.
"""

from __future__ import annotations

import argparse
import asyncio

from loadtest.bench import _harness


async def write(kubeconfig: str, namespace: str, concurrency: int) -> None:
    h = _harness.load()
    w = h.workload
    async with h.kube.Kube(
        kubeconfig, concurrency=concurrency, user_agent="metashard-bench-cold/1.0"
    ) as kube:
        parents, _ = await kube.list_all(w.parents_path(namespace))
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
    args = parser.parse_args()
    asyncio.run(write(args.kubeconfig, args.namespace, args.concurrency))


if __name__ == "__main__":
    main()
