"""The asyncio Kubernetes REST client (aiohttp + orjson) shared by the coordinator and workers."""
