from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from manager.informers.store import Cached, Store
from manager.kinds.composite import CompositeView
from manager.routing.router import KeyIndex, Router
from manager.term.snapshots import parent_of, revisions_of, snapshot_of
from proto.api.controllers import parse_composite_controller
from proto.kube.resources import Resource
from proto.wire import ParentKey, Priority, slot_of
from tests.unit.manager.informers.fakes import Stores

THINGS = Resource("example.com", "v1", "things", "Thing", True, subresources=("status",))
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)


def controller(
    *, name: str = "cc", annotations: dict[str, str] | None = None, **spec: Any
) -> CompositeView:
    obj = {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": name, "uid": f"{name}-uid", "annotations": annotations or {}},
        "spec": {
            "parentResource": {"apiVersion": "example.com/v1", "resource": "things"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": {"webhook": {"url": "http://hook/sync"}}},
            **spec,
        },
    }
    return CompositeView(
        parse_composite_controller(obj), orjson.dumps(obj), "1", THINGS, (CONFIGMAPS,)
    )


def cached(
    name: str,
    *,
    ns: str = "ns",
    labels: dict[str, str] | None = None,
    owner: str | None = None,
    generation: int = 1,
    rv: int = 1,
    **extra: Any,
) -> Cached:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "uid": f"uid-{name}",
        "resourceVersion": str(rv),
        "generation": generation,
        "labels": labels or {},
    }
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "example.com/v1",
                "kind": "Thing",
                "name": owner,
                "uid": f"uid-{owner}",
                "controller": True,
            }
        ]
    meta.update(extra.pop("meta", {}))
    obj = {"apiVersion": "v1", "kind": "X", "metadata": meta, **extra}
    return Cached.from_object(obj, orjson.dumps(obj))


def key(name: str, ns: str = "ns") -> ParentKey:
    return ParentKey("CompositeController", "cc", "things.example.com", ns, name)


class World:
    def __init__(self, view: CompositeView) -> None:
        self.view = view
        self.stores = Stores(things=Store(), configmaps=Store())
        self.pushed: list[tuple[ParentKey, Priority]] = []
        self.keys = KeyIndex()
        self.router = Router(sink=self, keys=self.keys, stores=self.stores)
        self.router.controllers_changed([view], [view])

    def push(self, key: ParentKey, priority: Priority) -> None:
        self.pushed.append((key, priority))

    def parent(self, obj: Cached, *, initial: bool = False) -> None:
        old = self.stores["things"].upsert(obj)
        self.router.handler(THINGS)("MODIFIED" if old else "ADDED", old, obj, initial)

    def child(self, obj: Cached | None, old: Cached | None = None) -> None:
        if obj is not None:
            old = self.stores["configmaps"].upsert(obj)
        elif old is not None:
            self.stores["configmaps"].delete(old.namespace, old.name)
        self.router.handler(CONFIGMAPS)("MODIFIED", old, obj, False)


SELECTOR = {"selector": {"matchLabels": {"app": "a"}}}


def test_parents_children_and_orphans_are_routed_to_parent_keys() -> None:
    w = World(controller())
    w.parent(cached("p1", spec=SELECTOR), initial=True)
    w.parent(cached("p2", spec={"selector": {"matchLabels": {"app": "b"}}}))
    assert w.pushed == [(key("p1"), Priority.LOW), (key("p2"), Priority.LIVE)]
    assert w.keys.keys_of(range(1024)) == (key("p1"), key("p2"))
    w.pushed.clear()
    w.child(cached("c1", owner="p1"))  # owned
    w.child(cached("c2", labels={"app": "b"}))  # orphan selected by p2
    w.child(cached("c3", labels={"app": "z"}))  # orphan nobody selects
    w.child(cached("c4", ns="other", labels={"app": "a"}))  # another namespace
    assert w.pushed == [(key("p1"), Priority.LIVE), (key("p2"), Priority.LIVE)]


def test_adoption_and_release_notify_both_states_and_deletes_use_the_last_state() -> None:
    w = World(controller())
    w.parent(cached("p1", spec=SELECTOR))
    w.parent(cached("p2", spec={"selector": {"matchLabels": {"app": "b"}}}))
    orphan = cached("c", labels={"app": "a"})
    w.child(orphan)
    w.pushed.clear()
    w.child(cached("c", labels={"app": "a"}, owner="p2"))  # p2 adopted it
    assert {k for k, _ in w.pushed} == {key("p1"), key("p2")}
    w.pushed.clear()
    w.child(None, old=cached("c", labels={"app": "a"}, owner="p2"))
    assert [k for k, _ in w.pushed] == [key("p2")]


