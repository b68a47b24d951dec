"""Example controller objects shared by the API tests."""

from __future__ import annotations

from typing import Any

# The content of ../shared/bench/fanoutbench/manifests/fanout-compositecontroller.yaml, with
# ${HOOK_URL} filled in as the benchmark harness does.
FANOUT: dict[str, Any] = {
    "apiVersion": "metacontroller.k8s.io/v1alpha1",
    "kind": "CompositeController",
    "metadata": {"name": "fanout-bench"},
    "spec": {
        "generateSelector": True,
        "parentResource": {"apiVersion": "bench.metashard.io/v1", "resource": "fanouts"},
        "childResources": [
            {"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}
        ],
        "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:8080/sync", "timeout": "10s"}}},
    },
}


def _scalar(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    if text.lstrip("-").isdigit():
        return int(text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _block(lines: list[tuple[int, str]], start: int, indent: int) -> tuple[Any, int]:
    """Parse the block starting at ``lines[start]``, whose lines are indented ``indent``."""
    if lines[start][1].startswith("- "):
        items = []
        i = start
        while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
            # the item's first line continues two columns further in
            lines[i] = (indent + 2, lines[i][1][2:])
            item, i = _block(lines, i, indent + 2)
            items.append(item)
        return items, i
    mapping: dict[str, Any] = {}
    i = start
    while i < len(lines) and lines[i][0] == indent and not lines[i][1].startswith("- "):
        key, _, rest = lines[i][1].partition(":")
        rest = rest.strip()
        i += 1
        if rest:
            mapping[key] = _scalar(rest)
        elif i < len(lines) and (lines[i][0] > indent or lines[i][1].startswith("- ")):
            mapping[key], i = _block(lines, i, lines[i][0])
        else:
            mapping[key] = None
    return mapping, i


def load_simple_yaml(text: str) -> Any:
    """One block-style YAML document of mappings, lists and plain scalars (test fixtures)."""
    lines = []
    for raw in text.splitlines():
        content = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if content.strip():
            lines.append((len(content) - len(content.lstrip()), content.strip()))
    value, end = _block(lines, 0, lines[0][0])
    assert end == len(lines), f"unparsed YAML from line {end}"
    return value
