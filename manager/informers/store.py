"""The coordinator's object cache: raw JSON bytes plus the metadata routing needs.

One ``Store`` per informer (per resource). Invariants:

- Each object is kept as the API server's raw JSON bytes (``Cached.raw``) and a few parsed
  fields (namespace, name, uid, resourceVersion, generation, labels, annotations for
  selectors, controller ownerRef, finalizers, whether it is being deleted).
- ``annotations`` keeps every key, but a value only when it could match an annotation
  selector: annotation selectors are label selectors, whose values are at most 63
  characters. A longer value (last-applied configurations...) is kept as ``LONG_VALUE``,
  which no selector value equals, so ``Exists``, ``!=`` and ``notin`` still match as on the
  real value, at no memory cost. Decoded dicts are never kept: a dict cache costs several
  times the JSON size, this little more than the JSON (``make bench BENCH=informer`` prints
  both against the raw bytes).
- Strings that repeat across objects (namespaces, label keys and values, and the owner's
  kind, API version, name and uid) are interned, so a thousand objects in one namespace share
  one string, and the Pods of one ReplicaSet share its name and uid.
- Indexes always agree with the objects: by namespace, by controller-owner uid, by label
  pair, and the orphans (no controller ownerRef) per namespace. Every method keeps them in
  step; nothing else may mutate a ``Cached`` (it is frozen).
- ``Store`` is not thread-safe; it belongs to the coordinator's event loop.

``Stores`` is how the other parts reach the cache of a resource
(``manager.informers.shared.Informers`` conforms).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from proto.api.selectors import Operator, Selector
from proto.kube.resources import Resource

ObjectKey = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped objects."""

