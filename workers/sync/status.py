"""The parent status a controller writes. Pure.

- ``desired(hook_status, generation)``, for CompositeControllers: the hook's status replaces
  the parent's whole ``.status``; ``null`` or absent becomes ``{}``; ``observedGeneration``
  is always set to the parent's ``metadata.generation`` (0 when absent, as Go's
  ``GetGeneration``), overriding what the hook said. A DecoratorController writes the hook's
  status as it is, and only when it is not null.
- ``changed(parent, status)``: the write happens only when the parent's current status
  differs, by Go's ``reflect.DeepEqual`` (``workers.apply.deep_equal``: 3 is not 3.0, a
  missing status differs from ``{}``), so an unchanged parent costs no API call.
- ``body(parent, status)``: what to PUT to ``/status``: the parent as observed (its
  ``metadata.resourceVersion`` is the precondition) with the new status, without its
  ``managedFields`` (``workers.apply.put_body``). Shallow: the parent itself is not modified.
"""

from __future__ import annotations

from typing import Any

from proto.api.names import OBSERVED_GENERATION
from workers.apply import deep_equal, put_body


def desired(hook_status: dict[str, Any] | None, generation: Any) -> dict[str, Any]:
    observed = generation if isinstance(generation, int) and not isinstance(generation, bool) else 0
    return {**(hook_status or {}), OBSERVED_GENERATION: observed}


def changed(parent: dict[str, Any], status: dict[str, Any]) -> bool:
    return not deep_equal(parent.get("status"), status)


def body(parent: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {**put_body(parent), "status": status}
