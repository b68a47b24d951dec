"""The coordinator's object cache: raw JSON bytes plus the metadata routing needs.

One ``Store`` per informer (per resource). Invariants:

- Each object is kept as the API server's raw JSON bytes (``Cached.raw``) and a few parsed
  fields (namespace, name, uid, resourceVersion, generation, ``status.observedGeneration``,
  labels, annotations for selectors, controller ownerRef, finalizers, whether it is being
  deleted).
- ``annotations`` keeps every key, but a value only when it could match an annotation
  selector: annotation selectors are label selectors, whose values are at most 63
  characters. A longer value (last-applied configurations...) is kept as ``LONG_VALUE``,
  which no selector value equals, so ``Exists``, ``!=`` and ``notin`` still match as on the
  real value, at no memory cost. metashard's ``metashard.io/sync-requested-at`` keeps its
  whole value, however long: any change of it must be seen (``proto.api.interventions``).
  Decoded dicts are never kept: a dict cache costs several
  times the JSON size, this little more than the JSON (``make bench BENCH=informer`` prints
  both against the raw bytes, ``make bench BENCH=coordinator`` per object of the fanout job).
- Memory per object is what makes a cache of 100,000 parents fit, so what repeats is shared:
  - strings that repeat across objects (namespaces, label keys and values, annotation keys,
    and the owner's kind, API version, name and uid) are interned, so a thousand objects in
    one namespace share one string, and the Pods of one ReplicaSet share its name and uid;
  - equal label maps, annotation maps (after ``LONG_VALUE``) and controller ownerRefs seen
    recently are one shared object (``_Recent``: a bounded table per process; the children of
    one parent carry the same labels and ownerRef, and the children of one controller the
    same annotation keys); the mappings are read-only by contract (typed ``Mapping``);
  - so are the annotations, generation, observedGeneration, deletion state and finalizers
    taken together (``Common``): most objects of a controller have them all equal, and one
    field of ``Cached`` for the five keeps it at 8 fields, 96 bytes instead of 128.
- What is each object's own is kept compact where that is exact: the resourceVersion as an
  int when the API server wrote a decimal revision, the uid as an int when it is a UUID
  (``manager.informers.compact``; ``Cached.version`` and ``Cached.packed_uid``, with
  ``Cached.resource_version`` and ``Cached.uid`` their text, built when asked for).
- Objects are held by namespace, then name: "the objects of a namespace" is no index of its
  own. The other indexes (by controller-owner uid, by label pair, the orphans without a
  controller ownerRef per namespace) are built the first time they are asked for
  (``owned_by``, ``select``, ``orphans``) and kept in step from then on, so a store nobody
  asks that (the parents of a CompositeController, say) pays nothing for them. An index
  bucket of up to ``SMALL_BUCKET`` objects of one namespace is a tuple ``(namespace,
  *names)`` of the strings the objects already hold, any other a set of keys: most buckets
  (a parent's children, a label value of one object) are small and in one namespace, and
  this way they cost no key tuple per object (measured: the indexes of the fanout job's
  ConfigMaps take 127 bytes per ConfigMap this way, 165 with tuples of keys).
- Indexes always agree with the objects: every method keeps the built ones in step; nothing
  else may mutate a ``Cached`` (it is frozen).
- ``Store`` is not thread-safe; it belongs to the coordinator's event loop.

``Stores`` is how the other parts reach the cache of a resource
(``manager.informers.shared.Informers`` conforms).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from manager.informers.compact import compact_uid, compact_version, uid_text, version_text
from proto.api.interventions import SYNC_REQUESTED_AT
from proto.api.selectors import Operator, Selector
from proto.kube.resources import Resource

ObjectKey = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped objects."""

