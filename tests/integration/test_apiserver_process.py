"""The emulator as a process and in a background thread; kubeconfig and token auth."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from loadtest.apiserver.background import ClusterProcess, ClusterThread

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1"}]},
        },
    },
}


def fetch(
    url: str, token: str | None = None, *, method: str = "GET", body: object = None
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_subprocess_prints_its_url_writes_a_kubeconfig_and_exits_0_on_sigterm() -> None:
    cluster = ClusterProcess(token="s3cret").start()
    try:
        assert cluster.url.startswith("http://127.0.0.1:")
        config = yaml.safe_load(cluster.kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["server"] == cluster.url
        assert config["users"][0]["user"]["token"] == "s3cret"
        status, body = fetch(cluster.url + "/api/v1/namespaces", "s3cret")
        assert status == 200 and isinstance(body, dict) and len(body["items"]) == 4
        status, body = fetch(cluster.url + "/api/v1/namespaces", "wrong")
        assert status == 401 and isinstance(body, dict) and body["reason"] == "Unauthorized"
        status, _ = fetch(cluster.url + "/api/v1/namespaces")
        assert status == 401
        with urllib.request.urlopen(cluster.url + "/healthz", timeout=10) as response:
            assert response.read() == b"ok"
        cluster.faults.fail(status=500, path="/version")
        assert fetch(cluster.url + "/version", "s3cret")[0] == 500
        cluster.faults.clear()
        assert fetch(cluster.url + "/version", "s3cret")[0] == 200
    finally:
        assert cluster.stop() == 0


def test_sigint_also_stops_cleanly() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "loadtest.apiserver", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    assert fetch(url + "/version")[0] == 200
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    process.stdout.close()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_works_with_the_kubeconfig() -> None:
    # kubectl sends no credentials over plain http, so this emulator runs without a token
    with ClusterProcess() as cluster:
        env_args = ["kubectl", "--kubeconfig", str(cluster.kubeconfig)]
        manifest = json.dumps(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "from-kubectl"},
                "data": {"a": "b"},
            }
        )
        created = subprocess.run(
            [*env_args, "apply", "-f", "-"],
            input=manifest,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert created.returncode == 0, created.stderr
        got = subprocess.run(
            [*env_args, "get", "configmap", "from-kubectl", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout)["data"] == {"a": "b"}
        deleted = subprocess.run(
            [*env_args, "delete", "configmap", "from-kubectl"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert deleted.returncode == 0, deleted.stderr
        scaled = subprocess.run(
            [*env_args, "create", "-f", "-"],
            input=json.dumps(DEPLOYMENT),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert scaled.returncode == 0, scaled.stderr
        scaled = subprocess.run(
            [*env_args, "scale", "deployment", "web", "--replicas=3"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert scaled.returncode == 0, scaled.stderr
        status, body = fetch(cluster.url + "/apis/apps/v1/namespaces/default/deployments/web")
        assert status == 200 and isinstance(body, dict) and body["spec"]["replicas"] == 3


def test_background_thread_serves_and_is_steerable() -> None:
    with ClusterThread(token="t") as thread:
        assert fetch(thread.url + "/api/v1/namespaces/default", "t")[0] == 200
        assert thread.cluster is not None
        thread.call(thread.cluster.faults.fail, status=429, path="/version")
        assert fetch(thread.url + "/version", "t")[0] == 429
        assert thread.kubeconfig.exists()


def test_the_rbac_flag_turns_on_service_account_tokens_and_authorization() -> None:
    """``python -m loadtest.apiserver --rbac``, which ``metashard cluster --rbac`` runs."""
    with ClusterProcess(token="s3cret", rbac=True) as process:
        base = f"{process.url}/api/v1/namespaces/default"
        status, issued = fetch(
            f"{base}/serviceaccounts/default/token", "s3cret", method="POST", body={}
        )
        assert status == 201
        token = issued["status"]["token"]
        assert fetch(f"{base}/pods", token)[0] == 403
        assert fetch(f"{base}/pods", "s3cret")[0] == 200
        status, recorded = fetch(f"{process.url}/_emulator/rbac/denials", "s3cret")
        assert status == 200
        assert [(d["verb"], d["resource"]) for d in recorded["denials"]] == [("list", "pods")]
        assert fetch(f"{process.url}/_emulator/rbac/denials", token)[0] == 403
