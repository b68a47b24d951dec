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
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def load_crds() -> list[dict[str, Any]]:
    """Fresh copies of the CRD objects, ordered by name."""
    files = sorted(
        (entry for entry in resources.files(__name__).iterdir() if entry.name.endswith(".json")),
        key=lambda entry: entry.name,
    )
    return [json.loads(entry.read_text(encoding="utf-8")) for entry in files]
