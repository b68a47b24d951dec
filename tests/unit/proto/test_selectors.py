from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.api.selectors import (
    Operator,
    Requirement,
    Selector,
    SelectorError,
    from_label_selector,
    from_match_labels,
    parse,
)

# The objects of the conformance scenario 10 and what the real server selected.
OBJECTS = {
    "c1": {"app": "web", "tier": "frontend"},
    "c2": {"app": "web", "tier": "backend"},
    "c3": {"app": "db", "tier": "backend"},
    "c4": {"app": "cache"},
    "c5": {},
}


@pytest.mark.parametrize(
    ("text", "selected"),
    [
        ("app=web", ["c1", "c2"]),
        ("app==web", ["c1", "c2"]),
        ("app!=web", ["c3", "c4", "c5"]),
        ("app in (web,db)", ["c1", "c2", "c3"]),
        ("app notin (web)", ["c3", "c4", "c5"]),
        ("tier", ["c1", "c2", "c3"]),
        ("!tier", ["c4", "c5"]),
        ("app=web,tier=backend", ["c2"]),
        ("app in (web),tier notin (frontend)", ["c2"]),
        ("", ["c1", "c2", "c3", "c4", "c5"]),
        ("app=nomatch", []),
        ("app=", []),
        ("app>1", []),
        ("  app = web ,  tier  ", ["c1", "c2"]),
        ("x in (foo,,baz),app", []),
    ],
)
def test_selection_matches_the_real_server(text: str, selected: list[str]) -> None:
    selector = parse(text)
    assert [name for name, labels in OBJECTS.items() if selector.matches(labels)] == selected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("app in web", "unable to parse requirement: found 'web' expected: '('"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("=web", "found '=', expected: !, identifier, or 'end of string'"),
        ("app=web,", "found '', expected: identifier after ','"),
        ("app=web x", "found 'x', expected: ',' or 'end of string'"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a>x", 'unable to parse requirement: values[0]: Invalid value: "x"'),
        ("bad key!=1", "unable to parse requirement: found 'key', expected: in, notin"),
    ],
)
def test_parse_errors_use_the_api_server_wording(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse(text)
    assert str(err.value).startswith(message)


def test_integer_comparisons() -> None:
    assert parse("n>5").matches({"n": "7"})
    assert not parse("n>5").matches({"n": "5"})
    assert parse("n<5").matches({"n": "-3"})
    assert not parse("n<5").matches({"n": "abc"})
    assert not parse("n<5").matches({})


def test_keywords_are_values_in_value_position() -> None:
    assert parse("a in (in,notin)").matches({"a": "notin"})
    assert parse("a=in").matches({"a": "in"})


def test_struct_conversion() -> None:
    sel = from_label_selector(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["backend", "db"]},
                {"key": "canary", "operator": "DoesNotExist"},
            ],
        }
    )
    assert sel.matches({"app": "web", "tier": "db"})
    assert not sel.matches({"app": "web", "tier": "db", "canary": "1"})
    assert str(sel) == "app=web,!canary,tier in (backend,db)"
    assert from_label_selector({}).matches({"anything": "x"})
    assert from_label_selector({}).empty
    assert not from_label_selector(None).matches({})
    assert from_match_labels({"a": "b"}).matches({"a": "b", "c": "d"})


@pytest.mark.parametrize(
    ("struct", "message"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "Maybe"}]}, "not a valid label selector"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "can't be empty"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "empty"),
        ({"matchLabels": {"bad key": "x"}}, "name part must consist"),
        ({"matchLabels": {"a": "bad value!"}}, "a valid label must be"),
        ({"matchLabels": {"a": 1}}, "must be a string"),
        ("app=web", "must be an object"),
    ],
)
def test_invalid_structs_are_clear_errors(struct: object, message: str) -> None:
    with pytest.raises(SelectorError, match=message):
        from_label_selector(struct)  # type: ignore[arg-type]


_label = st.from_regex(r"[a-z0-9]([a-z0-9._-]{0,8}[a-z0-9])?", fullmatch=True)
_requirement = st.one_of(
    st.builds(lambda k, v: Requirement(k, Operator.EQUALS, (v,)), _label, _label),
    st.builds(lambda k, v: Requirement(k, Operator.NOT_EQUALS, (v,)), _label, _label),
    st.builds(
        lambda k, vs: Requirement(k, Operator.IN, tuple(sorted(vs))),
        _label,
        st.sets(_label, min_size=1, max_size=3),
    ),
    st.builds(
        lambda k, vs: Requirement(k, Operator.NOT_IN, tuple(sorted(vs))),
        _label,
        st.sets(_label, min_size=1, max_size=3),
    ),
    st.builds(lambda k: Requirement(k, Operator.EXISTS), _label),
    st.builds(lambda k: Requirement(k, Operator.DOES_NOT_EXIST), _label),
)


@given(st.lists(_requirement, max_size=4), st.dictionaries(_label, _label, max_size=4))
def test_string_form_round_trips(reqs: list[Requirement], labels: dict[str, str]) -> None:
    selector = Selector(tuple(sorted(reqs, key=lambda r: r.key)))
    reparsed = parse(str(selector))
    assert str(reparsed) == str(selector)
    assert reparsed.matches(labels) == selector.matches(labels)
    assert selector.matches(labels) == all(r.matches(labels) for r in reqs)
