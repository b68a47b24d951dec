"""Workloads (apps and batch): defaults and the validation rules the emulator enforces.

- Deployments, ReplicaSets, StatefulSets and DaemonSets get ``SetDefaults_*`` (replicas,
  strategies, history limits) and their pod template's defaults; Jobs get their generated
  selector and ``controller-uid``/``job-name`` template labels; CronJobs their policies.
- ``spec.selector`` is required, must match the template's labels and may not change.
- Job templates need ``restartPolicy`` ``OnFailure`` or ``Never``.
"""

from __future__ import annotations

from typing import Any

from loadtest.apiserver import pods
from loadtest.apiserver.kinds import go_map
from proto.api.selectors import SelectorError, from_label_selector
from proto.api.validation import ErrorType, FieldError, Verbatim


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


_DEPLOYMENT_STATUS_COUNTS = (
    "observedGeneration",
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
    "terminatingReplicas",
    "collisionCount",
)


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
    status = obj.setdefault("status", {})
    if isinstance(status, dict):
        for key in _DEPLOYMENT_STATUS_COUNTS:
            if status.get(key) == 0:
                del status[key]  # int fields with omitempty: Go never writes a zero


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
