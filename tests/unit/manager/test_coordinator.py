"""manager.coordinator: an API server unreachable at start is a /readyz reason and a metric
at once, with leader election or without; the process's own metrics are exported."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from pathlib import Path

import aiohttp
import pytest

from loadtest.apiserver.cluster import write_kubeconfig
from manager.coordinator import Coordinator
from manager.settings import CoordinatorSettings
from proto.runtime.flags import Common


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, await response.text()


@pytest.mark.parametrize("leader_election", [False, True])
@pytest.mark.asyncio
async def test_an_unreachable_api_server_is_a_readyz_reason_and_a_metric_at_once(
    tmp_path: Path, leader_election: bool
) -> None:
    port = closed_port()
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, f"http://127.0.0.1:{port}", "token")
    settings = CoordinatorSettings(
        bind=f"ipc://{tmp_path}/link.sock",
        common=Common(
            kubeconfig=str(kubeconfig), metrics_address="127.0.0.1:0", health_address="127.0.0.1:0"
        ),
        leader_election=leader_election,
        leader_election_namespace="default",
    )
    coordinator = Coordinator(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(coordinator.run(stop))
    try:
        deadline = time.monotonic() + 10
        status, reason = 0, ""
        while "unreachable" not in reason and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            if coordinator.ops.health_port:
                status, reason = await get(f"http://127.0.0.1:{coordinator.ops.health_port}/readyz")
        assert status == 503
        assert reason.startswith("API server unreachable: GET "), reason
        assert "Connect" in reason or "refused" in reason, reason
        _, text = await get(f"http://127.0.0.1:{coordinator.ops.metrics_port}/metrics")
        host = f'host="127.0.0.1:{port}"'
        assert any(
            line.startswith("rest_client_requests_total{")
            and 'code="<error>"' in line
            and host in line
            for line in text.splitlines()
        ), text
        assert "process_resident_memory_bytes " in text
        assert "python_info{" in text
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 15)
