"""Validation of built-in specs for the fields controllers most often get wrong.

The wording is kube-apiserver's (``pkg/apis/core/validation``), so a 422 from the embedded
cluster reads like one from a real cluster. ``validate(kind, obj, old)`` covers:

- pod specs, in Pods and in the templates of Deployments, ReplicaSets, StatefulSets,
  DaemonSets, Jobs and CronJobs: ``containers`` required; each container's ``name``
  (required, a DNS-1123 label, unique across containers and init containers) and ``image``
  (required); ``ports[].containerPort`` (1-65535) and ``protocol``; ``imagePullPolicy``;
  ``env[].name`` required; ``volumes[].name`` (a unique DNS-1123 label);
  ``volumeMounts[]`` (``name`` of a declared volume, ``mountPath`` required);
  ``restartPolicy``;
- Services: ``type``; ``ports[]``: ``port`` and a numeric ``targetPort`` in 1-65535,
  ``protocol``, ``name`` required when there are several ports and unique, ``nodePort`` only
  for NodePort and LoadBalancer Services.

Wrong JSON types are refused earlier, while decoding (``spec_decode``). Not modelled: probes,
resources, security contexts, affinity and the other PodSpec fields.
"""

from __future__ import annotations

from typing import Any

from proto.api import validation as v
from proto.api.validation import ErrorType, FieldError

TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
PROTOCOLS = ("SCTP", "TCP", "UDP")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
RESTART_POLICIES = ("Always", "OnFailure", "Never")
SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
PORT_RANGE = "must be between 1 and 65535, inclusive"


def _one_of(value: Any, field: str, allowed: tuple[str, ...]) -> list[FieldError]:
    """``field.NotSupported`` for a set value outside ``allowed``."""
    if not value or value in allowed:
        return []
    supported = "supported values: " + ", ".join(f'"{x}"' for x in allowed)
    return [FieldError(ErrorType.NOT_SUPPORTED, field, supported, value)]


def _port_range(value: Any, field: str) -> list[FieldError]:
    """``IsValidPortNum``: an integer port must lie in 1-65535."""
    if isinstance(value, int) and not 1 <= value <= 65535:
        return [FieldError(ErrorType.INVALID, field, PORT_RANGE, value)]
    return []


def _label(value: Any, field: str, seen: set[str]) -> list[FieldError]:
    if not value:
        return [FieldError(ErrorType.REQUIRED, field, "")]
    errors = [FieldError(ErrorType.INVALID, field, m, value) for m in v.is_dns1123_label(value)]
    if value in seen:
        errors.append(FieldError(ErrorType.DUPLICATE, field, "", value))
    seen.add(value)
    return errors


def _container(
    c: dict[str, Any], path: str, names: set[str], volumes: set[str]
) -> list[FieldError]:
    errors = _label(c.get("name"), f"{path}.name", names)
    if not c.get("image"):
        errors.append(FieldError(ErrorType.REQUIRED, f"{path}.image", ""))
    for i, port in enumerate(c.get("ports") or ()):
        where = f"{path}.ports[{i}]"
        number = port.get("containerPort") or 0
        if number == 0:
            errors.append(FieldError(ErrorType.REQUIRED, f"{where}.containerPort", ""))
        else:
            errors.extend(_port_range(number, f"{where}.containerPort"))
        errors.extend(_one_of(port.get("protocol"), f"{where}.protocol", PROTOCOLS))
    for i, env in enumerate(c.get("env") or ()):
        if not env.get("name"):
            errors.append(FieldError(ErrorType.REQUIRED, f"{path}.env[{i}].name", ""))
    for i, mount in enumerate(c.get("volumeMounts") or ()):
        where = f"{path}.volumeMounts[{i}]"
        name = mount.get("name")
        if not name:
            errors.append(FieldError(ErrorType.REQUIRED, f"{where}.name", ""))
        elif name not in volumes:
            errors.append(FieldError(ErrorType.NOT_FOUND, f"{where}.name", "", name))
        if not mount.get("mountPath"):
            errors.append(FieldError(ErrorType.REQUIRED, f"{where}.mountPath", ""))
    errors.extend(_one_of(c.get("imagePullPolicy"), f"{path}.imagePullPolicy", PULL_POLICIES))
    return errors


def validate_pod_spec(spec: dict[str, Any], path: str) -> list[FieldError]:
    """The pod-spec rules listed in the module docstring, for a spec at ``path``."""
    errors: list[FieldError] = []
    volumes: set[str] = set()
    for i, volume in enumerate(spec.get("volumes") or ()):
        errors.extend(_label(volume.get("name"), f"{path}.volumes[{i}].name", volumes))
    names: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(key) or ()):
            errors.extend(_container(container, f"{path}.{key}[{i}]", names, volumes))
    if not spec.get("containers"):
        errors.append(FieldError(ErrorType.REQUIRED, f"{path}.containers", ""))
    errors.extend(_one_of(spec.get("restartPolicy"), f"{path}.restartPolicy", RESTART_POLICIES))
    return errors


def validate_service_spec(spec: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    kind = spec.get("type") or "ClusterIP"
    errors.extend(_one_of(kind, "spec.type", SERVICE_TYPES))
    ports = spec.get("ports") or []
    names: set[str] = set()
    for i, port in enumerate(ports):
        where = f"spec.ports[{i}]"
        name = port.get("name")
        if len(ports) > 1 and not name:
            errors.append(FieldError(ErrorType.REQUIRED, f"{where}.name", ""))
        elif name and name in names:
            errors.append(FieldError(ErrorType.DUPLICATE, f"{where}.name", "", name))
        if name:
            names.add(name)
        errors.extend(_port_range(port.get("port") or 0, f"{where}.port"))
        errors.extend(_one_of(port.get("protocol"), f"{where}.protocol", PROTOCOLS))
        target = port.get("targetPort")
        if isinstance(target, int):
            errors.extend(_port_range(target, f"{where}.targetPort"))
        if port.get("nodePort") and kind not in ("NodePort", "LoadBalancer"):
            errors.append(
                FieldError(
                    ErrorType.FORBIDDEN,
                    f"{where}.nodePort",
                    f"may not be used when `type` is '{kind}'",
                )
            )
    return errors


def _at(obj: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    value: Any = obj
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else None


def validate(kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """The spec rules of a built-in ``kind`` (empty for kinds without any here)."""
    if kind == "Service":
        spec = _at(obj, ("spec",))
        return validate_service_spec(spec) if spec is not None else []
    path = TEMPLATE_PATHS.get(kind)
    if path is None:
        return []
    spec = _at(obj, path)
    if spec is None:
        return [FieldError(ErrorType.REQUIRED, ".".join((*path, "containers")), "")]
    return validate_pod_spec(spec, ".".join(path))
