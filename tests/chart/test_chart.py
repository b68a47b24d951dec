"""The Helm chart, rendered offline for the default values and every ``ci/*.yaml``: strict lint,
the Kubernetes 1.30 and 1.37 schemas, and the invariants an operator relies on."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from proto.runtime.flags import zap_level
from tests.chart.render import CHART, REQUIRED, Container, deployed, render, value_sets

helm_python = pytest.importorskip("helm_python")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

SETS = value_sets()
KUBE_VERSIONS = ("1.30.0", "1.37.0")
CUSTOM_GROUPS = ("monitoring.coreos.com/",)
"""Kinds no bundled schema covers: prometheus-operator's (their CRDs are not ours to ship)."""
RELEASE, NAMESPACE = "metashard", "ops"


def merged(values: dict[str, Any]) -> dict[str, Any]:
    with helm_python.Chart.load(CHART) as chart:
        result: dict[str, Any] = chart.merge_values(values)
        return result


@pytest.fixture(scope="module", params=sorted(SETS))
def case(request: pytest.FixtureRequest) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the merged values, the rendered objects) of one value set."""
    values = SETS[request.param]
    return merged(values), render(values, name=RELEASE, namespace=NAMESPACE)


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def fullname(values: dict[str, Any]) -> str:
    return values["fullnameOverride"] or RELEASE


# --- tooling: lint, schema, Kubernetes validation ------------------------------------------


@pytest.mark.parametrize("name", sorted(SETS))
def test_lints_strictly(name: str) -> None:
    for version in KUBE_VERSIONS:
        report = helm_python.lint(CHART, SETS[name], strict=True, kube_version=f"v{version}")
        assert report["errors"] == []
        assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_every_object_is_valid_for_each_kubernetes_version(case: Any) -> None:
    _, objects = case
    for obj in objects:
        if obj["apiVersion"].startswith(CUSTOM_GROUPS):
            continue
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(obj, version, strict=True)


def test_the_crds_are_valid_for_each_kubernetes_version() -> None:
    with helm_python.Chart.load(CHART) as chart:
        crds = chart.crds
    assert len(crds) == 3
    for crd in crds:
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(json.loads(json.dumps(_yaml(crd["data"]))), version, True)


def _yaml(text: str) -> Any:
    import yaml  # type: ignore[import-untyped]

    return yaml.safe_load(text)


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"workers": {"replicas": -1}}, "/workers/replicas"),
        ({"coordinator": {"replicas": 0}}, "/coordinator/replicas"),
        ({"logLevel": "loud"}, "/logLevel"),
        ({"ports": {"link": 70000}}, "/ports/link"),
        ({"curve": {"keys": {"server.key": "x" * 40}}}, "server.key"),
        ({"rbac": {"clusterRole": {"rules": [{"apiGroups": [""]}]}}}, "verbs"),
        ({"metrics": {"serviceMonitor": {"enabled": True, "interval": "often"}}}, "interval"),
        ({"workers": {"replicaz": 3}}, "replicaz"),
    ],
)
def test_the_values_schema_rejects(values: dict[str, Any], complaint: str) -> None:
    with helm_python.Chart.load(CHART) as chart, pytest.raises(helm_python.HelmValuesError) as err:
        chart.validate_schema(chart.merge_values({**REQUIRED, **values}))
    assert complaint in str(err.value)
    assert "/image" not in str(err.value)


@pytest.mark.parametrize(
    "values",
    [{}, {"image": {"tag": "0.1.0"}}, {"image": {"repository": ""}}],
    ids=["no values", "a tag only", "an empty repository"],
)
def test_an_install_without_an_image_is_refused_saying_how_to_build_one(
    values: dict[str, Any],
) -> None:
    """No image is published: a default would end in ImagePullBackOff, so there is none, and
    the refusal says what to do."""
    with pytest.raises(helm_python.HelmValuesError) as err:
        render(values)
    assert "/image/repository" in str(err.value)
    assert "make image" in str(err.value)
    report = helm_python.lint(CHART, values, strict=True)
    assert report["errors"] or [m for m in report["messages"] if m["severity"] >= 2]


def test_the_image_given_is_what_both_roles_run() -> None:
    values = {"image": {"repository": "registry.example.com/team/metashard", "tag": "abc"}}
    roles = deployed(render(values))
    images = {c.spec["image"] for c in (roles.coordinator, roles.worker, *roles.extra)}
    assert images == {"registry.example.com/team/metashard:abc"}
    with pytest.raises(helm_python.HelmValuesError):
        render({"image": {"repository": "registry.example.com/meta shard"}})


def test_the_offline_render_docs_install_shows_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    section = (CHART.parents[1] / "docs" / "install.md").read_text(encoding="utf-8")
    section = section.split("### Render without a cluster", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[0]
    monkeypatch.chdir(CHART.parents[1])  # it names the chart by its path in the repository
    exec(compile(code, "docs/install.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "# Source: metashard/templates/coordinator-deployment.yaml" in printed
    assert "image: registry.example.com/metashard:0.1.0" in printed


@pytest.mark.parametrize(
    "level", ["debug", "info", "error", "panic", "loud", 0, "0", "00", 1, 3, "3", "+2", "010", -1]
)
def test_the_schema_admits_exactly_the_log_levels_the_processes_accept(level: Any) -> None:
    """The chart passes ``logLevel`` as ``--zap-log-level``: a value the schema admits and the
    processes refuse would be a crash loop (exit code 2) instead of a failed install."""
    try:
        zap_level(str(level))
    except ValueError:
        accepted = False
    else:
        accepted = True
    with helm_python.Chart.load(CHART) as chart:
        try:
            chart.validate_schema(chart.merge_values({**REQUIRED, "logLevel": level}))
        except helm_python.HelmValuesError:
            admitted = False
        else:
            admitted = True
    assert admitted == accepted


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"curve": {"coordinator": {"existingSecret": "mine"}}}, "curve.workers.existingSecret"),
        ({"curve": {"keys": {"server.secret": "s" * 40}}}, "needs server.secret and worker.secret"),
        (
            {"curve": {"existingSecret": "mine", "keys": {"server.secret": "s" * 40}}},
            "curve.keys would be unused",
        ),
        (
            {"metrics": {"service": {"enabled": False}, "serviceMonitor": {"enabled": True}}},
            "needs metrics.service.enabled",
        ),
        ({"serviceAccount": {"create": False}}, "serviceAccount.name is required"),
    ],
)
def test_contradictory_values_fail_the_render(values: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=re.escape(complaint)):
        render({**REQUIRED, **values})


# --- invariants ---------------------------------------------------------------------------


def test_every_object_carries_the_standard_labels(case: Any) -> None:
    _, objects = case
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "metashard"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/version"]
        if obj["kind"] in ("Deployment", "StatefulSet"):
            template = obj["spec"]["template"]["metadata"]["labels"]
            selector = obj["spec"]["selector"]["matchLabels"]
            assert selector.items() <= template.items()
            assert selector["app.kubernetes.io/component"] == labels["app.kubernetes.io/component"]


def test_the_containers_run_exactly_the_documented_command_lines(case: Any) -> None:
    values, objects = case
    name = fullname(values)
    roles = deployed(objects)
    assert roles.extra == []
    common = [
        *("--metrics-address", f":{values['ports']['metrics']}"),
        *("--health-probe-bind-address", f":{values['ports']['health']}"),
        *("--cluster-revision-namespace", values.get("clusterRevisionNamespace") or NAMESPACE),
        *("--curve-keys", "/etc/metashard/curve", "--zap-log-level", str(values["logLevel"])),
    ]
    assert roles.coordinator.command_line(pod_name="c-1", namespace=NAMESPACE) == [
        *("metashard", "coordinator", "--leader-election"),
        *("--leader-election-namespace", NAMESPACE, "--leader-election-id", name),
        *("--bind", f"tcp://0.0.0.0:{values['ports']['link']}"),
        *common,
        *values["coordinator"]["extraArgs"],
    ]
    assert roles.worker.command_line(pod_name=f"{name}-worker-4", namespace=NAMESPACE) == [
        *("metashard", "worker", "--coordinator"),
        f"tcp://{name}-coordinator:{values['ports']['link']}",
        *("--id", f"{name}-worker-4", "--concurrency", str(values["workers"]["concurrency"])),
        *common,
        *values["workers"]["extraArgs"],
    ]
    for container, role in ((roles.coordinator, "coordinator"), (roles.worker, "workers")):
        env = container.environment(pod_name="p", namespace=NAMESPACE)
        extra = {item["name"]: item["value"] for item in values[role]["extraEnv"]}
        assert env == {"POD_NAME": "p", "POD_NAMESPACE": NAMESPACE, **extra}


def test_coordinators_elect_a_leader_and_workers_are_a_parallel_statefulset(case: Any) -> None:
    values, objects = case
    name = fullname(values)
    (deployment,) = of_kind(objects, "Deployment")
    assert deployment["metadata"]["name"] == f"{name}-coordinator"
    assert deployment["spec"]["replicas"] == values["coordinator"]["replicas"]
    # only the leader is Ready: a rollout must not wait for new standbys to become Ready
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == "100%"
    (statefulset,) = of_kind(objects, "StatefulSet")
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
    assert statefulset["spec"]["replicas"] == values["workers"]["replicas"]
    governing = [s for s in of_kind(objects, "Service") if s["spec"].get("clusterIP") == "None"]
    assert statefulset["spec"]["serviceName"] in [s["metadata"]["name"] for s in governing]


def test_probes_ask_readyz_and_healthz_on_the_health_port(case: Any) -> None:
    values, objects = case
    roles = deployed(objects)
    for container in (roles.coordinator, roles.worker):
        ports = {p["name"]: p["containerPort"] for p in container.spec["ports"]}
        assert ports["health"] == values["ports"]["health"]
        assert ports["metrics"] == values["ports"]["metrics"]
        assert container.spec["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
        assert container.spec["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {p["name"] for p in roles.coordinator.spec["ports"]} == {"link", "metrics", "health"}
    assert "link" not in {p["name"] for p in roles.worker.spec["ports"]}


def _secure(container: Container) -> None:
    pod = container.pod_spec["securityContext"]
    own = container.spec["securityContext"]
    assert own["allowPrivilegeEscalation"] is False
    assert own["readOnlyRootFilesystem"] is True
    assert own["capabilities"] == {"drop": ["ALL"]}
    assert own.get("runAsNonRoot", pod.get("runAsNonRoot")) is True
    assert pod["runAsUser"] != 0
    seccomp = own.get("seccompProfile", pod.get("seccompProfile"))
    assert seccomp == {"type": "RuntimeDefault"}
    mounts = container.volume_mounts()
    assert "emptyDir" in mounts["/tmp"]
    assert container.spec["resources"]["requests"]


def test_containers_run_unprivileged_on_a_read_only_root(case: Any) -> None:
    _, objects = case
    roles = deployed(objects)
    _secure(roles.coordinator)
    _secure(roles.worker)


def test_pod_disruption_budgets_only_when_enabled_and_replicas_exceed_one(case: Any) -> None:
    values, objects = case
    name = fullname(values)
    budgets = {
        pdb["metadata"]["name"]: pdb["spec"] for pdb in of_kind(objects, "PodDisruptionBudget")
    }
    coordinators, workers = values["coordinator"]["replicas"], values["workers"]["replicas"]
    if not values["coordinator"]["podDisruptionBudget"]["enabled"]:
        coordinators = 0  # off by default: see values.yaml
    assert (f"{name}-coordinator" in budgets) == (coordinators > 1)
    assert (f"{name}-worker" in budgets) == (workers > 1)
    if coordinators > 1:
        assert (
            budgets[f"{name}-coordinator"]["minAvailable"]
            == (values["coordinator"]["podDisruptionBudget"]["minAvailable"])
        )
        labels = budgets[f"{name}-coordinator"]["selector"]["matchLabels"]
        assert labels["app.kubernetes.io/component"] == "coordinator"
    if workers > 1:
        expected = values["workers"]["podDisruptionBudget"]["maxUnavailable"]
        assert budgets[f"{name}-worker"]["maxUnavailable"] == expected
        labels = budgets[f"{name}-worker"]["selector"]["matchLabels"]
        assert labels["app.kubernetes.io/component"] == "worker"


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_the_link_service_reaches_coordinators_only(case: Any) -> None:
    values, objects = case
    name = fullname(values)
    services = {s["metadata"]["name"]: s["spec"] for s in of_kind(objects, "Service")}
    link = services[f"{name}-coordinator"]
    assert link["ports"] == [
        {"name": "link", "port": values["ports"]["link"], "targetPort": "link", "protocol": "TCP"}
    ]
    roles = deployed(objects)
    assert _selects(
        link["selector"], roles.coordinator.workload["spec"]["template"]["metadata"]["labels"]
    )
    assert not _selects(
        link["selector"], roles.worker.workload["spec"]["template"]["metadata"]["labels"]
    )
    metrics = services.get(f"{name}-metrics")
    assert (metrics is not None) == values["metrics"]["service"]["enabled"]
    if metrics is not None:
        for container in (roles.coordinator, roles.worker):
            pod_labels = container.workload["spec"]["template"]["metadata"]["labels"]
            assert _selects(metrics["selector"], pod_labels)


def test_the_network_policy_admits_only_workers_to_the_link_port(case: Any) -> None:
    values, objects = case
    policies = of_kind(objects, "NetworkPolicy")
    assert len(policies) == (1 if values["networkPolicy"]["enabled"] else 0)
    if not policies:
        return
    (policy,) = policies
    roles = deployed(objects)
    coordinator_labels = roles.coordinator.workload["spec"]["template"]["metadata"]["labels"]
    worker_labels = roles.worker.workload["spec"]["template"]["metadata"]["labels"]
    spec = policy["spec"]
    assert _selects(spec["podSelector"]["matchLabels"], coordinator_labels)
    assert _selects(spec["podSelector"]["matchLabels"], worker_labels)
    assert spec["policyTypes"] == ["Ingress"]
    link_rules = [
        rule
        for rule in spec["ingress"]
        if any(port["port"] == values["ports"]["link"] for port in rule.get("ports", ()))
    ]
    assert len(link_rules) == 1
    (peer,) = link_rules[0]["from"]
    assert set(peer) == {"podSelector"}
    assert _selects(peer["podSelector"]["matchLabels"], worker_labels)
    assert not _selects(peer["podSelector"]["matchLabels"], coordinator_labels)
    assert all(rule.get("ports") for rule in spec["ingress"]), "a rule without ports admits all"


def test_rbac_binds_the_cluster_role_and_the_leader_election_role(case: Any) -> None:
    values, objects = case
    name = fullname(values)
    account = values["serviceAccount"]["name"] or name
    assert [sa["metadata"]["name"] for sa in of_kind(objects, "ServiceAccount")] == (
        [account] if values["serviceAccount"]["create"] else []
    )
    for container in deployed(objects).coordinator, deployed(objects).worker:
        assert container.pod_spec["serviceAccountName"] == account
    (cluster_role,) = of_kind(objects, "ClusterRole")
    assert cluster_role["rules"] == values["rbac"]["clusterRole"]["rules"]
    (role,) = of_kind(objects, "Role")
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        },
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    for binding, target in (
        (of_kind(objects, "ClusterRoleBinding"), cluster_role),
        (of_kind(objects, "RoleBinding"), role),
    ):
        (one,) = binding
        assert one["subjects"] == subject
        assert one["roleRef"]["name"] == target["metadata"]["name"]
        assert one["roleRef"]["kind"] == target["kind"]


def test_curve_keys_come_from_one_secret_or_one_per_role(case: Any) -> None:
    values, objects = case
    curve = values["curve"]
    roles = deployed(objects)
    mounted = {
        role: container.volume_mounts()["/etc/metashard/curve"]["secret"]["secretName"]
        for role, container in (("coordinator", roles.coordinator), ("workers", roles.worker))
    }
    secrets = of_kind(objects, "Secret")
    for role, secret_name in mounted.items():
        assert secret_name == (
            curve[role]["existingSecret"] or curve["existingSecret"] or f"{fullname(values)}-curve"
        )
    if curve["existingSecret"] or curve["coordinator"]["existingSecret"]:
        assert secrets == []
        return
    (secret,) = secrets
    assert mounted == {
        "coordinator": secret["metadata"]["name"],
        "workers": secret["metadata"]["name"],
    }
    files = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    if curve["keys"]:
        assert files == curve["keys"]
    else:
        assert set(files) == {"server.secret", "worker.secret"}
        assert all(len(base64.b64decode(key, validate=True)) == 32 for key in files.values())
        assert files["server.secret"] != files["worker.secret"]


def test_monitoring_objects_only_when_enabled(case: Any) -> None:
    values, objects = case
    for kind, key in (("ServiceMonitor", "serviceMonitor"), ("PodMonitor", "podMonitor")):
        found = of_kind(objects, kind)
        settings = values["metrics"][key]
        assert len(found) == (1 if settings["enabled"] else 0)
        for monitor in found:
            assert settings["labels"].items() <= monitor["metadata"]["labels"].items()
            endpoints = monitor["spec"].get("endpoints") or monitor["spec"]["podMetricsEndpoints"]
            assert [e["port"] for e in endpoints] == ["metrics"]
    dashboards = [c for c in of_kind(objects, "ConfigMap") if "metashard.json" in c["data"]]
    assert len(dashboards) == (1 if values["dashboards"]["enabled"] else 0)
    for config_map in dashboards:
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(config_map["data"]["metashard.json"])["uid"] == "metashard"


# --- the dashboard ----------------------------------------------------------------------------


def _exported_series() -> set[str]:
    """Every series name the coordinator and worker processes can export."""
    from manager.election.metrics import PrometheusLeaderMetrics
    from manager.informers.metrics import PrometheusInformerMetrics
    from manager.term.metrics import TermMetrics
    from proto.hooks.metrics import PrometheusHookMetrics
    from proto.kube.metrics import RestClientMetrics
    from proto.runtime.ops import process_collectors
    from workers.runner.metrics import PrometheusControllerMetrics
    from workers.workqueue.metrics import PrometheusMetricsProvider

    registry = CollectorRegistry()
    process_collectors(registry)
    RestClientMetrics(registry)
    PrometheusLeaderMetrics(registry)
    PrometheusInformerMetrics(registry)
    TermMetrics(registry)
    PrometheusHookMetrics(registry)
    PrometheusControllerMetrics(registry=registry)
    PrometheusMetricsProvider(registry=registry)
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    names: set[str] = set()
    for family in registry.collect():
        names |= {family.name + suffix for suffix in suffixes.get(family.type, ("",))}
    return names


def test_the_dashboard_queries_only_series_metashard_exports() -> None:
    dashboard = json.loads((CHART / "dashboards" / "metashard.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {
        word
        for expr in exprs
        for word in re.findall(r"\b([a-z_]+)(?:\{|\[)", expr)
        if word not in ("by", "rate", "sum", "max", "min", "scalar", "histogram_quantile")
    }
    exported = _exported_series()
    assert used - exported == set()
    for needed in (
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds_bucket",
        "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket",
        "metashard_coordinator_worker_slots",
        "leader_election_master_status",
        "metacontroller_sync_request_duration_histogram_seconds_bucket",
        "metacontroller_sync_requests_total",
        "metashard_informer_last_resource_version",
    ):
        assert needed in used


def test_the_hook_errors_panel_shows_calls_without_an_answer_and_invalid_answers() -> None:
    """Every failure code of ``proto.hooks.errors`` passes the panel's ``code`` matcher;
    successes (2xx, an ETag hit's 304) do not."""
    from proto.hooks import errors

    dashboard = json.loads((CHART / "dashboards" / "metashard.json").read_text(encoding="utf-8"))
    (panel,) = [p for p in dashboard["panels"] if p["title"].startswith("Hook errors")]
    failures = [
        errors.TIMEOUT,
        errors.DNS,
        errors.CONNECT,
        errors.TLS,
        errors.TRANSPORT,
        errors.TOO_LARGE,
        errors.CONFIG,
        errors.INVALID_RESPONSE,
    ]
    hooks: set[str] = set()
    for target in panel["targets"]:
        hooks |= set(re.findall(r"metacontroller_([a-z]+)_requests_total", target["expr"]))
        (excluded,) = re.findall(r'code!~"([^"]*)"', target["expr"])
        shown = [
            code
            for code in [*failures, "200", "201", "304", "404", "429", "500"]
            if not re.fullmatch(excluded, code)  # PromQL regexes are anchored
        ]
        assert shown == [*failures, "404", "429", "500"]
        assert failures[0] in panel["description"] and failures[-1] in panel["description"]
    assert hooks == {"sync", "finalize", "customize"}


# --- metashard rbac output as chart values ---------------------------------------------------

GREETER = {
    "apiVersion": "metacontroller.k8s.io/v1alpha1",
    "kind": "CompositeController",
    "metadata": {"name": "greeter"},
    "spec": {
        "parentResource": {"apiVersion": "example.com/v1", "resource": "greetings"},
        "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
        "hooks": {"sync": {"webhook": {"url": "http://greeter.default/sync"}}},
    },
}


def test_metashard_rbac_values_are_what_the_narrow_ci_values_hold(tmp_path: Any) -> None:
    import io

    from manager.cli.rbac import main

    path = tmp_path / "greeter.yaml"
    path.write_text(json.dumps(GREETER), encoding="utf-8")
    out = io.StringIO()
    assert main([str(path), "--output", "values"], out=out) == 0
    values = _yaml(out.getvalue())
    assert values["rbac"] == SETS["narrow-rbac-values"]["rbac"]
    (cluster_role,) = of_kind(render({**REQUIRED, **values}), "ClusterRole")
    for version in KUBE_VERSIONS:
        kubernetes_validate.validate(cluster_role, version, strict=True)
