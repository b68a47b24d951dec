"""Table columns of built-in types, after kubernetes ``pkg/printers/internalversion``.

``PRINTERS[(group, plural)]`` is ``(columns, cells)``: the column definitions the real server
sends and a function of the stored object (storage shape) and the wall-clock time giving the
row's cells. Wide columns (``kubectl get -o wide``) have priority 1. Covered: pods,
configmaps, secrets, namespaces, services, serviceaccounts, events (core and
events.k8s.io: one storage), leases, deployments, replicasets, statefulsets,
controllerrevisions, roles, clusterroles, rolebindings, clusterrolebindings and CRDs; the
rest print NAME/AGE. Simplified against the real printers: pod RESTARTS is the count without
"(5m ago)", pod STATUS does not look at init containers, descriptions are shortened.
``human_duration`` is apimachinery's ``duration.HumanDuration`` (the AGE cells).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from loadtest.apiserver import timefmt

Cells = Callable[[Mapping[str, Any], float], list[Any]]
NONE = "<none>"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    format: str
    priority: int
    description: str

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


def col(name: str, type_: str = "string", *, wide: bool = False, fmt: str = "") -> Column:
    return Column(name, type_, fmt, 1 if wide else 0, name)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def human_duration(seconds: float) -> str:
    """apimachinery ``duration.HumanDuration`` of a duration in seconds."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        return _units(minutes, "m", whole % 60, "s")
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        return _units(hours, "h", minutes % 60, "m")
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return _units(hours // 24, "d", hours % 24, "h")
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        return _units(hours // 24 // 365, "y", (hours // 24) % 365, "d")
    return f"{hours // 24 // 365}y"


def _units(count: int, unit: str, rest: int, rest_unit: str) -> str:
    """``3m``, or ``3m20s`` when there is a rest in the smaller unit."""
    return f"{count}{unit}{rest}{rest_unit}" if rest else f"{count}{unit}"


def since(stamp: Any, now: float, *, micro: bool = False) -> str:
    """``translateTimestampSince``: a human age, ``<unknown>`` for no time."""
    if not isinstance(stamp, str) or not stamp:
        return "<unknown>"
    try:
        moment = timefmt.parse(stamp, micro=micro)
    except ValueError:
        return "<unknown>"
    return human_duration(now - moment.timestamp())


def age(obj: Mapping[str, Any], now: float) -> str:
    return since(_meta(obj).get("creationTimestamp"), now)


def _name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name", ""))


def selector_string(selector: Mapping[str, Any] | None) -> str:
    """``metav1.FormatLabelSelector``: ``a=b,c in (d,e)``; ``<none>`` when empty."""
    if not selector:
        return NONE
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        op, key, values = expr.get("operator"), expr.get("key"), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or NONE


def _map_selector(selector: Mapping[str, Any] | None) -> str:
    if not selector:
        return NONE
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def _containers(obj: Mapping[str, Any]) -> tuple[str, str]:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = spec.get("containers") or []
    return (
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    )


# --- core -----------------------------------------------------------------------------------


def _pod(obj: Mapping[str, Any], now: float) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    statuses = status.get("containerStatuses") or []
    reason = status.get("reason") or status.get("phase") or ""
    ready = restarts = 0
    running = False
    for cs in reversed(statuses):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated:
            code = terminated.get("exitCode", 0)
            signal = terminated.get("signal")
            reason = f"Signal:{signal}" if signal else f"ExitCode:{code}"
        elif cs.get("ready") and "running" in state:
            running = True
            ready += 1
    if reason == "Completed" and running:
        reason = "Running"
    if _meta(obj).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    gates = spec.get("readinessGates") or []
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    gates_text = (
        f"{sum(conditions.get(g.get('conditionType')) == 'True' for g in gates)}/{len(gates)}"
        if gates
        else NONE
    )
    return [
        _name(obj),
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        str(restarts),
        age(obj, now),
        status.get("podIP") or NONE,
        spec.get("nodeName") or NONE,
        status.get("nominatedNodeName") or NONE,
        gates_text,
    ]


POD = (
    (
        col("Name", fmt="name"),
        col("Ready"),
        col("Status"),
        col("Restarts"),
        col("Age"),
        col("IP", wide=True),
        col("Node", wide=True),
        col("Nominated Node", wide=True),
        col("Readiness Gates", wide=True),
    ),
    _pod,
)


def _service(obj: Mapping[str, Any], now: float) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    kind = spec.get("type") or "ClusterIP"
    external = list(spec.get("externalIPs") or [])
    if kind == "LoadBalancer":
        ingress = (status.get("loadBalancer") or {}).get("ingress") or []
        found = [i.get("ip") or i.get("hostname") for i in ingress] + external
        external_text = ",".join(str(x) for x in found if x) or "<pending>"
    elif kind == "ExternalName":
        external_text = str(spec.get("externalName", ""))
    else:
        external_text = ",".join(external) or NONE
    ports = []
    for port in spec.get("ports") or ():
        protocol = port.get("protocol") or "TCP"
        node = port.get("nodePort")
        ports.append(
            f"{port.get('port')}:{node}/{protocol}" if node else f"{port.get('port')}/{protocol}"
        )
    return [
        _name(obj),
        kind,
        spec.get("clusterIP") or NONE,
        external_text,
        ",".join(ports) or NONE,
        age(obj, now),
        _map_selector(spec.get("selector")),
    ]


SERVICE = (
    (
        col("Name", fmt="name"),
        col("Type"),
        col("Cluster-IP"),
        col("External-IP"),
        col("Port(s)"),
        col("Age"),
        col("Selector", wide=True),
    ),
    _service,
)


def _event_source(obj: Mapping[str, Any]) -> str:
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    host = source.get("host") or obj.get("reportingInstance") or ""
    return f"{component}, {host}" if host else str(component)


def _event(obj: Mapping[str, Any], now: float) -> list[Any]:
    first = (
        since(obj.get("firstTimestamp"), now)
        if obj.get("firstTimestamp")
        else since(obj.get("eventTime"), now, micro=True)
    )
    last = since(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first
    count = int(obj.get("count") or 0)
    series = obj.get("series")
    if series:
        last = since(series.get("lastObservedTime"), now, micro=True)
        count = int(series.get("count") or 0)
    elif count == 0:
        count = 1
    involved = obj.get("involvedObject") or {}
    return [
        last,
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        involved.get("fieldPath", ""),
        _event_source(obj),
        str(obj.get("message", "")).strip(),
        first,
        count,
        _name(obj),
    ]


EVENT = (
    (
        col("Last Seen"),
        col("Type"),
        col("Reason"),
        col("Object"),
        col("Subobject", wide=True),
        col("Source", wide=True),
        col("Message"),
        col("First Seen", wide=True),
        col("Count", "integer", wide=True),
        col("Name", wide=True),
    ),
    _event,
)


def _simple(*columns: tuple[Column, Callable[[Mapping[str, Any]], Any]]) -> tuple[Any, Cells]:
    """NAME, the given columns, AGE (wide columns after AGE, as the real printers order)."""
    narrow = [c for c in columns if c[0].priority == 0]
    wide = [c for c in columns if c[0].priority == 1]

    def cells(obj: Mapping[str, Any], now: float) -> list[Any]:
        return [
            _name(obj),
            *(get(obj) for _, get in narrow),
            age(obj, now),
            *(get(obj) for _, get in wide),
        ]

    defs = (col("Name", fmt="name"), *(c for c, _ in narrow), col("Age"), *(c for c, _ in wide))
    return defs, cells


def _len(field: str, *more: str) -> Callable[[Mapping[str, Any]], int]:
    return lambda obj: sum(len(obj.get(f) or ()) for f in (field, *more))


def _path(*keys: str, default: Any = 0) -> Callable[[Mapping[str, Any]], Any]:
    def get(obj: Mapping[str, Any]) -> Any:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, Mapping) else None
        return default if value is None else value

    return get


def _ready(obj: Mapping[str, Any]) -> str:
    replicas = (obj.get("spec") or {}).get("replicas", 1)
    return f"{(obj.get('status') or {}).get('readyReplicas', 0)}/{replicas}"


def _controller(obj: Mapping[str, Any]) -> str:
    for ref in _meta(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return f"{ref.get('kind')}/{ref.get('name')}"
    return NONE


def _role_ref(obj: Mapping[str, Any]) -> str:
    ref = obj.get("roleRef") or {}
    return f"{ref.get('kind')}/{ref.get('name')}"


def _subjects(kind: str) -> Callable[[Mapping[str, Any]], str]:
    def get(obj: Mapping[str, Any]) -> str:
        names = [
            (f"{s.get('namespace', '')}/{s.get('name')}" if kind == "ServiceAccount" else s["name"])
            for s in obj.get("subjects") or ()
            if s.get("kind") == kind and "name" in s
        ]
        return ", ".join(names)

    return get


def _created_at(obj: Mapping[str, Any], now: float) -> list[Any]:
    return [_name(obj), _meta(obj).get("creationTimestamp")]


CREATED_AT = ((col("Name", fmt="name"), col("Created At", "date")), _created_at)
WORKLOAD_WIDE = (
    (col("Containers", wide=True), lambda o: _containers(o)[0]),
    (col("Images", wide=True), lambda o: _containers(o)[1]),
)
BINDING = _simple(
    (col("Role"), _role_ref),
    (col("Users", wide=True), _subjects("User")),
    (col("Groups", wide=True), _subjects("Group")),
    (col("ServiceAccounts", wide=True), _subjects("ServiceAccount")),
)

PRINTERS: dict[tuple[str, str], tuple[Any, Cells]] = {
    ("", "pods"): POD,
    ("", "services"): SERVICE,
    ("", "events"): EVENT,
    ("events.k8s.io", "events"): EVENT,
    ("", "configmaps"): _simple((col("Data", "integer"), _len("data", "binaryData"))),
    ("", "secrets"): _simple(
        (col("Type"), _path("type", default="")), (col("Data", "integer"), _len("data"))
    ),
    ("", "namespaces"): _simple((col("Status"), _path("status", "phase", default=""))),
    ("", "serviceaccounts"): _simple((col("Secrets", "integer"), _len("secrets"))),
    ("coordination.k8s.io", "leases"): _simple(
        (col("Holder"), _path("spec", "holderIdentity", default=""))
    ),
    ("apps", "deployments"): _simple(
        (col("Ready"), _ready),
        (col("Up-to-date", "integer"), _path("status", "updatedReplicas")),
        (col("Available", "integer"), _path("status", "availableReplicas")),
        *WORKLOAD_WIDE,
        (col("Selector", wide=True), lambda o: selector_string(_path("spec", "selector")(o))),
    ),
    ("apps", "replicasets"): _simple(
        (col("Desired", "integer"), _path("spec", "replicas", default=1)),
        (col("Current", "integer"), _path("status", "replicas")),
        (col("Ready", "integer"), _path("status", "readyReplicas")),
        *WORKLOAD_WIDE,
        (col("Selector", wide=True), lambda o: selector_string(_path("spec", "selector")(o))),
    ),
    ("apps", "statefulsets"): _simple((col("Ready"), _ready), *WORKLOAD_WIDE),
    ("apps", "controllerrevisions"): _simple(
        (col("Controller"), _controller), (col("Revision", "integer"), _path("revision"))
    ),
    ("rbac.authorization.k8s.io", "roles"): CREATED_AT,
    ("rbac.authorization.k8s.io", "clusterroles"): CREATED_AT,
    ("rbac.authorization.k8s.io", "rolebindings"): BINDING,
    ("rbac.authorization.k8s.io", "clusterrolebindings"): BINDING,
    ("apiextensions.k8s.io", "customresourcedefinitions"): CREATED_AT,
}