def test_children_of_other_owner_kinds_are_not_ours() -> None:
    w = World(controller())
    w.parent(cached("p1", spec=SELECTOR))
    w.pushed.clear()
    other = cached("c", labels={"app": "a"})
    obj = orjson.loads(other.raw)
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "Thing", "name": "p1", "uid": "x", "controller": True}
    ]
    w.child(Cached.from_object(obj, orjson.dumps(obj)))
    assert w.pushed == []


def test_label_selector_and_finalizer_decide_which_parents_are_handled() -> None:
    view = controller(
        parentResource={
            "apiVersion": "example.com/v1",
            "resource": "things",
            "labelSelector": {"matchLabels": {"tier": "gold"}},
        }
    )
    w = World(view)
    w.parent(cached("p", labels={"tier": "gold"}, spec=SELECTOR))
    w.parent(cached("p", labels={"tier": "tin"}, spec=SELECTOR))  # leaves: still notified
    w.parent(cached("p", labels={"tier": "tin"}, spec={"x": 1}, generation=2))  # not ours
    assert [k for k, _ in w.pushed] == [key("p"), key("p")]
    assert w.keys.keys_of(range(1024)) == ()
    kept = cached(
        "p",
        labels={"tier": "tin"},
        meta={"finalizers": ["metacontroller.io/compositecontroller-cc"]},
    )
    w.parent(kept)  # carries our finalizer: must still be finalized
    assert w.keys.keys_of(range(1024)) == (key("p"),)
    parent, _, _ = snapshot_of(view, parent_of(view, key("p"), w.stores), stores=w.stores)
    assert parent == kept.raw


