from __future__ import annotations

import orjson
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from manager.informers.store import LONG_VALUE, SMALL_BUCKET, Cached, OwnerRef, Store
from proto.api.selectors import parse


def _obj(ns: str, name: str, labels: dict[str, str], owner: str | None, rv: int) -> Cached:
    meta: dict[str, object] = {
        "namespace": ns,
        "name": name,
        "uid": f"uid-{ns}-{name}",
        "resourceVersion": str(rv),
        "labels": labels,
    }
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Thing", "name": "o", "uid": "x"},
            {
                "apiVersion": "example.com/v1",
                "kind": "Parent",
                "name": owner,
                "uid": owner,
                "controller": True,
            },
        ]
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    return Cached.from_object(obj, orjson.dumps(obj))


def test_metadata_is_parsed_and_raw_kept() -> None:
    obj = {
        "metadata": {
            "namespace": "ns",
            "name": "a",
            "uid": "u1",
            "resourceVersion": "7",
            "generation": 3,
            "labels": {"app": "x"},
            "deletionTimestamp": "2030-01-01T00:00:00Z",
            "ownerReferences": [
                {"apiVersion": "a/v1", "kind": "P", "name": "p", "uid": "pu", "controller": True}
            ],
        }
    }
    raw = orjson.dumps(obj)
    cached = Cached.from_object(obj, raw)
    assert cached.key == ("ns", "a")
    assert (cached.uid, cached.resource_version, cached.generation) == ("u1", "7", 3)
    assert cached.version == 7  # compact: an int for a decimal resourceVersion
    assert cached.labels == {"app": "x"}
    assert cached.owner == OwnerRef("a/v1", "P", "p", "pu")
    assert cached.deleting
    assert cached.raw is raw
    cluster = Cached.from_object({"metadata": {"name": "n"}}, b"{}")
    assert cluster.namespace == "" and cluster.owner is None and not cluster.deleting
    assert cluster.resource_version == ""
    opaque = Cached.from_object({"metadata": {"name": "o", "resourceVersion": "007"}}, b"{}")
    assert (opaque.version, opaque.resource_version) == ("007", "007")
    assert cached.packed_uid == "u1" and opaque.uid == ""
    uid = "0b6e2c36-4c1a-4f5e-9a41-2f8e7d0c9b1a"
    api = Cached.from_object({"metadata": {"name": "p", "uid": uid}}, b"{}")
    assert (api.packed_uid, api.uid) == (0x0B6E2C364C1A4F5E9A412F8E7D0C9B1A, uid)


def test_non_controller_owner_refs_make_an_orphan() -> None:
    obj = {
        "metadata": {
            "name": "a",
            "namespace": "n",
            "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "o", "uid": "u"}],
        }
    }
    store = Store()
    store.upsert(Cached.from_object(obj, b"{}"))
    assert [o.name for o in store.orphans("n")] == ["a"]
    assert store.owned_by("u") == []


def test_interning_shares_repeated_strings() -> None:
    a = _obj("team-a", "x", {"app": "web"}, None, 1)
    b = _obj("team-a", "y", {"app": "web"}, None, 2)
    assert a.namespace is b.namespace
    (ka, va), (kb, vb) = next(iter(a.labels.items())), next(iter(b.labels.items()))
    assert ka is kb and va is vb


def test_objects_that_repeat_labels_annotations_and_owner_share_them() -> None:
    """The children of one parent: one label map, one annotation map, one ownerRef, and one
    ``Common`` (annotations, generation, observedGeneration, deletion, finalizers)."""
    long = "x" * 64

    def child(name: str, value: str) -> Cached:
        meta = {
            "namespace": "n",
            "name": name,
            "labels": {"controller-uid": "p-uid"},
            "annotations": {"last-applied": value, "note": "same"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "P", "name": "p", "uid": "p-uid", "controller": True}
            ],
        }
        return Cached.from_object({"metadata": meta}, b"{}")

    a, b = child("a", long), child("b", long + "y")
    assert a.labels is b.labels and a.owner is b.owner
    assert a.annotations is b.annotations
    assert a.annotations == {"last-applied": LONG_VALUE, "note": "same"}
    assert a.common is b.common
    assert (a.generation, a.observed_generation, a.deleting) == (0, None, False)
    assert a.finalizers == ("example.com/keep",)
    c = child("c", "short")
    assert c.annotations == {"last-applied": "short", "note": "same"}
    assert c.labels is a.labels
    assert c.common is not a.common and c.finalizers is not a.finalizers
    assert c.finalizers[0] is a.finalizers[0]  # interned


def test_observed_generation_is_read_from_the_status() -> None:
    def cached(status: object) -> Cached:
        obj = {"metadata": {"name": "p", "generation": 3}, "status": status}
        return Cached.from_object(obj, b"{}")

    assert cached({"observedGeneration": 2}).observed_generation == 2
    assert cached({"observedGeneration": 3}).observed_generation == 3
    assert cached({}).observed_generation is None
    assert cached(None).observed_generation is None
    assert cached({"observedGeneration": "3"}).observed_generation is None
    assert cached({"observedGeneration": True}).observed_generation is None


def test_a_generation_that_is_not_an_integer_is_zero() -> None:
    for generation in ("3", 3.0, [3], None):
        obj = {"metadata": {"name": "p", "generation": generation}}
        assert Cached.from_object(obj, b"{}").generation == 0
    assert Cached.from_object({"metadata": {"name": "p", "generation": 3}}, b"{}").generation == 3


