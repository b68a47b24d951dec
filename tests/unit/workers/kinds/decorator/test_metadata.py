"""workers.kinds.decorator.metadata: merging the hook's labels and annotations."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workers.kinds.decorator.metadata import changes, merged


@pytest.mark.parametrize(
    ("current", "wanted", "expected"),
    [
        ({}, {}, {}),
        (None, {"a": "1"}, {"a": "1"}),
        ({"a": "1"}, {"a": "1"}, {}),  # unchanged: nothing to write
        ({"a": "1"}, {"a": "2"}, {"a": "2"}),
        ({"a": "1", "b": "2"}, {"a": None}, {"a": None}),  # null removes
        ({"b": "2"}, {"a": None}, {}),  # removing what is absent: nothing
        ({"a": "1", "keep": "x"}, {"a": None, "c": "3"}, {"a": None, "c": "3"}),
    ],
)
def test_changes_are_what_differs(
    current: dict[str, str] | None, wanted: dict[str, str | None], expected: dict[str, str | None]
) -> None:
    assert changes(current, wanted) == expected


keys = st.sampled_from(["a", "b", "c", "d"])
values = st.sampled_from(["1", "2", ""])


@given(
    current=st.dictionaries(keys, values),
    wanted=st.dictionaries(keys, st.one_of(st.none(), values)),
)
def test_merging_the_changes_gives_what_the_hook_asked(
    current: dict[str, str], wanted: dict[str, str | None]
) -> None:
    result = merged(current, changes(current, wanted))
    for key, value in wanted.items():
        assert result.get(key) == value
    for key, value in current.items():
        if key not in wanted:
            assert result[key] == value  # keys not named are left alone
    assert changes(result, wanted) == {}  # a second pass writes nothing
