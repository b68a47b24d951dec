"""The attempt a hook request belongs to, as request headers: a fencing token for hooks.

Every sync, finalize and customize request metashard sends carries these headers
(``attempt_headers``), so that a hook with effects outside Kubernetes can tell a request of
an attempt that lost its claim on the parent from one of the current attempt:

=====================================  ========================================================
``X-Metashard-Epoch``                  the coordinator's term (the Lease's transitions): only
                                       grows
``X-Metashard-Slot-Generation``        the generation of the assignment of the parent's slot to
                                       the calling worker: within one epoch, larger for every
                                       later assignment (``0`` on customize calls, which the
                                       coordinator makes itself)
``X-Metashard-Attempt``                the attempt's id: one per reconcile (every hook call of
                                       it), one per customize call; opaque and unique
``X-Metashard-Parent-Uid``             ``metadata.uid`` of the parent in the request
``X-Metashard-Parent-Resource-Version`` its ``metadata.resourceVersion``
``X-Metashard-Parent-Generation``      its ``metadata.generation`` (``0`` when it has none)
=====================================  ========================================================

The fencing token is the pair (epoch, slot generation), compared as a pair, per hook and
parent uid: a worker given the parent's slot later calls with a larger token than every
earlier holder. A hook that keeps the largest token it acted on per parent and refuses a
smaller one never acts for an attempt older than one it has acted for (``docs/hooks.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

EPOCH: Final = "X-Metashard-Epoch"
SLOT_GENERATION: Final = "X-Metashard-Slot-Generation"
ATTEMPT: Final = "X-Metashard-Attempt"
PARENT_UID: Final = "X-Metashard-Parent-Uid"
PARENT_RESOURCE_VERSION: Final = "X-Metashard-Parent-Resource-Version"
PARENT_GENERATION: Final = "X-Metashard-Parent-Generation"


def attempt_headers(
    *, epoch: int, generation: int, attempt: str, parent: Mapping[str, Any]
) -> dict[str, str]:
    """The headers of a hook request of ``attempt`` about ``parent`` (the object the request
    carries), under the fencing token (``epoch``, ``generation``)."""
    meta = parent.get("metadata")
    if not isinstance(meta, Mapping):
        meta = {}
    parent_generation = meta.get("generation")
    return {
        EPOCH: str(epoch),
        SLOT_GENERATION: str(generation),
        ATTEMPT: attempt,
        PARENT_UID: str(meta.get("uid") or ""),
        PARENT_RESOURCE_VERSION: str(meta.get("resourceVersion") or ""),
        PARENT_GENERATION: str(parent_generation if isinstance(parent_generation, int) else 0),
    }
