"""``/metrics``: kube-apiserver's request counter, in Prometheus text format.

``apiserver_request_total{code,component,group,resource,scope,subresource,verb,version}``
counts every API request as kube-apiserver labels it (verbs GET, LIST, WATCH, POST, PUT,
PATCH, DELETE, DELETECOLLECTION; scope ``resource``, ``namespace`` or ``cluster``;
non-resource requests have empty group/resource and the path as ``subresource``; code ``0``
for a request whose client went away before an answer, as kube-apiserver records it).
``apiserver_storage_objects{resource}`` reports stored objects per resource. Counting is a
dict increment: it sits on every request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

_LABELS = ("code", "component", "group", "resource", "scope", "subresource", "verb", "version")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    def __init__(self) -> None:
        self.requests: Counter[tuple[str, ...]] = Counter()

    def request(
        self,
        *,
        verb: str,
        group: str = "",
        version: str = "",
        resource: str = "",
        subresource: str = "",
        scope: str = "",
        code: int,
    ) -> None:
        self.requests[
            (str(code), "apiserver", group, resource, scope, subresource, verb, version)
        ] += 1

    def count(self, **labels: str) -> int:
        """Sum of requests whose labels match ``labels`` (for tests and benchmarks)."""
        index = {name: i for i, name in enumerate(_LABELS)}
        return sum(
            n
            for key, n in self.requests.items()
            if all(key[index[k]] == v for k, v in labels.items())
        )

    def render(self, objects: Callable[[], dict[str, int]]) -> str:
        lines = [
            "# HELP apiserver_request_total Counter of apiserver requests broken out for each "
            "verb, "
            "dry run value, group, version, resource, scope, component, and HTTP response code.",
            "# TYPE apiserver_request_total counter",
        ]
        for key, value in sorted(self.requests.items()):
            labels = ",".join(
                f'{name}="{_escape(v)}"' for name, v in zip(_LABELS, key, strict=True)
            )
            lines.append(f"apiserver_request_total{{{labels}}} {value}")
        lines += [
            "# HELP apiserver_storage_objects Number of stored objects at the time of last check "
            "split by kind.",
            "# TYPE apiserver_storage_objects gauge",
        ]
        for resource, count in sorted(objects().items()):
            lines.append(f'apiserver_storage_objects{{resource="{_escape(resource)}"}} {count}')
        return "\n".join(lines) + "\n"