SYNC = "metashard.io/sync-requested-at"
IGNORING_STATUS = controller(
    parentResource={
        "apiVersion": "example.com/v1",
        "resource": "things",
        "ignoreStatusChanges": True,
    }
)
GONE = {"deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["x.io/hold"]}


@pytest.mark.parametrize(
    ("before", "after", "pushed"),
    [
        ({}, {}, False),  # status only
        ({}, {"generation": 2}, True),
        ({}, {"labels": {"new": "1"}}, True),
        ({}, {"meta": {"annotations": {"new": "1"}}}, True),
        ({}, {"meta": GONE}, True),  # deletion starts
        # Every update of a parent being deleted: its finalize hook may wait on its status.
        ({"meta": GONE}, {"meta": GONE}, True),
    ],
)
def test_ignore_status_changes_drops_what_metacontroller_drops(
    before: dict[str, Any], after: dict[str, Any], pushed: bool
) -> None:
    w = World(IGNORING_STATUS)
    w.parent(cached("p", rv=1, spec=SELECTOR, **before))
    w.pushed.clear()
    w.parent(cached("p", rv=2, spec=SELECTOR, status={"x": 1}, **after))
    assert bool(w.pushed) is pushed


@pytest.mark.parametrize("length", [20, 200])
def test_a_sync_request_is_a_live_change_whatever_ignore_status_changes_says(length: int) -> None:
    """Any change of metashard.io/sync-requested-at, even deep in a value longer than an
    annotation selector could match, is pushed LIVE."""
    w = World(IGNORING_STATUS)
    asked = "x" * (length - 1)
    w.parent(cached("p", rv=1, spec=SELECTOR, meta={"annotations": {SYNC: asked + "1"}}))
    w.pushed.clear()
    w.parent(cached("p", rv=2, spec=SELECTOR, meta={"annotations": {SYNC: asked + "2"}}))
    assert w.pushed == [(key("p"), Priority.LIVE)]


def test_without_ignore_status_changes_every_update_is_pushed() -> None:
    w = World(controller())
    w.parent(cached("p", rv=1, spec=SELECTOR))
    w.parent(cached("p", rv=2, spec=SELECTOR, status={"x": 1}))
    assert [k for k, _ in w.pushed] == [key("p"), key("p")]


def test_generate_selector_claims_by_controller_uid() -> None:
    w = World(controller(generateSelector=True))
    w.parent(cached("p1"))
    w.pushed.clear()
    w.child(cached("c", labels={"controller-uid": "uid-p1"}))
    w.child(cached("d", labels={"controller-uid": "uid-other"}))
    assert w.pushed == [(key("p1"), Priority.LIVE)]


def test_snapshot_has_owned_children_and_matching_orphans_only() -> None:
    view = controller()
    w = World(view)
    w.parent(cached("p1", spec=SELECTOR))
    w.parent(cached("p2", spec=SELECTOR))
    for obj in (
        cached("owned", owner="p1"),
        cached("orphan", labels={"app": "a"}),
        cached("theirs", owner="p2", labels={"app": "a"}),
        cached("stranger", labels={"app": "x"}),
        cached("elsewhere", ns="other", labels={"app": "a"}),
    ):
        w.stores["configmaps"].upsert(obj)
    parent, children, related = snapshot_of(
        view, parent_of(view, key("p1"), w.stores), stores=w.stores
    )
    assert parent is not None and related == {}
    names = [orjson.loads(raw)["metadata"]["name"] for raw in children["ConfigMap.v1"]]
    assert names == ["owned", "orphan"]
    assert snapshot_of(view, parent_of(view, key("gone"), w.stores), stores=w.stores) == (
        None,
        {},
        {},
    )


def test_a_parent_without_a_usable_selector_claims_no_orphans() -> None:
    view = controller()
    w = World(view)
    w.parent(
        cached("p1", spec={"selector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}})
    )
    w.stores["configmaps"].upsert(cached("orphan", labels={"app": "a"}))
    w.stores["configmaps"].upsert(cached("owned", owner="p1"))
    _, children, _ = snapshot_of(view, parent_of(view, key("p1"), w.stores), stores=w.stores)
    assert [orjson.loads(r)["metadata"]["name"] for r in children["ConfigMap.v1"]] == ["owned"]


@pytest.mark.parametrize("scope", ["namespaced", "cluster"])
def test_keys_carry_the_namespace_only_for_namespaced_parents(scope: str) -> None:
    view = controller()
    if scope == "cluster":
        view = CompositeView(
            view.spec,
            view.raw,
            "1",
            Resource("example.com", "v1", "things", "Thing", False),
            (CONFIGMAPS,),
        )
    assert view.key(view.parent, "ns", "p") == ParentKey(
        "CompositeController",
        "cc",
        "things.example.com",
        "ns" if scope == "namespaced" else "",
        "p",
    )
    assert 0 <= slot_of(view.key(view.parent, "ns", "p")) < 1024


REVISIONS = Resource(
    "metacontroller.k8s.io", "v1alpha1", "controllerrevisions", "ControllerRevision", True
)
TYPE_LABELS = {
    "metacontroller.k8s.io/apiGroup": "example.com",
    "metacontroller.k8s.io/resource": "things",
}


def rolling_world() -> World:
    base = controller()
    view = CompositeView(base.spec, base.raw, "1", THINGS, (CONFIGMAPS, REVISIONS), REVISIONS)
    w = World(view)
    w.stores["controllerrevisions"] = Store()
    return w


def revision_event(w: World, obj: Cached) -> None:
    old = w.stores["controllerrevisions"].upsert(obj)
    w.router.handler(REVISIONS)("MODIFIED" if old else "ADDED", old, obj, False)


def test_revisions_are_routed_to_their_parent_and_sent_apart_from_children() -> None:
    w = rolling_world()
    assert [r.resource for r in w.view.definition.resources] == ["things", "configmaps"]
    w.parent(cached("p1", spec=SELECTOR))
    w.parent(cached("p2", spec=SELECTOR))
    other_type = {**TYPE_LABELS, "metacontroller.k8s.io/resource": "others"}
    events = [
        # Owned even when its labels miss the selector (Metacontroller #194).
        (cached("r-owned", owner="p1", labels={"other": "x"}), {"p1"}),
        (cached("r-orphan", labels={"app": "a", **TYPE_LABELS}), {"p1", "p2"}),
        (cached("r-other-type", labels={"app": "a", **other_type}), set()),
        (cached("r-theirs", owner="p2", labels={"app": "a", **TYPE_LABELS}), {"p2"}),
        (cached("r-elsewhere", ns="other", labels={"app": "a", **TYPE_LABELS}), set()),
    ]
    for obj, parents in events:
        w.pushed.clear()
        revision_event(w, obj)
        assert {k.name for k, _ in w.pushed} == parents, obj.name
        assert len(w.pushed) == len(parents)

    stores = w.stores
    _, children, _ = snapshot_of(w.view, parent_of(w.view, key("p1"), stores), stores=stores)
    assert list(children) == ["ConfigMap.v1"]
    names = [
        orjson.loads(raw)["metadata"]["name"]
        for raw in revisions_of(w.view, parent_of(w.view, key("p1"), stores), stores=stores)
    ]
    assert names == ["r-owned", "r-orphan"]
    assert revisions_of(w.view, parent_of(w.view, key("gone"), stores), stores=stores) == ()
    assert (
        revisions_of(controller(), parent_of(controller(), key("p1"), stores), stores=stores) == ()
    )


def test_revisions_of_cluster_scoped_parents_live_in_the_cluster_revision_namespace() -> None:
    cluster_things = Resource("example.com", "v1", "things", "Thing", False, ("status",))
    base = controller()
    view = CompositeView(
        base.spec, base.raw, "1", cluster_things, (CONFIGMAPS, REVISIONS), REVISIONS, "revs"
    )
    w = World(view)
    w.stores["controllerrevisions"] = Store()
    for name in ("p1", "p2"):
        parent = cached(name, ns="", spec=SELECTOR)
        w.stores["things"].upsert(parent)
        w.router.handler(cluster_things)("ADDED", None, parent, False)
    events = [
        (cached("r-owned", ns="revs", owner="p1"), {"p1"}),
        (cached("r-orphan", ns="revs", labels={"app": "a", **TYPE_LABELS}), {"p1", "p2"}),
        # Elsewhere: an orphan is nobody's; an owned one still wakes its parent.
        (cached("r-orphan-elsewhere", ns="other", labels={"app": "a", **TYPE_LABELS}), set()),
        (cached("r-owned-elsewhere", ns="other", owner="p1"), {"p1"}),
    ]
    for obj, parents in events:
        w.pushed.clear()
        revision_event(w, obj)
        assert {k.name for k, _ in w.pushed} == parents, obj.name
        assert {k.namespace for k, _ in w.pushed} <= {""}

    stores = w.stores
    names = [
        orjson.loads(raw)["metadata"]["name"]
        for raw in revisions_of(view, parent_of(view, key("p1", ns=""), stores), stores=stores)
    ]
    assert names == ["r-owned", "r-orphan"]


def test_revision_parents_are_the_older_revisions_with_children_materialized() -> None:
    w = rolling_world()
    parent = cached("p1", spec={**SELECTOR, "image": "v2"})

    def revision(name: str, image: str, children: bool) -> bytes:
        obj: dict[str, Any] = {
            "metadata": {"name": name, "namespace": "ns"},
            "parentPatch": {"spec": {**SELECTOR, "image": image}},
        }
        if children:
            obj["children"] = [{"apiGroup": "", "kind": "ConfigMap", "names": ["c"]}]
        return orjson.dumps(obj)

    latest, old, history = (
        revision("r2", "v2", True),
        revision("r1", "v1", True),
        revision("r0", "v0", False),
    )
    assert w.view.revision_parents(parent, (latest, history)) == ()
    ((name, raw),) = w.view.revision_parents(parent, (latest, old, history, b"not json"))
    assert name == "r1"
    assert orjson.loads(raw)["spec"] == {**SELECTOR, "image": "v1"}
    assert orjson.loads(raw)["metadata"]["name"] == "p1"
    assert controller().revision_parents(parent, (old,)) == ()  # keeps no revisions


KEYS = st.builds(
    ParentKey,
    st.sampled_from(["CompositeController", "DecoratorController"]),
    st.sampled_from(["cc", "dd"]),
    st.sampled_from(["things.example.com", "configmaps"]),
    st.sampled_from(["", "a"]),
    st.sampled_from([f"p{i}" for i in range(40)]),
)


@given(st.lists(st.tuples(st.booleans(), KEYS), max_size=120))
def test_the_key_index_holds_what_was_added_and_not_discarded_with_their_slots(
    steps: list[tuple[bool, ParentKey]],
) -> None:
    index, model = KeyIndex(), set[ParentKey]()
    for add, key in steps:
        # Each key built afresh, as the router does: equal keys, not the same object.
        fresh = ParentKey(*((field + ".")[:-1] for field in key))
        if add:
            index.add(fresh)
            model.add(key)
        else:
            index.discard(fresh)
            model.discard(key)
    assert index.keys_of(range(1024)) == tuple(sorted(model))
    for slot in {slot_of(k) for k in model}:
        assert index.keys_of([slot]) == tuple(sorted(k for k in model if slot_of(k) == slot))
    for _, key in steps:
        assert index.slot(key) == slot_of(key)
    held = index.keys_of(range(1024))
    assert len({id(k.resource) for k in held}) <= 2  # one string per group-resource
    mine = {id(k) for k in held}
    for _, key in steps:  # equal keys from elsewhere (the wire) find the index's own copy
        copy = index.held(ParentKey(*((field + ".")[:-1] for field in key)))
        assert (copy == key and id(copy) in mine) if key in model else copy is None
    for controller in (("CompositeController", "cc"), ("DecoratorController", "dd")):
        assert sorted(index.of_controller(controller)) == sorted(
            k for k in model if (k.kind, k.controller) == controller
        )


def test_many_keys_of_one_slot_are_found_and_discarded_in_any_order() -> None:
    keys = [ParentKey("CompositeController", "cc", "things", "ns", f"p{i}") for i in range(20_000)]
    slot = slot_of(keys[0])
    crowded = [k for k in keys if slot_of(k) == slot]  # about 20
    assert len(crowded) > 5
    index = KeyIndex()
    for key in reversed(crowded):
        index.add(ParentKey(*((field + ".")[:-1] for field in key)))
    own = index.keys_of([slot])
    assert own == tuple(sorted(crowded))
    for key in crowded:
        copy = index.held(key)
        assert copy == key and any(copy is mine for mine in own)
    for key in crowded[::2]:
        index.discard(key)
        assert index.held(key) is None
    left = sorted(set(crowded) - set(crowded[::2]))
    assert index.keys_of([slot]) == tuple(left)
    assert all(index.held(k) == k for k in left)


def test_a_cleared_key_index_holds_nothing_and_still_knows_slots() -> None:
    index = KeyIndex()
    key = ParentKey("CompositeController", "cc", "things.example.com", "ns", "p")
    index.add(key)
    index.clear()
    assert index.keys_of(range(1024)) == ()
    assert index.slot(key) == slot_of(key)


@pytest.mark.parametrize(
    ("generation", "status", "is_behind"),
    [
        (2, {"observedGeneration": 2}, False),  # synced at its generation
        (3, {"observedGeneration": 2}, True),  # edited since its last sync
        (1, None, True),  # never synced
        (1, {"children": 3}, True),  # a status without observedGeneration
    ],
)
def test_a_composite_parent_is_behind_when_its_status_did_not_observe_its_generation(
    generation: int, status: dict[str, Any] | None, is_behind: bool
) -> None:
    w = World(controller())
    if status is None:
        w.parent(cached("p", spec=SELECTOR, generation=generation))
    else:
        w.parent(cached("p", spec=SELECTOR, generation=generation, status=status))
    assert w.keys.behind_of(range(1024)) == ((key("p"),) if is_behind else ())
    assert w.keys.keys_of(range(1024)) == (key("p"),)


def test_behind_follows_the_parent_and_the_rebuild() -> None:
    view = controller()
    w = World(view)
    w.parent(cached("p", rv=1, spec=SELECTOR, generation=2, status={"observedGeneration": 1}))
    w.parent(cached("q", rv=1, spec=SELECTOR, generation=1, status={"observedGeneration": 1}))
    assert w.keys.behind_of(range(1024)) == (key("p"),)
    w.parent(cached("p", rv=2, spec=SELECTOR, generation=2, status={"observedGeneration": 2}))
    w.parent(cached("q", rv=2, spec=SELECTOR, generation=2, status={"observedGeneration": 1}))
    assert w.keys.behind_of(range(1024)) == (key("q"),)
    w.router.controllers_changed([view], [])  # rebuilt from the caches
    assert w.keys.behind_of(range(1024)) == (key("q"),)
    slot = slot_of(key("q"))
    assert w.keys.behind_of([slot]) == (key("q"),)
    assert w.keys.behind_of([s for s in range(1024) if s != slot]) == ()
