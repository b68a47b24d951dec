"""The chart as rendered offline, and the command lines its containers run.

- ``value_sets()``: the required values alone (``REQUIRED``: an image, which the chart has
  no default for) and with every ``charts/metashard/ci/*.yaml``.
- ``render(values)``: every object the chart's templates produce (helm-python-sdk, no
  cluster: ``lookup`` finds nothing, so generated Secrets are fresh), as dicts.
- ``containers(objects)``: for each container of each workload, what the kubelet would run:
  the command line after Kubernetes' ``$(VAR)`` expansion and the environment, with
  downward-API values filled in for a given pod. An end-to-end test starts these processes
  as the chart would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

CHART = Path(__file__).resolve().parents[2] / "charts" / "metashard"
ENTRYPOINT = ("metashard",)
"""The image's ``ENTRYPOINT`` (see ``Dockerfile``): containers give only ``args``."""

_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


REQUIRED: Mapping[str, Any] = {"image": {"repository": "registry.example.com/metashard"}}
"""The values an install must give (the chart refuses to install without an image)."""


def value_sets() -> dict[str, dict[str, Any]]:
    """``{"default": REQUIRED, "<ci file stem>": REQUIRED and the file's values, ...}``."""
    sets: dict[str, dict[str, Any]] = {"default": dict(REQUIRED)}
    for path in sorted((CHART / "ci").glob("*.yaml")):
        sets[path.stem] = {**REQUIRED, **(yaml.safe_load(path.read_text(encoding="utf-8")) or {})}
    return sets


def render(
    values: Mapping[str, Any], *, name: str = "metashard", namespace: str = "metashard"
) -> list[dict[str, Any]]:
    """Every rendered object, in template order (NOTES.txt excluded)."""
    import helm_python

    with helm_python.Chart.load(CHART) as chart:
        manifests = chart.render(dict(values), name=name, namespace=namespace, is_install=True)
    objects: list[dict[str, Any]] = []
    for path in sorted(manifests):
        if path.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(manifests[path]) if doc]
    return objects


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' expansion of ``$(VAR)`` in a container's command and args: a defined
    variable is replaced, an undefined one left as written, ``$$`` is a literal ``$``."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _VAR.sub(one, text)


@dataclass(frozen=True)
class Container:
    """One container of one workload, as rendered."""

    workload: dict[str, Any]
    spec: dict[str, Any]
    pod_spec: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.workload["kind"])

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def args(self) -> list[str]:
        return [str(arg) for arg in self.spec.get("args", ())]

    def environment(self, *, pod_name: str, namespace: str) -> dict[str, str]:
        """The container's environment variables as the kubelet sets them for a pod named
        ``pod_name`` in ``namespace``: literal values and ``metadata.name``/``.namespace``
        field references (anything else raises: this helper would not know its value)."""
        fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
        env: dict[str, str] = {}
        for item in self.spec.get("env", ()):
            if "value" in item:
                env[item["name"]] = expand(str(item["value"]), env)
                continue
            path = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            if path not in fields:
                raise ValueError(f"env {item['name']}: no value known for {item['valueFrom']}")
            env[item["name"]] = fields[path]
        return env

    def command_line(self, *, pod_name: str, namespace: str) -> list[str]:
        """What runs: the command (the image's entrypoint unless overridden) and the args,
        ``$(VAR)`` expanded with the container's environment."""
        env = self.environment(pod_name=pod_name, namespace=namespace)
        command = [str(part) for part in self.spec.get("command", ENTRYPOINT)]
        return [expand(part, env) for part in (*command, *self.args)]

    def volume_mounts(self) -> dict[str, dict[str, Any]]:
        """Mount path -> the pod volume mounted there."""
        volumes = {volume["name"]: volume for volume in self.pod_spec.get("volumes", ())}
        return {m["mountPath"]: volumes[m["name"]] for m in self.spec.get("volumeMounts", ())}


@dataclass(frozen=True)
class Deployed:
    """The chart's workloads by role."""

    coordinator: Container
    worker: Container
    extra: list[Container] = field(default_factory=list)


def containers(objects: list[dict[str, Any]]) -> list[Container]:
    """Every container of every Deployment and StatefulSet, in order."""
    found: list[Container] = []
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet"):
            pod_spec = obj["spec"]["template"]["spec"]
            found += [Container(obj, spec, pod_spec) for spec in pod_spec["containers"]]
    return found


def deployed(objects: list[dict[str, Any]]) -> Deployed:
    """The coordinator and worker containers (exactly one of each)."""
    by_name = {container.name: container for container in containers(objects)}
    rest = [c for name, c in by_name.items() if name not in ("coordinator", "worker")]
    return Deployed(coordinator=by_name["coordinator"], worker=by_name["worker"], extra=rest)