def test_a_new_version_does_not_keep_the_old_versions_name_alive() -> None:
    def decoded(rv: str) -> Cached:
        raw = orjson.dumps(
            {"metadata": {"namespace": "n", "name": "a-name", "resourceVersion": rv}}
        )
        return Cached.from_object(orjson.loads(raw), raw)

    store = Store()
    first, second = decoded("1"), decoded("2")
    assert first.name == second.name and first.name is not second.name
    store.upsert(first)
    store.upsert(second)
    ((_, name),) = store.keys()
    assert name is second.name


def test_large_index_buckets_stay_exact() -> None:
    """Buckets grow past ``SMALL_BUCKET`` and shrink back to empty."""
    store = Store()
    count = 3 * SMALL_BUCKET
    for i in range(count):
        store.upsert(_obj("n", f"c{i:02d}", {"app": "x"}, "p1", i))
    owned = store.owned_by("p1")
    assert [o.name for o in owned] == [f"c{i:02d}" for i in range(count)]
    assert len(store.select(parse("app=x"))) == count
    for i in range(0, count, 2):
        store.upsert(_obj("n", f"c{i:02d}", {"app": "y"}, None, 100 + i))
    assert len(store.owned_by("p1")) == len(store.select(parse("app=x"))) == count // 2
    assert [o.name for o in store.orphans("n")] == [f"c{i:02d}" for i in range(0, count, 2)]
    for i in range(count):
        store.delete("n", f"c{i:02d}")
    assert store.owned_by("p1") == store.orphans(None) == store.select(parse("app")) == []
    assert len(store) == 0 and store.keys() == set()


NAMESPACES = st.sampled_from(["", "a", "b"])
NAMES = st.sampled_from([f"n{i}" for i in range(12)])
LABELS = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["x", "y"]), max_size=2)
OWNERS = st.sampled_from([None, "p1", "p2"])


class StoreMachine(RuleBasedStateMachine):
    """Every answer equals a brute-force scan of a plain dict model. The indexes are built
    the first time ``check_indexes`` runs, at any point of a run, and kept in step after."""

    def __init__(self) -> None:
        super().__init__()
        self.store = Store()
        self.model: dict[tuple[str, str], Cached] = {}
        self.rv = 0

    def _sorted(self) -> list[Cached]:
        return sorted(self.model.values(), key=lambda o: o.key)

    @rule(ns=NAMESPACES, name=NAMES, labels=LABELS, owner=OWNERS)
    def upsert(self, ns: str, name: str, labels: dict[str, str], owner: str | None) -> None:
        self.rv += 1
        obj = _obj(ns, name, labels, owner, self.rv)
        assert self.store.upsert(obj) == self.model.get((ns, name))
        self.model[(ns, name)] = obj

    @rule(ns=NAMESPACES, name=NAMES)
    def delete(self, ns: str, name: str) -> None:
        assert self.store.delete(ns, name) == self.model.pop((ns, name), None)

    @rule()
    def check_indexes(self) -> None:
        objs = self._sorted()
        for ns in ("", "a", "b"):
            assert self.store.orphans(ns) == [
                o for o in objs if o.namespace == ns and o.owner is None
            ]
        assert self.store.orphans(None) == [o for o in objs if o.owner is None]
        for uid in ("p1", "p2"):
            assert self.store.owned_by(uid) == [
                o for o in objs if o.owner is not None and o.owner.uid == uid
            ]
        for text in ("app=x", "app=x,tier!=y", "!tier", "app in (x,y)", ""):
            selector = parse(text)
            for scope in (None, "a"):
                assert self.store.select(selector, namespace=scope) == [
                    o
                    for o in objs
                    if (scope is None or o.namespace == scope) and selector.matches(o.labels)
                ]

    @invariant()
    def objects_agree(self) -> None:
        objs = self._sorted()
        assert len(self.store) == len(objs)
        assert sorted(self.store, key=lambda o: o.key) == objs
        assert self.store.keys() == set(self.model)
        for ns in ("", "a", "b"):
            assert self.store.in_namespace(ns) == [o for o in objs if o.namespace == ns]
        for key, obj in self.model.items():
            assert self.store.get(*key) is obj


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=100, stateful_step_count=60, deadline=None)


def test_a_small_bucket_of_one_namespace_holds_the_objects_own_names() -> None:
    """No key tuple per indexed object: ``(namespace, *names)`` with the cached strings."""
    store = Store()
    children = [_obj("n", f"c{i}", {"app": "x"}, "p1", i) for i in range(3)]
    for child in children:
        store.upsert(child)
    assert [o.name for o in store.owned_by("p1")] == ["c0", "c1", "c2"]
    for index in (store._built(0), store._built(2)):
        bucket = index["p1"] if "p1" in index else index[("app", "x")]
        assert type(bucket) is tuple and bucket[0] == "n"
        assert all(name is child.name for name, child in zip(bucket[1:], children, strict=True))
    store.upsert(_obj("m", "c0", {"app": "x"}, "p1", 9))  # another namespace: a set of keys
    assert store._built(0)["p1"] == {("n", "c0"), ("n", "c1"), ("n", "c2"), ("m", "c0")}
    assert [o.key for o in store.select(parse("app=x"))] == [
        ("m", "c0"),
        ("n", "c0"),
        ("n", "c1"),
        ("n", "c2"),
    ]
