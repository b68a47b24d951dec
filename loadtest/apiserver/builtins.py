"""The built-in resources the emulator serves, with their defaults and validation rules.

Storage is schemaless beyond each type's top-level fields (see ``schema.py``); the rules here
are the ones controllers run into: namespace defaults, ConfigMap/Secret keys, Lease times and
durations, workload selectors, Job defaults, Service cluster IPs, PVC requirements.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import itertools
from typing import Any

from loadtest.apiserver import events, pods
from loadtest.apiserver.kinds import Builtin, go_map
from loadtest.apiserver.registry import (
    STATUS_VERBS,
    DecodeError,
    ResourceType,
    Subresource,
)
from loadtest.apiserver.scale import WORKLOADS
from loadtest.apiserver.schema import (
    ANY,
    BOOL,
    INT32,
    LIST,
    MICROTIME,
    OBJECT,
    STRING,
    STRING_MAP,
    Field,
    Struct,
    spec_status,
    top,
)
from proto.api import validation as v
from proto.api.selectors import SelectorError, from_label_selector
from proto.api.validation import ErrorType, FieldError, Verbatim

GROUP_ORDER = [
    "apps",
    "events.k8s.io",
    "batch",
    "rbac.authorization.k8s.io",
    "apiextensions.k8s.io",
    "coordination.k8s.io",
]


def _status(kind: str) -> Subresource:
    return Subresource("status", kind, STATUS_VERBS)


def _scale() -> Subresource:
    return Subresource("scale", "Scale", STATUS_VERBS, "autoscaling", "v1")


# --- namespaces ----------------------------------------------------------------------------


def default_namespace(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    meta = obj["metadata"]
    if meta.get("name"):
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}
    spec = obj.setdefault("spec", {})
    if old is None and not spec.get("finalizers"):
        spec["finalizers"] = ["kubernetes"]
    obj.setdefault("status", {}).setdefault("phase", "Active")


# --- configmaps and secrets ----------------------------------------------------------------


def _validate_keys(obj: dict[str, Any], field: str) -> list[FieldError]:
    return [
        FieldError(ErrorType.INVALID, f"{field}[{key}]", m, key)
        for key in obj.get(field) or {}
        for m in v.is_config_map_key(key)
    ]


def _immutable_data(
    obj: dict[str, Any], old: dict[str, Any] | None, fields: tuple[str, ...]
) -> list[FieldError]:
    if old is None or not old.get("immutable"):
        return []
    errors = [
        FieldError(ErrorType.FORBIDDEN, f, "field is immutable when `immutable` is set")
        for f in fields
        if obj.get(f) != old.get(f)
    ]
    if not obj.get("immutable"):
        errors.append(
            FieldError(
                ErrorType.FORBIDDEN, "immutable", "field is immutable when `immutable` is set"
            )
        )
    return errors


def validate_configmap(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    errors = _validate_keys(obj, "data")
    errors.extend(
        FieldError(ErrorType.INVALID, f"data[{key}]", "duplicate of key present in binaryData", key)
        for key in data
        if key in binary
    )
    errors.extend(_validate_keys(obj, "binaryData"))
    if sum(map(len, data.values())) + sum(map(len, binary.values())) > 1024 * 1024:
        errors.append(FieldError(ErrorType.TOO_LONG, "", "must have at most 1048576 bytes"))
    return errors + _immutable_data(obj, old, ("data", "binaryData"))


def _check_base64(obj: dict[str, Any], field: str) -> None:
    for value in (obj.get(field) or {}).values():
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise DecodeError("illegal base64 data at input byte 0") from None


def decode_configmap(obj: dict[str, Any]) -> list[str]:
    unknown = CONFIG_MAP.decode(obj)
    _check_base64(obj, "binaryData")
    return unknown


def decode_secret(obj: dict[str, Any]) -> list[str]:
    unknown = SECRET.decode(obj)
    _check_base64(obj, "data")
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode()
    return unknown


def validate_secret(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errors = _validate_keys(obj, "data")
    if old is not None and obj.get("type") != old.get("type"):
        errors.append(FieldError(ErrorType.INVALID, "type", "field is immutable", obj.get("type")))
    return errors + _immutable_data(obj, old, ("data",))


# --- leases --------------------------------------------------------------------------------


def validate_lease(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        errors.append(
            FieldError(
                ErrorType.INVALID, "spec.leaseDurationSeconds", "must be greater than 0", duration
            )
        )
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        errors.append(
            FieldError(
                ErrorType.INVALID,
                "spec.leaseTransitions",
                "must be greater than or equal to 0",
                transitions,
            )
        )
    return errors


# --- workloads -----------------------------------------------------------------------------


def _validate_selector(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    if not selector:
        return [FieldError(ErrorType.REQUIRED, "spec.selector", "")]
    try:
        parsed = from_label_selector(selector)
    except SelectorError as err:
        return [FieldError(ErrorType.INVALID, "spec.selector", str(err), selector)]
    errors = []
    if parsed.empty:
        errors.append(
            FieldError(
                ErrorType.INVALID,
                "spec.selector",
                "empty selector is invalid for deployment",
                selector,
            )
        )
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not parsed.matches(labels):
        errors.append(
            FieldError(
                ErrorType.INVALID,
                "spec.template.metadata.labels",
                "`selector` does not match template `labels`",
                Verbatim(go_map(labels)),
            )
        )
    if old is not None and (old.get("spec") or {}).get("selector") != selector:
        errors.append(
            FieldError(ErrorType.INVALID, "spec.selector", "field is immutable", selector)
        )
    return errors


def validate_workload(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errors = _validate_selector(obj, old)
    replicas = (obj.get("spec") or {}).get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        errors.append(
            FieldError(
                ErrorType.INVALID, "spec.replicas", "must be greater than or equal to 0", replicas
            )
        )
    return errors


def default_deployment(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    pods.default_template(obj)
    obj.setdefault("status", {})


def default_replicaset(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    obj.setdefault("spec", {}).setdefault("replicas", 1)
    pods.default_template(obj)
    obj.setdefault("status", {}).setdefault("replicas", 0)


def default_statefulset(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if strategy.get("type") == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {"partition": 0})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault(
        "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
    )
    pods.default_template(obj)
    status = obj.setdefault("status", {})
    status.setdefault("replicas", 0)
    status.setdefault("availableReplicas", 0)


def default_daemonset(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.setdefault("spec", {})
    strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if strategy.get("type") == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    pods.default_template(obj)
    status = obj.setdefault("status", {})
    for key in (
        "currentNumberScheduled",
        "numberMisscheduled",
        "desiredNumberScheduled",
        "numberReady",
    ):
        status.setdefault(key, 0)


def default_job(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.setdefault("spec", {})
    meta = obj["metadata"]
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    if old is None and not spec.get("manualSelector") and meta.get("uid"):
        uid, name = meta["uid"], meta.get("name", "")
        generated = {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        template = spec.setdefault("template", {})
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **generated}
    pods.default_template(obj, restart_policy=None)
    obj.setdefault("status", {})


def validate_job(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errors = _validate_selector(
        obj, None if old is None else {**old, "spec": {**old.get("spec", {})}}
    )
    policy = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("restartPolicy")
    if policy not in ("OnFailure", "Never"):
        errors.append(
            FieldError(
                ErrorType.REQUIRED if not policy else ErrorType.NOT_SUPPORTED,
                "spec.template.spec.restartPolicy",
                'valid values: "OnFailure", "Never"',
            )
            if not policy
            else FieldError(
                ErrorType.NOT_SUPPORTED,
                "spec.template.spec.restartPolicy",
                'supported values: "OnFailure", "Never"',
                policy,
            )
        )
    return errors


def default_cronjob(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    obj.setdefault("status", {})


# --- services ------------------------------------------------------------------------------


class ClusterIPs:
    """Hands out service cluster IPs from 10.96.0.0/12 (10.96.0.1 is ``kubernetes``)."""

    def __init__(self) -> None:
        network = ipaddress.ip_network("10.96.0.0/12")
        self._next = itertools.islice(network.hosts(), 1, None)

    def allocate(self) -> str:
        return str(next(self._next))


def service_defaults(ips: ClusterIPs) -> Any:
    def default(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            if not spec.get("clusterIP"):
                spec["clusterIP"] = ips.allocate()
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            if spec["clusterIP"] != "None":
                spec.setdefault("ipFamilies", ["IPv4"])
                spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])
        obj.setdefault("status", {}).setdefault("loadBalancer", {})

    return default


def validate_service(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors = []
    if (
        spec.get("type") != "ExternalName"
        and spec.get("clusterIP") != "None"
        and not spec.get("ports")
    ):
        errors.append(FieldError(ErrorType.REQUIRED, "spec.ports", ""))
    if old is not None:
        old_ip = (old.get("spec") or {}).get("clusterIP")
        if old_ip and spec.get("clusterIP") != old_ip:
            errors.append(
                FieldError(
                    ErrorType.INVALID,
                    "spec.clusterIPs[0]",
                    "may not change once set",
                    spec.get("clusterIP"),
                )
            )
    return errors


# --- persistent volume claims, RBAC --------------------------------------------------------


def default_pvc(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    obj.setdefault("status", {}).setdefault("phase", "Pending")


def validate_pvc(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors = []
    if not spec.get("accessModes"):
        errors.append(
            FieldError(ErrorType.REQUIRED, "spec.accessModes", "at least 1 access mode is required")
        )
    if not ((spec.get("resources") or {}).get("requests") or {}).get("storage"):
        errors.append(FieldError(ErrorType.REQUIRED, "spec.resources[storage]", ""))
    return errors


def validate_role(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errors = []
    for i, rule in enumerate(obj.get("rules") or []):
        if not isinstance(rule, dict) or not rule.get("verbs"):
            errors.append(
                FieldError(
                    ErrorType.REQUIRED, f"rules[{i}].verbs", "verbs must contain at least one value"
                )
            )
    return errors


def validate_binding(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    ref = obj.get("roleRef") or {}
    errors = []
    if not ref.get("name"):
        errors.append(FieldError(ErrorType.REQUIRED, "roleRef.name", ""))
    if old is not None and ref != old.get("roleRef"):
        errors.append(FieldError(ErrorType.INVALID, "roleRef", "cannot change roleRef", ref))
    return errors


def default_pod_with_spec(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    pods.default_pod(obj, old)


# --- the table -----------------------------------------------------------------------------

CONFIG_MAP = top(
    "ConfigMap",
    {"data": Field(STRING_MAP), "binaryData": Field(STRING_MAP), "immutable": Field(BOOL)},
)
SECRET = top(
    "Secret",
    {
        "data": Field(STRING_MAP),
        "stringData": Field(STRING_MAP),
        "type": Field(STRING),
        "immutable": Field(BOOL),
    },
)
LEASE_SPEC = Struct(
    "LeaseSpec",
    {
        "holderIdentity": Field(STRING),
        "leaseDurationSeconds": Field(INT32),
        "acquireTime": Field(MICROTIME),
        "renewTime": Field(MICROTIME),
        "leaseTransitions": Field(INT32),
        "strategy": Field(STRING),
        "preferredHolder": Field(STRING),
    },
)


class _Decoded(Builtin):
    """A ``Builtin`` with a custom decode step."""

    def __init__(self, decode: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._decode = decode

    def decode(self, obj: dict[str, Any]) -> list[str]:
        return self._decode(obj)


def _secret_defaults(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    obj.setdefault("type", "Opaque")


def _lease_defaults(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    obj.setdefault("spec", {})


def builtin_types() -> list[ResourceType]:
    """A fresh table (it holds per-cluster state such as the cluster-IP allocator)."""
    ips = ClusterIPs()

    def workloads(kind: str, group: str) -> Struct:
        return top(kind, spec_status(kind, group))

    core: list[ResourceType] = [
        ResourceType(
            "",
            "v1",
            "configmaps",
            "configmap",
            "ConfigMap",
            True,
            _Decoded(decode_configmap, struct=CONFIG_MAP, validate=validate_configmap),
            short_names=("cm",),
        ),
        ResourceType(
            "",
            "v1",
            "events",
            "event",
            "Event",
            True,
            events.EventKind(core=True),
            short_names=("ev",),
            watch_cache=False,
            create_on_update=True,
            field_selectors=tuple(events.selectable_fields({})),
        ),
        ResourceType(
            "",
            "v1",
            "namespaces",
            "namespace",
            "Namespace",
            False,
            Builtin(
                top("Namespace", spec_status("Namespace")),
                defaults=default_namespace,
                name_rule=v.is_dns1123_label,
            ),
            short_names=("ns",),
            verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
            subresources=(Subresource("finalize", "Namespace", ("update",)), _status("Namespace")),
            status=True,
            field_selectors=("status.phase",),
        ),
        ResourceType(
            "",
            "v1",
            "persistentvolumeclaims",
            "persistentvolumeclaim",
            "PersistentVolumeClaim",
            True,
            Builtin(
                top("PersistentVolumeClaim", spec_status("PersistentVolumeClaim")),
                defaults=default_pvc,
                validate=validate_pvc,
            ),
            short_names=("pvc",),
            subresources=(_status("PersistentVolumeClaim"),),
            status=True,
        ),
        ResourceType(
            "",
            "v1",
            "pods",
            "pod",
            "Pod",
            True,
            Builtin(
                top("Pod", spec_status("Pod")),
                defaults=default_pod_with_spec,
                validate=pods.validate_pod,
            ),
            short_names=("po",),
            categories=("all",),
            subresources=(
                Subresource("attach", "PodAttachOptions", ("create", "get")),
                Subresource("binding", "Binding", ("create",)),
                Subresource("ephemeralcontainers", "Pod", STATUS_VERBS),
                Subresource("eviction", "Eviction", ("create",), "policy", "v1"),
                Subresource("exec", "PodExecOptions", ("create", "get")),
                Subresource("log", "Pod", ("get",)),
                Subresource("portforward", "PodPortForwardOptions", ("create", "get")),
                Subresource(
                    "proxy", "PodProxyOptions", ("create", "delete", "get", "patch", "update")
                ),
                Subresource("resize", "Pod", STATUS_VERBS),
                _status("Pod"),
            ),
            status=True,
            generation=True,
            return_deleted=True,
            field_selectors=(
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ),
        ),
        ResourceType(
            "",
            "v1",
            "secrets",
            "secret",
            "Secret",
            True,
            _Decoded(
                decode_secret, struct=SECRET, defaults=_secret_defaults, validate=validate_secret
            ),
            field_selectors=("type",),
        ),
        ResourceType(
            "",
            "v1",
            "serviceaccounts",
            "serviceaccount",
            "ServiceAccount",
            True,
            Builtin(
                top(
                    "ServiceAccount",
                    {
                        "secrets": Field(LIST),
                        "imagePullSecrets": Field(LIST),
                        "automountServiceAccountToken": Field(BOOL),
                    },
                )
            ),
            short_names=("sa",),
            subresources=(
                Subresource("token", "TokenRequest", ("create",), "authentication.k8s.io", "v1"),
            ),
        ),
        ResourceType(
            "",
            "v1",
            "services",
            "service",
            "Service",
            True,
            Builtin(
                top("Service", spec_status("Service")),
                defaults=service_defaults(ips),
                validate=validate_service,
                name_rule=v.is_dns1123_label,
            ),
            short_names=("svc",),
            categories=("all",),
            subresources=(
                Subresource(
                    "proxy", "ServiceProxyOptions", ("create", "delete", "get", "patch", "update")
                ),
                _status("Service"),
            ),
            status=True,
        ),
    ]
    apps = [
        ResourceType(
            "apps",
            "v1",
            "controllerrevisions",
            "controllerrevision",
            "ControllerRevision",
            True,
            Builtin(top("ControllerRevision", {"data": Field(ANY), "revision": Field(ANY)})),
        ),
        ResourceType(
            "apps",
            "v1",
            "daemonsets",
            "daemonset",
            "DaemonSet",
            True,
            Builtin(
                workloads("DaemonSet", "v1"), defaults=default_daemonset, validate=validate_workload
            ),
            short_names=("ds",),
            categories=("all",),
            subresources=(_status("DaemonSet"),),
            status=True,
            generation=True,
        ),
        ResourceType(
            "apps",
            "v1",
            "deployments",
            "deployment",
            "Deployment",
            True,
            Builtin(
                workloads("Deployment", "v1"),
                defaults=default_deployment,
                validate=validate_workload,
            ),
            short_names=("deploy",),
            categories=("all",),
            subresources=(_scale(), _status("Deployment")),
            status=True,
            generation=True,
            scale=WORKLOADS,
        ),
        ResourceType(
            "apps",
            "v1",
            "replicasets",
            "replicaset",
            "ReplicaSet",
            True,
            Builtin(
                workloads("ReplicaSet", "v1"),
                defaults=default_replicaset,
                validate=validate_workload,
            ),
            short_names=("rs",),
            categories=("all",),
            subresources=(_scale(), _status("ReplicaSet")),
            status=True,
            generation=True,
            scale=WORKLOADS,
        ),
        ResourceType(
            "apps",
            "v1",
            "statefulsets",
            "statefulset",
            "StatefulSet",
            True,
            Builtin(
                workloads("StatefulSet", "v1"),
                defaults=default_statefulset,
                validate=validate_workload,
            ),
            short_names=("sts",),
            categories=("all",),
            subresources=(_scale(), _status("StatefulSet")),
            status=True,
            generation=True,
            scale=WORKLOADS,
        ),
    ]
    rules = {"rules": Field(LIST)}
    binding = {"subjects": Field(LIST), "roleRef": Field(OBJECT, omitempty=False)}
    rbac = "rbac.authorization.k8s.io"
    others = [
        ResourceType(
            "events.k8s.io",
            "v1",
            "events",
            "event",
            "Event",
            True,
            events.EventKind(core=False),
            short_names=("ev",),
            watch_cache=False,
            create_on_update=True,
            view=events.EventsView(),
            storage_name="/events",
            storage_gvk=("", "v1", "Event"),
            field_selectors=tuple(events.NEW_FIELD_ALIASES),
            field_aliases=events.NEW_FIELD_ALIASES,
        ),
        ResourceType(
            "batch",
            "v1",
            "cronjobs",
            "cronjob",
            "CronJob",
            True,
            Builtin(workloads("CronJob", "v1"), defaults=default_cronjob),
            short_names=("cj",),
            categories=("all",),
            subresources=(_status("CronJob"),),
            status=True,
            generation=True,
        ),
        ResourceType(
            "batch",
            "v1",
            "jobs",
            "job",
            "Job",
            True,
            Builtin(workloads("Job", "v1"), defaults=default_job, validate=validate_job),
            categories=("all",),
            subresources=(_status("Job"),),
            status=True,
            generation=True,
        ),
        ResourceType(
            rbac,
            "v1",
            "clusterrolebindings",
            "clusterrolebinding",
            "ClusterRoleBinding",
            False,
            Builtin(
                top("ClusterRoleBinding", binding),
                validate=validate_binding,
                name_rule=v.is_path_segment_name,
            ),
        ),
        ResourceType(
            rbac,
            "v1",
            "clusterroles",
            "clusterrole",
            "ClusterRole",
            False,
            Builtin(
                top("ClusterRole", {**rules, "aggregationRule": Field(OBJECT)}),
                validate=validate_role,
                name_rule=v.is_path_segment_name,
            ),
        ),
        ResourceType(
            rbac,
            "v1",
            "rolebindings",
            "rolebinding",
            "RoleBinding",
            True,
            Builtin(
                top("RoleBinding", binding),
                validate=validate_binding,
                name_rule=v.is_path_segment_name,
            ),
        ),
        ResourceType(
            rbac,
            "v1",
            "roles",
            "role",
            "Role",
            True,
            Builtin(top("Role", rules), validate=validate_role, name_rule=v.is_path_segment_name),
        ),
        ResourceType(
            "coordination.k8s.io",
            "v1",
            "leases",
            "lease",
            "Lease",
            True,
            Builtin(
                top("Lease", {"spec": Field(LEASE_SPEC, omitempty=False)}),
                defaults=_lease_defaults,
                validate=validate_lease,
            ),
        ),
    ]
    return core + apps + others
