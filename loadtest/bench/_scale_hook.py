"""The scale benchmark's sync hook: the harness's fanout answer, late by a set latency, counted.

``python -m loadtest.bench._scale_hook --port PORT`` serves

- ``POST /sync``: the shared harness's answer (``fanoutbench.hook.sync_response``: K
  ConfigMaps and ``status.children``; a malformed request gets 400), sent ``latency`` seconds
  after the request arrived, as a hook that waits on something would be. Every answered call
  counts, so the count is the reconciles of any controller that calls the hook once per
  reconcile (metashard and Metacontroller do), its own metrics or not;
- ``GET /calls``: ``{"calls": <answered sync calls so far>}``;
- ``PUT /latency?seconds=S``: the latency from now on (0 at start).

It runs in a process of its own so its CPU is neither the controller's nor the benchmark's.
``HookClient`` is the benchmark's side.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
from dataclasses import dataclass

import aiohttp
import orjson
from aiohttp import web

from loadtest.bench import _harness


@dataclass(slots=True)
class _State:
    latency: float = 0.0
    calls: int = 0


def make_app() -> web.Application:
    _harness.load()  # puts the harness on sys.path
    answer = importlib.import_module("fanoutbench.hook").sync_response
    state = _State()

    async def sync(request: web.Request) -> web.Response:
        if state.latency > 0:
            await asyncio.sleep(state.latency)
        try:
            body = orjson.loads(await request.read())
            if not isinstance(body, dict):
                raise ValueError("request body is not a JSON object")
            resp = answer(body)
        except (orjson.JSONDecodeError, ValueError, TypeError) as err:
            return web.Response(status=400, text=f"bad sync request: {err}")
        state.calls += 1
        return web.Response(body=orjson.dumps(resp), content_type="application/json")

    async def calls(_: web.Request) -> web.Response:
        return web.json_response({"calls": state.calls})

    async def latency(request: web.Request) -> web.Response:
        try:
            seconds = float(request.query["seconds"])
        except (KeyError, ValueError):
            return web.Response(status=400, text="want ?seconds=S")
        if seconds < 0:
            return web.Response(status=400, text="a latency is not negative")
        state.latency = seconds
        return web.json_response({"latency": seconds})

    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/sync", sync)
    app.router.add_get("/calls", calls)
    app.router.add_put("/latency", latency)
    return app


class HookClient:
    """The benchmark's view of a running hook: its call count and its latency."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.url = f"{self.base}/sync"
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HookClient:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._http is not None:
            await self._http.close()

    async def calls(self) -> int:
        assert self._http is not None
        async with self._http.get(f"{self.base}/calls") as resp:
            resp.raise_for_status()
            return int((await resp.json())["calls"])

    async def set_latency(self, seconds: float) -> None:
        assert self._http is not None
        async with self._http.put(f"{self.base}/latency", params={"seconds": str(seconds)}) as r:
            r.raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench._scale_hook")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    web.run_app(make_app(), host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
