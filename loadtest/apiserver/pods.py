"""Pods and pod templates: defaults, QoS class and the update rules the emulator enforces.

- ``default_pod_spec`` is ``SetDefaults_PodSpec``/``SetDefaults_Container`` (also used for the
  templates of Deployments, Jobs...); ``default_pod`` adds what Pod creation adds (status
  ``Pending`` with its QoS class, ``enableServiceLinks``); ``admit_pod`` adds the admission
  plugins' defaults (DefaultTolerationSeconds, Priority) on create, after the field manager.
- The ServiceAccount token volume is added by ``admission.py``.
- Updates may not add or remove containers (the only pod-spec immutability rule modelled).
"""

from __future__ import annotations

from typing import Any

from proto.api.validation import ErrorType, FieldError

DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def _pull_policy(image: str) -> str:
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _default_container(container: dict[str, Any]) -> None:
    container.setdefault("resources", {})
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if "image" in container:
        container.setdefault("imagePullPolicy", _pull_policy(str(container["image"])))
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for env in container.get("env") or []:
        field_ref = isinstance(env, dict) and (env.get("valueFrom") or {}).get("fieldRef")
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")


def default_pod_spec(spec: dict[str, Any], *, restart_policy: str | None = "Always") -> None:
    if restart_policy:
        spec.setdefault("restartPolicy", restart_policy)
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for volume in spec.get("volumes") or []:
        for source in ("configMap", "secret", "downwardAPI", "projected"):
            if isinstance(volume, dict) and isinstance(volume.get(source), dict):
                volume[source].setdefault("defaultMode", 420)
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict):
                _default_container(container)


def default_template(obj: dict[str, Any], *, restart_policy: str | None = "Always") -> None:
    """Default ``spec.template.spec`` of a workload."""
    template = obj.get("spec", {}).get("template")
    if isinstance(template, dict):
        template.setdefault("metadata", {})
        spec = template.setdefault("spec", {})
        if isinstance(spec, dict):
            default_pod_spec(spec, restart_policy=restart_policy)


def qos_class(spec: dict[str, Any]) -> str:
    containers = [c for c in (spec.get("containers") or []) if isinstance(c, dict)]
    requests_seen = limits_seen = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        requests_seen = requests_seen or bool(requests)
        limits_seen = limits_seen or bool(limits)
        for res in ("cpu", "memory"):
            if res not in limits or requests.get(res, limits[res]) != limits[res]:
                guaranteed = False
    if guaranteed:
        return "Guaranteed"
    return "Burstable" if requests_seen or limits_seen else "BestEffort"


def admit_pod(obj: dict[str, Any]) -> None:
    """What the DefaultTolerationSeconds and Priority admission plugins add to a new Pod
    (after its managedFields are recorded, as admission runs after the field manager)."""
    spec = obj.setdefault("spec", {})
    tolerations = spec.setdefault("tolerations", [])
    present = {(t.get("key"), t.get("effect")) for t in tolerations if isinstance(t, dict)}
    for toleration in DEFAULT_TOLERATIONS:
        if (toleration["key"], toleration["effect"]) not in present:
            tolerations.append(dict(toleration))
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")


def default_pod(obj: dict[str, Any], old: dict[str, Any] | None = None) -> None:
    spec = obj.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("enableServiceLinks", True)
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", qos_class(spec))


def validate_pod(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """The update rule (containers and names are checked by ``validation_builtin``)."""
    spec = obj.get("spec") or {}
    containers = spec.get("containers") or []
    errors: list[FieldError] = []
    if old is not None:
        old_names = [c.get("name") for c in (old.get("spec") or {}).get("containers") or []]
        new_names = [c.get("name") for c in containers if isinstance(c, dict)]
        if sorted(map(str, old_names)) != sorted(map(str, new_names)):
            errors.append(
                FieldError(
                    ErrorType.FORBIDDEN,
                    "spec.containers",
                    "pod updates may not add or remove containers",
                )
            )
    return errors
