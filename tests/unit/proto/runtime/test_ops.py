from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from proto.runtime.addresses import (
    Peer,
)
from proto.runtime.ops import OpsServer
from proto.runtime.startup import StartupError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _get(url: str, **kw: object) -> tuple[int, str]:
    async with aiohttp.ClientSession(**kw) as http, http.get(url) as resp:  # type: ignore[arg-type]
        return resp.status, await resp.text()


@pytest.mark.asyncio
async def test_metrics_and_probes_are_served_where_asked() -> None:
    reason: list[str | None] = ["not leading"]
    registry = CollectorRegistry()
    Counter("c_total", "C.", registry=registry).inc()
    ops = OpsServer(registry, ready=lambda: reason[0])
    async with ops.serving(metrics="127.0.0.1:0", health=f"127.0.0.1:{_free_port()}"):
        metrics = f"http://127.0.0.1:{ops.metrics_port}"
        health = f"http://127.0.0.1:{ops.health_port}"
        assert ops.metrics_port != ops.health_port
        status, text = await _get(f"{metrics}/metrics")
        assert status == 200 and "c_total 1.0" in text and "_created" not in text
        assert (await _get(f"{metrics}/readyz"))[0] == 404
        assert await _get(f"{health}/healthz") == (200, "ok")
        assert await _get(f"{health}/readyz") == (503, "not leading")
        reason[0] = None
        assert await _get(f"{health}/readyz") == (200, "ok")
        assert (await _get(f"{health}/metrics"))[0] == 404


@pytest.mark.asyncio
async def test_one_address_serves_all_paths_and_port_in_use_is_a_startup_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        same = f"127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(StartupError, match="cannot listen"):
            await OpsServer(CollectorRegistry(), ready=lambda: None).start(metrics=same, health="0")
    one = OpsServer(CollectorRegistry(), ready=lambda: None)
    async with one.serving(metrics="127.0.0.1:0", health="0"):
        pass
    port = _free_port()  # the same address twice: one server
    both = OpsServer(CollectorRegistry(), ready=lambda: None)
    async with both.serving(metrics=f"127.0.0.1:{port}", health=f"127.0.0.1:{port}"):
        assert (await _get(f"http://127.0.0.1:{port}/metrics"))[0] == 200
        assert (await _get(f"http://127.0.0.1:{port}/readyz"))[0] == 200


@pytest.mark.asyncio
async def test_a_named_check_answers_on_its_own_path_and_not_in_readyz() -> None:
    stalled: list[str | None] = ["CompositeController cc: may not watch things"]
    ops = OpsServer(
        CollectorRegistry(), ready=lambda: None, checks={"controllers": lambda: stalled[0]}
    )
    async with ops.serving(metrics="0", health="127.0.0.1:0"):
        health = f"http://127.0.0.1:{ops.health_port}"
        assert await _get(f"{health}/readyz") == (200, "ok")
        assert await _get(f"{health}/readyz/controllers") == (503, stalled[0])
        stalled[0] = None
        assert await _get(f"{health}/readyz/controllers") == (200, "ok")
        assert (await _get(f"{health}/readyz/other"))[0] == 404


@pytest.mark.asyncio
async def test_peers_metrics_are_served_with_a_worker_label(tmp_path: Path) -> None:
    worker_registry = CollectorRegistry()
    adds = Counter("workqueue_adds_total", "Adds.", ["name"], registry=worker_registry)
    adds.labels("CompositeController-cc").inc(3)
    path = str(tmp_path / "w0.sock")
    worker = OpsServer(worker_registry, ready=lambda: None)
    coordinator = OpsServer(
        CollectorRegistry(),
        ready=lambda: None,
        peers=[Peer("w0", path), Peer("w1", str(tmp_path / "gone.sock"))],
    )
    async with (
        worker.serving(metrics=f"unix:{path}", health="0"),
        coordinator.serving(metrics="127.0.0.1:0", health="0"),
    ):
        _, text = await _get(f"http://127.0.0.1:{coordinator.metrics_port}/metrics")
    assert 'workqueue_adds_total{name="CompositeController-cc",worker="w0"} 3.0' in text
    assert 'metashard_worker_scrape_up{worker="w0"} 1.0' in text
    assert 'metashard_worker_scrape_up{worker="w1"} 0.0' in text
    assert os.listdir(tmp_path) == []  # the Unix socket file is removed on stop


@pytest.mark.asyncio
async def test_each_process_exports_its_own_process_and_runtime_metrics_apart(
    tmp_path: Path,
) -> None:
    """``process_*``, ``python_gc_*`` and ``python_info`` of every process: under ``metashard
    run`` the workers' carry their ``worker`` label, so none collides with the coordinator's,
    and each family is declared once."""
    path = str(tmp_path / "w0.sock")
    worker = OpsServer(CollectorRegistry(), ready=lambda: None)
    coordinator = OpsServer(CollectorRegistry(), ready=lambda: None, peers=[Peer("w0", path)])
    async with (
        worker.serving(metrics=f"unix:{path}", health="0"),
        coordinator.serving(metrics="127.0.0.1:0", health="0"),
    ):
        _, text = await _get(f"http://127.0.0.1:{coordinator.metrics_port}/metrics")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "process_cpu_seconds",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
        "python_info",
        "python_gc_collections",
    ):
        owners = {s.labels.get("worker") for s in families[name].samples}
        assert owners == {None, "w0"}, name
        assert len(re.findall(rf"^# TYPE {name}(_total)? ", text, re.MULTILINE)) == 1, name
    starts = {
        s.labels.get("worker"): s.value for s in families["process_start_time_seconds"].samples
    }
    assert starts[None] > 0 and starts["w0"] > 0
