from __future__ import annotations

import hashlib
import math
import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.wire import SLOT_COUNT, ParentKey, assign, moves, slot_hash, slot_of
from tests.unit.proto.wire_strategies import parent_keys

# --- keys to slots -------------------------------------------------------------------------

KNOWN_SLOTS = [
    (
        ParentKey(
            "CompositeController", "catset-controller", "catsets.ctl.enisoc.com", "default", "web"
        ),
        139,
    ),
    (
        ParentKey(
            "DecoratorController", "service-per-pod", "statefulsets.apps", "default", "nginx"
        ),
        227,
    ),
    (ParentKey("CompositeController", "cc", "namespaces", "", "kube-system"), 552),
    (ParentKey("CompositeController", "cc", "things.example.com", "ns-1", "ünïcødé"), 454),
    (ParentKey("", "", "", "", ""), 158),
]


@pytest.mark.parametrize(("key", "slot"), KNOWN_SLOTS)
def test_slots_of_known_keys_never_change(key: ParentKey, slot: int) -> None:
    assert slot_of(key) == slot_hash(key) == slot


def test_slot_is_blake2b_of_the_nul_joined_fields() -> None:
    key = KNOWN_SLOTS[0][0]
    data = b"CompositeController\0catset-controller\0catsets.ctl.enisoc.com\0default\0web"
    assert key.canonical() == data
    digest = hashlib.blake2b(data, digest_size=8).digest()
    assert slot_of(key) == int.from_bytes(digest, "big") % 1024
    # asked again, by an equal key (the remembered answer), and for another slot count
    assert slot_of(ParentKey(*key)) == int.from_bytes(digest, "big") % 1024
    assert slot_of(key, slot_count=7) == int.from_bytes(digest, "big") % 7


@given(parent_keys, st.integers(min_value=1, max_value=2**20))
def test_slots_are_in_range(key: ParentKey, count: int) -> None:
    assert 0 <= slot_of(key) < SLOT_COUNT
    assert 0 <= slot_of(key, slot_count=count) < count
    assert slot_hash(key, slot_count=count) == slot_of(key, slot_count=count)


def test_every_field_of_the_key_matters() -> None:
    base = ParentKey("CompositeController", "cc", "things.example.com", "ns", "a")
    variants = [base._replace(**{field: "other"}) for field in ParentKey._fields]
    assert len({base.canonical(), *(v.canonical() for v in variants)}) == 6


def test_keys_spread_evenly_over_slots() -> None:
    counts = Counter(
        slot_of(ParentKey("CompositeController", "cc", "pods", f"ns-{i % 50}", f"p-{i}"))
        for i in range(100_000)
    )
    assert len(counts) == SLOT_COUNT
    mean = 100_000 / SLOT_COUNT  # ~97.7; the binomial standard deviation is ~9.9
    assert mean * 0.5 < min(counts.values()) and max(counts.values()) < mean * 1.5


# --- slots to workers ----------------------------------------------------------------------


def _families(n: int) -> dict[str, list[str]]:
    """Worker id sets of size ``n`` as deployments name them."""
    rng = random.Random(n)
    return {
        "statefulset": [f"metashard-worker-{i}" for i in range(n)],
        "pod-hash": [f"metashard-worker-7d9c{rng.randrange(16**6):06x}" for _ in range(n)],
        "process": [f"node-{i // 4}/{i % 4}" for i in range(n)],
        "uuid": [f"{rng.getrandbits(128):032x}" for _ in range(n)],
    }


def test_a_small_assignment_is_pinned() -> None:
    assert assign(8, ["a", "b", "c"]) == {
        0: "b",
        1: "c",
        2: "a",
        3: "c",
        4: "a",
        5: "b",
        6: "b",
        7: "c",
    }


def test_each_slot_goes_to_the_worker_of_highest_weight() -> None:
    workers = [f"w-{i}" for i in range(5)]

    def weight(worker: str, slot: int) -> int:
        data = worker.encode() + slot.to_bytes(4, "big")
        return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")

    expected = {s: max(workers, key=lambda w: weight(w, s)) for s in range(64)}
    assert assign(64, workers, load_factor=100) == expected


