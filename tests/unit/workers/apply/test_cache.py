"""workers.apply.cache: Metacontroller's ``isCacheInvalid`` table, ownership and the bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workers.apply.cache import AppliedCache, Version

V = Version("u1", 2, "10")


@pytest.mark.parametrize(
    ("why", "recorded", "asked", "hash_", "fresh"),
    [
        ("no entry", None, V, "h", False),
        ("uid changed", V, Version("u2", 2, "10"), "h", False),
        ("hash changed", V, V, "other", False),
        (
            "generation 0, resourceVersion changed",
            Version("u1", 0, "10"),
            Version("u1", 0, "11"),
            "h",
            False,
        ),
        ("generation changed", V, Version("u1", 3, "10"), "h", False),
        ("all match", V, V, "h", True),
        (
            "generation 0, resourceVersion matches",
            Version("u1", 0, "10"),
            Version("u1", 0, "10"),
            "h",
            True,
        ),
        ("same generation, new resourceVersion", V, Version("u1", 2, "11"), "h", True),
        ("no uid is never fresh", Version("", 0, "1"), Version("", 0, "1"), "h", False),
    ],
)
def test_is_cache_invalid_table(
    why: str, recorded: Version | None, asked: Version, hash_: str, fresh: bool
) -> None:
    cache: AppliedCache[str] = AppliedCache()
    if recorded is not None:
        cache.record("p", "c", recorded, "h")
    assert cache.fresh("p", "c", asked, hash_) is fresh


def test_version_of_an_object() -> None:
    assert Version.of({"metadata": {"uid": "u", "generation": 4, "resourceVersion": "9"}}) == (
        Version("u", 4, "9")
    )
    assert Version.of({"metadata": {"uid": "u", "resourceVersion": "9"}}) == Version("u", 0, "9")
    assert Version.of({}) == Version("", 0, "")


def test_discard_drops_only_the_matching_owners() -> None:
    cache: AppliedCache[tuple[int, str]] = AppliedCache()
    for slot in (1, 2):
        for child in ("a", "b"):
            cache.record((slot, "p"), child, V, "h")
    assert cache.discard(lambda owner: owner[0] == 1) == 2
    assert not cache.fresh((1, "p"), "a", V, "h")
    assert cache.fresh((2, "p"), "a", V, "h") and cache.fresh((2, "p"), "b", V, "h")


def test_forget_and_the_bound() -> None:
    cache: AppliedCache[str] = AppliedCache(max_entries=2)
    cache.record("p", "a", V, "h")
    cache.record("p", "b", V, "h")
    assert cache.fresh("p", "a", V, "h")  # a is now the most recently used
    cache.record("p", "c", V, "h")
    assert len(cache) == 2
    assert not cache.fresh("p", "b", V, "h")
    cache.forget("p", "a")
    assert not cache.fresh("p", "a", V, "h") and cache.fresh("p", "c", V, "h")
    with pytest.raises(ValueError):
        AppliedCache(max_entries=0)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20)), max_size=60), st.integers(1, 10))
def test_never_more_than_the_bound_and_the_latest_is_kept(
    records: list[tuple[int, int]], bound: int
) -> None:
    cache: AppliedCache[int] = AppliedCache(max_entries=bound)
    for owner, child in records:
        cache.record(owner, child, V, "h")
        assert len(cache) <= bound
        assert cache.fresh(owner, child, V, "h")
