"""The built-in resources the emulator serves: the resource table.

Each entry carries its discovery data and its ``Kind``: a typed top-level decoding
(``schema.py``) plus the defaults and rules of ``rules.py``, ``workloads.py``, ``pods.py`` and
``events.py``. Storage is schemaless below the top-level fields.
"""

from __future__ import annotations

from typing import Any

from loadtest.apiserver import events, pods, rbac_validation, rules, workloads
from loadtest.apiserver.kinds import Builtin, Defaulter, Validator
from loadtest.apiserver.registry import (
    STATUS_VERBS,
    ResourceType,
    Subresource,
)
from loadtest.apiserver.scale import WORKLOADS
from loadtest.apiserver.schema import (
    ANY,
    BOOL,
    LIST,
    OBJECT,
    Field,
    Struct,
    spec_status,
    top,
)
from proto.api import validation as v

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


# --- the table -----------------------------------------------------------------------------


class _Decoded(Builtin):
    """A ``Builtin`` with a custom decode step."""

    def __init__(self, decode: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._decode = decode

    def decode(self, obj: dict[str, Any]) -> list[str]:
        return self._decode(obj)


def builtin_types() -> list[ResourceType]:
    """A fresh table (it holds per-cluster state such as the cluster-IP allocator)."""
    ips = rules.ClusterIPs()

    def workload(kind: str) -> Struct:
        return top(kind, spec_status(kind))

    def apps_workload(
        kind: str, short: str, defaults: Defaulter, *, scalable: bool = True
    ) -> ResourceType:
        """An apps/v1 workload: status (and scale) subresources, generation, selector rules."""
        plural = kind.lower() + "s"
        return ResourceType(
            "apps",
            "v1",
            plural,
            kind.lower(),
            kind,
            True,
            Builtin(workload(kind), defaults=defaults, validate=workloads.validate_workload),
            short_names=(short,),
            categories=("all",),
            subresources=(_scale(), _status(kind)) if scalable else (_status(kind),),
            status=True,
            generation=True,
            scale=WORKLOADS if scalable else None,
        )

    core: list[ResourceType] = [
        ResourceType(
            "",
            "v1",
            "configmaps",
            "configmap",
            "ConfigMap",
            True,
            _Decoded(
                rules.decode_configmap, struct=rules.CONFIG_MAP, validate=rules.validate_configmap
            ),
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
                defaults=rules.default_namespace,
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
                defaults=rules.default_pvc,
                validate=rules.validate_pvc,
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
                defaults=pods.default_pod,
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
                rules.decode_secret,
                struct=rules.SECRET,
                defaults=rules.default_secret,
                validate=rules.validate_secret,
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
            return_deleted=True,
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
                defaults=rules.service_defaults(ips),
                validate=rules.validate_service,
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
            return_deleted=True,
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
        apps_workload("DaemonSet", "ds", workloads.default_daemonset, scalable=False),
        apps_workload("Deployment", "deploy", workloads.default_deployment),
        apps_workload("ReplicaSet", "rs", workloads.default_replicaset),
        apps_workload("StatefulSet", "sts", workloads.default_statefulset),
    ]

    def rbac_type(
        kind: str,
        namespaced: bool,
        fields: dict[str, Field],
        defaults: Defaulter,
        validate: Validator,
    ) -> ResourceType:
        """An rbac.authorization.k8s.io/v1 type: names need only be one URL path segment."""
        return ResourceType(
            "rbac.authorization.k8s.io",
            "v1",
            kind.lower() + "s",
            kind.lower(),
            kind,
            namespaced,
            Builtin(
                top(kind, fields),
                defaults=defaults,
                validate=validate,
                name_rule=v.is_path_segment_name,
            ),
        )

    role_rules = {"rules": Field(LIST, omitempty=False)}
    binding = {"subjects": Field(LIST), "roleRef": Field(OBJECT, omitempty=False)}
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
            Builtin(workload("CronJob"), defaults=workloads.default_cronjob),
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
            Builtin(
                workload("Job"),
                defaults=workloads.default_job,
                validate=workloads.validate_job,
            ),
            categories=("all",),
            subresources=(_status("Job"),),
            status=True,
            generation=True,
        ),
        rbac_type(
            "ClusterRoleBinding",
            False,
            binding,
            rbac_validation.default_binding,
            rbac_validation.validate_cluster_role_binding,
        ),
        rbac_type(
            "ClusterRole",
            False,
            {**role_rules, "aggregationRule": Field(OBJECT)},
            rbac_validation.default_role,
            rbac_validation.validate_cluster_role,
        ),
        rbac_type(
            "RoleBinding",
            True,
            binding,
            rbac_validation.default_binding,
            rbac_validation.validate_role_binding,
        ),
        rbac_type(
            "Role",
            True,
            role_rules,
            rbac_validation.default_role,
            rbac_validation.validate_role,
        ),
        ResourceType(
            "coordination.k8s.io",
            "v1",
            "leases",
            "lease",
            "Lease",
            True,
            Builtin(
                top("Lease", {"spec": Field(rules.LEASE_SPEC, omitempty=False)}),
                defaults=rules.default_lease,
                validate=rules.validate_lease,
            ),
        ),
    ]
    return core + apps + others
