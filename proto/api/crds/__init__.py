"""The ``metacontroller.k8s.io/v1alpha1`` CustomResourceDefinitions, as shipped.

One JSON file per CRD (JSON is YAML too: ``kubectl apply -f`` takes these files as they are):
CompositeController and DecoratorController (cluster-scoped, short names ``cc``/``cctl`` and
``dec``/``decorators``) and ControllerRevision (namespaced). Their schemas are equivalent to
Metacontroller's own, so existing controller objects keep every field they have today:

- same fields, types, enums (update methods, hook versions, unmarshal modes), ``default: v1``
  for hook versions, required lists, ``format: duration`` for timeouts, atomic label selectors;
- ``parentPatch`` keeps unknown fields; ``status`` is an empty object with the status
  subresource on all three kinds;
- the webhook TLS and authentication objects (``clientTLS``, ``authorization``, ``basicAuth``)
  also keep unknown fields, so no setting of a newer Metacontroller release is pruned;
- the ``api-approved.kubernetes.io`` annotation the API server demands for a ``*.k8s.io`` group.

``yaml_documents()`` renders the same objects as YAML text, the form the Helm chart ships in
its ``crds/`` folder (``python -m proto.api.crds --yaml DIR`` writes them).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import yaml  # type: ignore[import-untyped]

YAML_HEADER = (
    "# Generated from proto/api/crds/{source}: do not edit. Change the JSON file\n"
    "# and run `python -m proto.api.crds --yaml charts/metashard/crds`.\n"
)


def load_crds() -> list[dict[str, Any]]:
    """Fresh copies of the CRD objects, ordered by name."""
    files = sorted(
        (entry for entry in resources.files(__name__).iterdir() if entry.name.endswith(".json")),
        key=lambda entry: entry.name,
    )
    return [json.loads(entry.read_text(encoding="utf-8")) for entry in files]


def yaml_documents() -> dict[str, str]:
    """``{"<plural>.<group>.yaml": text}`` for every CRD, in block style with the JSON's key
    order, each under a header naming its source file."""
    out: dict[str, str] = {}
    for crd in load_crds():
        name = crd["metadata"]["name"]
        body = yaml.safe_dump(crd, sort_keys=False, default_flow_style=False, width=100)
        out[f"{name}.yaml"] = YAML_HEADER.format(source=f"{name}.json") + body
    return out