worker_sets = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=12, unique=True)


@given(worker_sets, st.randoms(use_true_random=False))
def test_assignment_depends_only_on_the_set_of_workers(
    workers: list[str], rnd: random.Random
) -> None:
    shuffled = [*workers, *workers[:2]]
    rnd.shuffle(shuffled)
    first = assign(256, workers)
    assert assign(256, shuffled) == first
    assert set(first) == set(range(256))
    assert set(first.values()) <= set(workers)


@given(worker_sets, st.sampled_from([1.0, 1.1, 1.5]))
def test_no_worker_exceeds_the_load_bound(workers: list[str], load_factor: float) -> None:
    counts = Counter(assign(256, workers, load_factor=load_factor).values())
    assert max(counts.values()) <= math.ceil(load_factor * 256 / len(workers))


@given(worker_sets, st.text(min_size=1, max_size=8))
def test_plain_rendezvous_moves_only_slots_the_newcomer_wins(
    workers: list[str], newcomer: str
) -> None:
    before = assign(256, workers, load_factor=1000)
    after = assign(256, [*workers, newcomer], load_factor=1000)
    assert all(after[s] == newcomer for s in moves(before, after))


@given(worker_sets.filter(lambda ws: len(ws) > 1), st.data())
def test_plain_rendezvous_moves_only_the_leavers_slots(
    workers: list[str], data: st.DataObject
) -> None:
    leaver = data.draw(st.sampled_from(workers))
    before = assign(256, workers, load_factor=1000)
    after = assign(256, [w for w in workers if w != leaver], load_factor=1000)
    assert all(before[s] == leaver for s in moves(before, after))
    assert leaver not in after.values()


@pytest.mark.parametrize("family", ["statefulset", "pod-hash", "process", "uuid"])
def test_four_to_five_workers_moves_about_a_fifth(family: str) -> None:
    four = _families(4)[family]
    five = [*four, _families(5)[family][-1]]
    moved = len(moves(assign(SLOT_COUNT, four), assign(SLOT_COUNT, five)))
    assert 0.10 * SLOT_COUNT <= moved <= 0.30 * SLOT_COUNT


@pytest.mark.parametrize("n", range(2, 17))
def test_adding_or_removing_one_worker_moves_about_one_nth(n: int) -> None:
    for workers in _families(n).values():
        base = assign(SLOT_COUNT, workers)
        grown = assign(SLOT_COUNT, [*workers, "newcomer"])
        shrunk = assign(SLOT_COUNT, workers[1:])
        assert len(moves(base, grown)) <= 1.5 * SLOT_COUNT / (n + 1)
        assert len(moves(base, shrunk)) <= 1.5 * SLOT_COUNT / n


@pytest.mark.parametrize("n", range(1, 17))
def test_every_worker_gets_its_share_within_35_percent(n: int) -> None:
    for family, workers in _families(n).items():
        counts = Counter(assign(SLOT_COUNT, workers).values())
        share = SLOT_COUNT / n
        assert len(counts) == n, family
        assert all(0.65 * share <= c <= 1.35 * share for c in counts.values()), (family, counts)


def test_edge_cases() -> None:
    assert assign(SLOT_COUNT, []) == {}
    assert assign(0, ["a"]) == {}
    assert assign([5, 9], ["a"]) == {5: "a", 9: "a"}
    assert assign(range(4), ["only"]) == dict.fromkeys(range(4), "only")
    with pytest.raises(ValueError, match="load_factor"):
        assign(4, ["a"], load_factor=0.9)
    with pytest.raises(ValueError, match="slots must be"):
        assign([-1], ["a"])


def test_moves_lists_changed_added_and_removed_slots() -> None:
    old = {0: "a", 1: "a", 2: "b", 3: "c"}
    new = {0: "a", 1: "b", 2: "b", 4: "c"}
    assert moves(old, new) == [1, 3, 4]
    assert moves(old, old) == []
