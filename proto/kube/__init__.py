"""The asyncio Kubernetes REST client (orjson; ``proto.runtime.http1`` for whole-body requests,
aiohttp for watch streams) shared by the coordinator and workers.

```python
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.session import Session

async with Session(load_config(), qps=50, burst=100) as session:
    client = Client(session)
    pods = await client.resource("v1", resource="pods")
    listed = await client.list(pods, namespace="default")
    async with contextlib.aclosing(
        client.watch(pods, namespace="default", resource_version=listed.resource_version)
    ) as events:
        async for event in events:  # WatchEvent: type, object, raw, resource_version
            ...
```

Modules: ``config`` (where the cluster is), ``session`` (HTTP, TLS, auth, rate limit,
retries), ``errors`` (the typed error tree), ``resources`` (``Resource``, ``Discovery``),
``watch`` (stream decoding), ``client`` (reads, watches, writes). The package itself imports
nothing: ``proto.kube.errors`` and ``proto.kube.config`` stay cheap to import (no aiohttp) for
command-line checks that run before a process starts its work.
"""
