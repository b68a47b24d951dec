"""The fanout benchmark at a tiny size, through both of its paths: the embedded cluster it
starts itself, and ``--kubeconfig`` to a cluster started separately (``metashard cluster``),
which it must leave as it found it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from loadtest.bench import _harness
from loadtest.dev.processes import REPO

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not _harness.available(), reason="no fanout harness in ../shared/bench"),
]


def bench(out: Path, *flags: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [sys.executable, "-m", "loadtest.bench.fanout", "--n", "3", "--out", str(out), *flags],
        capture_output=True,
        text=True,
        timeout=170,
        env={k: v for k, v in os.environ.items() if k != "METASHARD_E2E_KUBECONFIG"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "zero-cost-controller limit" in result.stdout or "--no-watchers" in flags
    return [json.loads(line) for line in out.read_text().splitlines()]


def waves(records: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(r["label"], r["wave"]) for r in records}


def check_metashard(records: list[dict[str, Any]], label: str, workers: int) -> None:
    for r in records:
        if r["label"] == label and r["wave"] in ("create", "update"):
            assert r["converged"]
            roles = set(r["cpu_processes"])
            assert "coordinator" in roles
            assert len([x for x in roles if x.startswith("worker ")]) == workers
            assert sum(r["reconciles"].values()) >= 3  # at least one per parent
            assert r["reconcile_buckets"]["+Inf"] == sum(r["reconciles"].values())


def test_embedded_cluster_path(tmp_path: Path) -> None:
    records = bench(tmp_path / "out.jsonl", "--workers", "1", "--ssa-workers", "", "--no-watchers")
    assert waves(records) == {
        ("raw", "create"),
        ("raw", "update"),
        ("metashard-1w", "create"),
        ("metashard-1w", "update"),
        ("raw-cold", "coldstart"),
        ("metashard-1w", "coldstart"),
    }
    assert all(r["converged"] and r["n"] == 3 for r in records if r["mode"] != "raw")
    assert all("apiserver" in r["cpu"] for r in records)
    check_metashard(records, "metashard-1w", 1)
    cold = next(r for r in records if r["label"] == "metashard-1w" and r["wave"] == "coldstart")
    assert cold["cpu_processes"]["coordinator"] > 0  # process start included


def test_a_baseline_build_is_measured_beside_this_one(tmp_path: Path) -> None:
    base = tmp_path / "base"  # this commit's packages, as a git worktree of it would hold them
    base.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "HEAD", "manager", "workers", "proto"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
    flags = ["--workers", "1", "--ssa-workers", "", "--no-watchers", "--no-coldstart"]
    out = tmp_path / "out.jsonl"
    records = bench(out, *flags, "--baseline-src", str(base))
    assert waves(records) == {
        (label, wave)
        for label in ("raw", "metashard-1w", "base-1w")
        for wave in ("create", "update")
    }
    check_metashard(records, "base-1w", 1)
    builds = {r["label"]: r["build"] for r in records if r["label"] != "raw"}
    assert builds["base-1w"] == {"name": "base", "src": str(base), "commit": None}  # no git
    assert builds["metashard-1w"]["src"] == str(REPO)
    report = subprocess.run(
        [sys.executable, "-m", "loadtest.bench.fanout", "--report", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert report.stdout.count("metashard-1w against base-1w") == 4  # 2 waves x seconds, CPU


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_kubeconfig_path_cleans_up_after_itself(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    cluster = subprocess.Popen(
        [sys.executable, "-m", "manager.cli", "cluster", "--port", "0", "--kubeconfig", kubeconfig],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert cluster.stdout is not None
        url = cluster.stdout.readline().strip()
        crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        before = {c["metadata"]["name"] for c in get(url + crds)["items"]}
        assert "fanouts.bench.metashard.io" not in before
        flags = ["--kubeconfig", str(kubeconfig), "--apiserver-pid", str(cluster.pid)]
        records = bench(tmp_path / "out.jsonl", *flags, "--workers", "2", "--no-coldstart")
        assert waves(records) == {
            (label, wave)
            for label in ("raw", "raw+watchers", "metashard-2w", "metashard-2w-ssa")
            for wave in ("create", "update")
        }
        assert all("apiserver" in r["cpu"] for r in records)
        check_metashard(records, "metashard-2w", 2)
        check_metashard(records, "metashard-2w-ssa", 2)
        for r in records:  # children are written by the configuration's apply strategy
            applied = any(key.startswith("APPLY configmaps") for key in r["requests"])
            assert applied == (r["label"] == "metashard-2w-ssa"), r["requests"]
        after = {c["metadata"]["name"] for c in get(url + crds)["items"]}
        assert after == before  # the Fanout CRD it added is gone; the others stay
        namespaces = get(url + "/api/v1/namespaces?labelSelector=fanoutbench%3D1")["items"]
        assert namespaces == []
        controllers = "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers"
        assert get(url + controllers)["items"] == []
    finally:
        cluster.send_signal(signal.SIGTERM)
        cluster.wait(timeout=30)
        if cluster.stdout is not None:
            cluster.stdout.close()
