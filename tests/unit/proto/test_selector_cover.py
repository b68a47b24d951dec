"""``cover``: one selector that every object selected by any of several selectors matches."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proto.api.selectors import Selector, cover, parse


@pytest.mark.parametrize(
    ("given_", "expected"),
    [
        (["app=web"], "app in (web)"),
        (["app=web", "app in (db,web)"], "app in (db,web)"),
        (["app=web,tier=front", "app=db"], "app in (db,web)"),
        (["app=web", "app"], "app"),
        (["app>3", "app in (x)"], "app"),
        (["!app", "!app,tier"], "!app"),
        (["app!=a,app!=b", "app notin (b,c)"], "app notin (b)"),
        (["app=web", "tier=front"], ""),
        (["app=web", ""], ""),
        (["app", "!app"], ""),
        # contradictory values select nothing: left out
        (["app=web,app=db", "tier=x"], "tier in (x)"),
    ],
)
def test_cover_table(given_: list[str], expected: str) -> None:
    assert str(cover(parse(s) for s in given_)) == expected


def test_cover_of_nothing_is_nothing() -> None:
    assert cover([]).matches_nothing
    assert cover([Selector.nothing()]).matches_nothing
    assert str(cover([Selector.nothing(), parse("a=b")])) == "a in (b)"


def test_cover_renders_a_selector_the_server_parses_back() -> None:
    covered = cover([parse("app in (web,db),tier"), parse("app=cache,tier=x")])
    assert parse(str(covered)) == covered


_KEYS = ("a", "b", "c")
_VALUES = ("1", "2", "x")
_requirement = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(_KEYS), st.sampled_from(_VALUES)),
    st.builds(lambda k, v: f"{k}!={v}", st.sampled_from(_KEYS), st.sampled_from(_VALUES)),
    st.builds(
        lambda k, vs: f"{k} in ({','.join(vs)})",
        st.sampled_from(_KEYS),
        st.lists(st.sampled_from(_VALUES), min_size=1, max_size=3),
    ),
    st.builds(
        lambda k, vs: f"{k} notin ({','.join(vs)})",
        st.sampled_from(_KEYS),
        st.lists(st.sampled_from(_VALUES), min_size=1, max_size=3),
    ),
    st.sampled_from(_KEYS),
    st.builds(lambda k: "!" + k, st.sampled_from(_KEYS)),
    st.builds(lambda k, n: f"{k}>{n}", st.sampled_from(_KEYS), st.integers(0, 3)),
    st.builds(lambda k, n: f"{k}<{n}", st.sampled_from(_KEYS), st.integers(0, 3)),
)
_selector = st.lists(_requirement, max_size=4).map(lambda rs: parse(",".join(rs)))
_labels = st.dictionaries(
    st.sampled_from(_KEYS), st.sampled_from(("1", "2", "x", "y", "0", "5")), max_size=3
)


@settings(max_examples=400)
@given(st.lists(_selector, min_size=1, max_size=4), st.lists(_labels, min_size=1, max_size=8))
def test_cover_matches_whatever_any_selector_matches(
    selectors: list[Selector], objects: list[dict[str, str]]
) -> None:
    covered = cover(selectors)
    assert parse(str(covered)).requirements == covered.requirements
    for labels in objects:
        if any(s.matches(labels) for s in selectors):
            assert covered.matches(labels), (labels, str(covered))
