"""YAML request bodies (``application/yaml``, ``application/apply-patch+yaml``).

- ``loads(raw)`` parses YAML with implicit timestamps left as strings (Kubernetes reads them
  as strings); on a syntax error it raises ``decode.SyntaxProblem``.
"""

from __future__ import annotations

from typing import Any

import yaml  # type: ignore[import-untyped]

from loadtest.apiserver import decode


class _StringTimestampLoader(yaml.SafeLoader):  # type: ignore[misc]
    """YAML without implicit timestamps: Kubernetes reads them as strings."""


_StringTimestampLoader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def loads(raw: bytes) -> Any:
    try:
        return yaml.load(raw, Loader=_StringTimestampLoader)
    except yaml.YAMLError as err:
        raise decode.SyntaxProblem(f"error converting YAML to JSON: {err}") from None
