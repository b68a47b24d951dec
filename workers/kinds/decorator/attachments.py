"""Which observed attachments are a target's, which orphans it may adopt. Pure.

As Metacontroller's decorator: an attachment belongs to a target when its controller
ownerReference is the target's uid **and** it carries ``metacontroller.k8s.io/
decorator-controller: <controller name>``. Objects the target owns without that annotation
(a StatefulSet's Pods, another decorator's attachments) are not ours: never touched.

metashard also adopts like a CompositeController does, within what a decorator can know: an
orphan (no controller ownerReference) carrying our annotation, not being deleted, in the
target's namespace (any namespace for a cluster-scoped target) is adoptable, and is adopted
when the hook wants an attachment of that type, namespace and name (Metacontroller would try
to create it and stop at AlreadyExists). A target being deleted adopts nothing, as in
Kubernetes' ControllerRefManager (``workers.sync.claims``): once its finalizers are gone
the garbage collector would delete what it adopted. An adoptable orphan the hook does not
want is left alone. Nothing is released: a decorator has no selector an attachment could
stop matching.

``stamp(desired, name)`` writes our annotation on a desired attachment (before apply, so it
is part of the last-applied configuration, as in Metacontroller).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from proto.api.names import DECORATOR_ANNOTATION
from workers.sync.observed import Observed


def annotated(child: Observed, name: str) -> bool:
    annotations = child.obj["metadata"].get("annotations")
    return isinstance(annotations, dict) and annotations.get(DECORATOR_ANNOTATION) == name


@dataclass(frozen=True, slots=True)
class Split:
    owned: tuple[Observed, ...]
    adoptable: tuple[Observed, ...]


def split(
    candidates: Iterable[Observed], *, uid: str, namespace: str, name: str, deleting: bool
) -> Split:
    """Sort one type's candidates for the target ``uid`` (in ``namespace``; ``""``: any),
    which is being deleted when ``deleting``: then nothing is adoptable."""
    owned: list[Observed] = []
    adoptable: list[Observed] = []
    for child in candidates:
        if not annotated(child, name):
            continue
        if child.controller_uid is not None:
            if child.controller_uid == uid:
                owned.append(child)
            continue
        if deleting or child.deleting or (namespace and child.namespace != namespace):
            continue
        adoptable.append(child)
    return Split(tuple(owned), tuple(adoptable))


def stamp(desired: dict[str, Any], name: str) -> None:
    """Set our annotation on a desired attachment (in place: it is the hook's fresh answer)."""
    metadata = desired["metadata"]
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict):
        annotations = metadata["annotations"] = {}
    annotations[DECORATOR_ANNOTATION] = name