_EMPTY_LABELS: Mapping[str, str] = {}
LONG_VALUE = "\0"
"""Stands for an annotation value longer than any label value (``Cached.annotations``)."""
_LABEL_VALUE_MAX = 63
_EQUALITY = (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """A controller ownerReference (``controller: true``)."""

    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class Cached:
    """One cached object: parsed metadata for routing, raw JSON bytes for everything else."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    generation: int
    labels: Mapping[str, str]
    owner: OwnerRef | None
    deleting: bool
    finalizers: tuple[str, ...]
    raw: bytes
    annotations: Mapping[str, str]

    @property
    def key(self) -> ObjectKey:
        return (self.namespace, self.name)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], raw: bytes) -> Cached:
        """Parse the routing metadata out of a decoded object whose JSON bytes are ``raw``."""
        meta = obj.get("metadata") or {}
        labels = meta.get("labels")
        annotations = meta.get("annotations")
        finalizers = meta.get("finalizers")
        return cls(
            namespace=sys.intern(meta.get("namespace") or ""),
            name=meta.get("name") or "",
            uid=meta.get("uid") or "",
            resource_version=meta.get("resourceVersion") or "",
            generation=meta.get("generation") or 0,
            labels=(
                {sys.intern(k): sys.intern(v) for k, v in labels.items()}
                if labels
                else _EMPTY_LABELS
            ),
            owner=_controller_ref(meta.get("ownerReferences")),
            deleting=meta.get("deletionTimestamp") is not None,
            finalizers=tuple(map(sys.intern, finalizers)) if finalizers else (),
            raw=raw,
            annotations=_annotations(annotations) if annotations else _EMPTY_LABELS,
        )


def _annotations(annotations: Mapping[str, Any]) -> Mapping[str, str]:
    return {
        sys.intern(k): v if isinstance(v, str) and len(v) <= _LABEL_VALUE_MAX else LONG_VALUE
        for k, v in annotations.items()
    }


def _controller_ref(refs: Any) -> OwnerRef | None:
    if not refs:
        return None
    for ref in refs:
        if ref.get("controller"):
            return OwnerRef(
                api_version=sys.intern(ref.get("apiVersion", "")),
                kind=sys.intern(ref.get("kind", "")),
                name=sys.intern(ref.get("name", "")),
                uid=sys.intern(ref.get("uid", "")),
            )
    return None


def _add(index: dict[Any, set[ObjectKey]], key: Any, value: ObjectKey) -> None:
    bucket = index.get(key)
    if bucket is None:
        index[key] = {value}
    else:
        bucket.add(value)


def _remove(index: dict[Any, set[ObjectKey]], key: Any, value: ObjectKey) -> None:
    bucket = index.get(key)
    if bucket is not None:
        bucket.discard(value)
        if not bucket:
            del index[key]


_Change = Callable[[dict[Any, set[ObjectKey]], Any, ObjectKey], None]


class Stores(Protocol):
    def store(self, resource: Resource) -> Store | None:
        """The cache of ``resource``; None when no informer of it runs."""
        ...


class Store:
    """Objects of one resource, keyed by (namespace, name), with routing indexes."""

    def __init__(self) -> None:
        self._objects: dict[ObjectKey, Cached] = {}
        self._by_namespace: dict[str, set[ObjectKey]] = {}
        self._by_owner: dict[str, set[ObjectKey]] = {}
        self._by_label: dict[tuple[str, str], set[ObjectKey]] = {}
        self._orphans: dict[str, set[ObjectKey]] = {}

    def __len__(self) -> int:
        return len(self._objects)

    def __iter__(self) -> Iterator[Cached]:
        return iter(list(self._objects.values()))

    def keys(self) -> set[ObjectKey]:
        return set(self._objects)

    def get(self, namespace: str, name: str) -> Cached | None:
        return self._objects.get((namespace, name))

    def upsert(self, obj: Cached) -> Cached | None:
        """Insert or replace ``obj``; return the previous version, if any."""
        key = obj.key
        old = self._objects.get(key)
        self._objects[key] = obj
        if old is not None:
            if old.labels == obj.labels and old.owner == obj.owner:
                return old  # the usual update: every index entry stays as it is
            self._index(old, key, _remove)
        self._index(obj, key)
        return old

    def delete(self, namespace: str, name: str) -> Cached | None:
        """Remove an object; return what was cached, if anything."""
        key = (namespace, name)
        old = self._objects.pop(key, None)
        if old is not None:
            self._index(old, key, _remove)
        return old

    # The indexes share the caller's key tuple instead of building one each.
    def _index(self, obj: Cached, key: ObjectKey, change: _Change = _add) -> None:
        """Enter ``obj`` in every index; with ``change=_remove``, take it out of them."""
        change(self._by_namespace, obj.namespace, key)
        if obj.owner is not None:
            change(self._by_owner, obj.owner.uid, key)
        else:
            change(self._orphans, obj.namespace, key)
        for pair in obj.labels.items():
            change(self._by_label, pair, key)

    def _resolve(self, keys: Iterable[ObjectKey]) -> list[Cached]:
        objects = self._objects
        return [objects[k] for k in sorted(keys)]

    def in_namespace(self, namespace: str) -> list[Cached]:
        """Objects of one namespace ("" = the cluster-scoped ones), sorted by name."""
        return self._resolve(self._by_namespace.get(namespace, ()))

    def owned_by(self, uid: str) -> list[Cached]:
        """Objects whose controller ownerReference has this uid."""
        return self._resolve(self._by_owner.get(uid, ()))

    def orphans(self, namespace: str | None) -> list[Cached]:
        """Objects without a controller ownerReference, in one namespace or (None) all."""
        if namespace is not None:
            return self._resolve(self._orphans.get(namespace, ()))
        return self._resolve(k for keys in self._orphans.values() for k in keys)

    def select(self, selector: Selector, *, namespace: str | None = None) -> list[Cached]:
        """Objects matching ``selector``, optionally within one namespace, sorted by key.

        Uses the label index for the most selective equality requirement when there is one.
        """
        if selector.matches_nothing:
            return []
        narrowest: set[ObjectKey] | None = None
        for req in selector.requirements:
            if req.operator in _EQUALITY and len(req.values) == 1:
                bucket = self._by_label.get((req.key, req.values[0]), set())
                if narrowest is None or len(bucket) < len(narrowest):
                    narrowest = bucket
        candidates: Iterable[ObjectKey]
        if narrowest is not None:
            candidates = narrowest
        elif namespace is not None:
            candidates = self._by_namespace.get(namespace, ())
        else:
            candidates = self._objects
        return [
            obj
            for obj in self._resolve(candidates)
            if (namespace is None or obj.namespace == namespace) and selector.matches(obj.labels)
        ]