_EMPTY_LABELS: Mapping[str, str] = {}
LONG_VALUE = "\0"
"""Stands for an annotation value longer than any label value (``Cached.annotations``)."""
_LABEL_VALUE_MAX = 63
_EQUALITY = (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)
SMALL_BUCKET = 8
"""Index buckets of up to this many objects of one namespace are tuples (56-112 bytes),
others sets."""
RECENT = 4096
"""Distinct label maps, annotation maps, ownerRefs and ``Common`` parts ``_Recent``
remembers (each)."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Recent(Generic[K, V]):
    """Equal values built from equal keys are one object, while their key was seen within the
    last ``RECENT`` distinct keys (the table is emptied when it is full: bounded, and a value
    already shared stays shared)."""

    __slots__ = ("_table",)

    def __init__(self) -> None:
        self._table: dict[K, V] = {}

    def get(self, key: K, build: Callable[[K], V]) -> V:
        table = self._table
        value = table.get(key)
        if value is None:
            if len(table) >= RECENT:
                table.clear()
            value = table[key] = build(key)
        return value


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """A controller ownerReference (``controller: true``)."""

    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class Common:
    """The part of a ``Cached`` that many objects have equal: an object of it per distinct
    value seen recently (``_Recent``), not per cached object."""

    annotations: Mapping[str, str]
    generation: int
    observed_generation: int | None
    deleting: bool
    finalizers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Cached:
    """One cached object: parsed metadata for routing, raw JSON bytes for everything else.

    ``version`` is the resourceVersion in compact form (``manager.informers.compact``: an int
    for the API server's decimal revisions), equal for equal resourceVersions;
    ``resource_version`` is its text. Likewise ``packed_uid`` and ``uid`` (an int for a
    UUID). ``common`` holds what siblings share (``annotations``, ``generation``,
    ``observed_generation``, ``deleting``, ``finalizers``, read through properties of the
    same names). ``generation`` is ``metadata.generation`` when it is an integer, else 0;
    ``observed_generation`` is ``status.observedGeneration`` when it is an integer, else
    None: the generation a controller that writes it last synced
    (``manager.routing.router``)."""

    namespace: str
    name: str
    packed_uid: int | str
    version: int | str
    labels: Mapping[str, str]
    owner: OwnerRef | None
    raw: bytes
    common: Common

    @property
    def key(self) -> ObjectKey:
        return (self.namespace, self.name)

    @property
    def uid(self) -> str:
        return uid_text(self.packed_uid)

    @property
    def resource_version(self) -> str:
        return version_text(self.version)

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.common.annotations

    @property
    def generation(self) -> int:
        return self.common.generation

    @property
    def observed_generation(self) -> int | None:
        return self.common.observed_generation

    @property
    def deleting(self) -> bool:
        return self.common.deleting

    @property
    def finalizers(self) -> tuple[str, ...]:
        return self.common.finalizers

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], raw: bytes) -> Cached:
        """Parse the routing metadata out of a decoded object whose JSON bytes are ``raw``."""
        meta = obj.get("metadata") or {}
        labels = meta.get("labels")
        annotations = meta.get("annotations")
        finalizers = meta.get("finalizers")
        refs = meta.get("ownerReferences")
        common = (
            _annotation_items(annotations) if annotations else (),
            _generation(meta.get("generation")),
            _observed_generation(obj.get("status")),
            meta.get("deletionTimestamp") is not None,
            tuple(finalizers) if finalizers else (),
        )
        return cls(
            namespace=sys.intern(meta.get("namespace") or ""),
            name=meta.get("name") or "",
            packed_uid=compact_uid(meta.get("uid") or ""),
            version=compact_version(meta.get("resourceVersion") or ""),
            labels=_RECENT_LABELS.get(tuple(labels.items()), _labels) if labels else _EMPTY_LABELS,
            owner=_controller_ref(refs) if refs else None,
            raw=raw,
            common=_RECENT_COMMON.get(common, _common),
        )


_CommonKey = tuple[tuple[tuple[str, str], ...], int, int | None, bool, tuple[str, ...]]
"""``Common``'s fields, with the annotations as ``_annotation_items``."""


def _common(key: _CommonKey) -> Common:
    items, generation, observed, deleting, finalizers = key
    annotations = _RECENT_ANNOTATIONS.get(items, _annotation_map) if items else _EMPTY_LABELS
    return Common(annotations, generation, observed, deleting, tuple(map(sys.intern, finalizers)))


def _labels(items: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    return {sys.intern(k): sys.intern(v) for k, v in items}


def _annotation_map(items: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    return {sys.intern(k): v for k, v in items}


def _annotation_items(annotations: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(
        [
            (
                k,
                v
                if type(v) is str and (len(v) <= _LABEL_VALUE_MAX or k == SYNC_REQUESTED_AT)
                else LONG_VALUE,
            )
            for k, v in annotations.items()
        ]
    )


def _owner(fields: tuple[str, str, str, str]) -> OwnerRef:
    return OwnerRef(*map(sys.intern, fields))


def _controller_ref(refs: Any) -> OwnerRef | None:
    for ref in refs:
        if ref.get("controller"):
            fields = (
                ref.get("apiVersion", ""),
                ref.get("kind", ""),
                ref.get("name", ""),
                ref.get("uid", ""),
            )
            return _RECENT_OWNERS.get(fields, _owner)
    return None


def _generation(generation: Any) -> int:
    return generation if type(generation) is int else 0


def _observed_generation(status: Any) -> int | None:
    if type(status) is not dict:
        return None
    observed = status.get("observedGeneration")
    return observed if type(observed) is int else None


_RECENT_LABELS: _Recent[tuple[tuple[str, str], ...], Mapping[str, str]] = _Recent()
_RECENT_ANNOTATIONS: _Recent[tuple[tuple[str, str], ...], Mapping[str, str]] = _Recent()
_RECENT_OWNERS: _Recent[tuple[str, str, str, str], OwnerRef] = _Recent()
_RECENT_COMMON: _Recent[_CommonKey, Common] = _Recent()

Bucket = tuple[str, ...] | set[ObjectKey]
"""``(namespace, *names)``, or a set of keys (see the module docstring); ``()`` is empty."""
Index = dict[Hashable, Bucket]
NamesOf = Callable[["Cached"], Iterable[Hashable]]
"""What an index files an object under (owner uid, label pairs, namespace of an orphan)."""


def _add(index: Index, name: Hashable, key: ObjectKey) -> None:
    bucket = index.get(name)
    if bucket is None:
        index[name] = key
    elif type(bucket) is tuple:
        namespace, object_name = key
        if bucket[0] != namespace:
            index[name] = {*_keys(bucket), key}
        elif object_name not in bucket[1:]:
            small = len(bucket) <= SMALL_BUCKET
            index[name] = (*bucket, object_name) if small else {*_keys(bucket), key}
    else:
        bucket.add(key)  # type: ignore[union-attr]


def _remove(index: Index, name: Hashable, key: ObjectKey) -> None:
    bucket = index.get(name)
    if bucket is None:
        return
    if type(bucket) is tuple:
        namespace, object_name = key
        if bucket[0] != namespace:
            return
        rest = tuple(n for n in bucket[1:] if n != object_name)
        if rest:
            index[name] = (namespace, *rest)
        else:
            del index[name]
    else:
        bucket.discard(key)  # type: ignore[union-attr]
        if not bucket:
            del index[name]


def _keys(bucket: Bucket) -> Iterable[ObjectKey]:
    if type(bucket) is tuple:
        namespace = bucket[0] if bucket else ""
        return [(namespace, name) for name in bucket[1:]]
    return bucket  # type: ignore[return-value]


def _size(bucket: Bucket) -> int:
    return max(len(bucket) - 1, 0) if type(bucket) is tuple else len(bucket)


def _owner_uid(obj: Cached) -> Iterable[Hashable]:
    return (obj.owner.uid,) if obj.owner is not None else ()


def _orphan_namespace(obj: Cached) -> Iterable[Hashable]:
    return (obj.namespace,) if obj.owner is None else ()


def _label_pairs(obj: Cached) -> Iterable[Hashable]:
    return obj.labels.items()


_INDEXES: tuple[NamesOf, ...] = (_owner_uid, _orphan_namespace, _label_pairs)
"""Every index: what it files an object under. They are built together."""
_BY_OWNER, _ORPHANS, _BY_LABEL = range(len(_INDEXES))


class Stores(Protocol):
    def store(self, resource: Resource) -> Store | None:
        """The cache of ``resource``; None when no informer of it runs."""
        ...


class Store:
    """Objects of one resource by namespace and name, with routing indexes."""

    def __init__(self) -> None:
        self._namespaces: dict[str, dict[str, Cached]] = {}
        self._count = 0
        # One per ``_INDEXES``, built together when one is first asked for (() until then).
        self._indexes: tuple[Index, ...] = ()

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Cached]:
        return iter([obj for names in self._namespaces.values() for obj in names.values()])

    def keys(self) -> set[ObjectKey]:
        return {(ns, name) for ns, names in self._namespaces.items() for name in names}

    def get(self, namespace: str, name: str) -> Cached | None:
        names = self._namespaces.get(namespace)
        return names.get(name) if names is not None else None

    def upsert(self, obj: Cached) -> Cached | None:
        """Insert or replace ``obj``; return the previous version, if any."""
        names = self._namespaces.get(obj.namespace)
        if names is None:
            names = self._namespaces[obj.namespace] = {}
        # Popped, not replaced: the name string of the new version becomes the key, so the
        # old version's is freed with it.
        old = names.pop(obj.name, None)
        names[obj.name] = obj
        if old is None:
            self._count += 1
        else:
            if old.labels == obj.labels and old.owner == obj.owner:
                return old  # the usual update: every index entry stays as it is
            self._index(old, _remove)
        self._index(obj, _add)
        return old

    def delete(self, namespace: str, name: str) -> Cached | None:
        """Remove an object; return what was cached, if anything."""
        names = self._namespaces.get(namespace)
        if names is None:
            return None
        old = names.pop(name, None)
        if old is not None:
            self._count -= 1
            if not names:
                del self._namespaces[namespace]
            self._index(old, _remove)
        return old

    def _index(self, obj: Cached, change: Callable[[Index, Hashable, ObjectKey], None]) -> None:
        """Enter ``obj`` in the indexes, if built; with ``change=_remove``, take it out."""
        if not self._indexes:
            return
        key = (obj.namespace, obj.name)
        for names_of, index in zip(_INDEXES, self._indexes, strict=True):
            for name in names_of(obj):
                change(index, name, key)

    def _built(self, which: int) -> Index:
        """The index ``which`` (its place in ``_INDEXES``); the first time one is asked for,
        every index is built from the objects."""
        if not self._indexes:
            self._indexes = tuple({} for _ in _INDEXES)
            for names in self._namespaces.values():
                for obj in names.values():
                    key = (obj.namespace, obj.name)
                    for index_of, index in zip(_INDEXES, self._indexes, strict=True):
                        for name in index_of(obj):
                            _add(index, name, key)
        return self._indexes[which]

    def _resolve(self, keys: Iterable[ObjectKey]) -> list[Cached]:
        namespaces = self._namespaces
        return [namespaces[ns][name] for ns, name in sorted(keys)]

    def _sorted(self) -> list[Cached]:
        return [obj for ns in sorted(self._namespaces) for obj in self.in_namespace(ns)]

    def in_namespace(self, namespace: str) -> list[Cached]:
        """Objects of one namespace ("" = the cluster-scoped ones), sorted by name."""
        names = self._namespaces.get(namespace)
        return [names[name] for name in sorted(names)] if names else []

    def owned_by(self, uid: str) -> list[Cached]:
        """Objects whose controller ownerReference has this uid."""
        return self._resolve(_keys(self._built(_BY_OWNER).get(uid, ())))

    def orphans(self, namespace: str | None) -> list[Cached]:
        """Objects without a controller ownerReference, in one namespace or (None) all."""
        orphans = self._built(_ORPHANS)
        if namespace is not None:
            return self._resolve(_keys(orphans.get(namespace, ())))
        return self._resolve(k for bucket in orphans.values() for k in _keys(bucket))

    def select(self, selector: Selector, *, namespace: str | None = None) -> list[Cached]:
        """Objects matching ``selector``, optionally within one namespace, sorted by key.

        Uses the label index for the most selective equality requirement when there is one
        (and when that is the whole selector, every object of its bucket matches).
        """
        if selector.matches_nothing:
            return []
        narrowest: Bucket | None = None
        for req in selector.requirements:
            if req.operator in _EQUALITY and len(req.values) == 1:
                bucket = self._built(_BY_LABEL).get((req.key, req.values[0]), ())
                if narrowest is None or _size(bucket) < _size(narrowest):
                    narrowest = bucket
        candidates: list[Cached]
        if narrowest is not None:
            candidates = self._resolve(_keys(narrowest))
            if len(selector.requirements) == 1:
                if namespace is None:
                    return candidates
                return [obj for obj in candidates if obj.namespace == namespace]
        elif namespace is not None:
            candidates = self.in_namespace(namespace)
        else:
            candidates = self._sorted()
        return [
            obj
            for obj in candidates
            if (namespace is None or obj.namespace == namespace) and selector.matches(obj.labels)
        ]
