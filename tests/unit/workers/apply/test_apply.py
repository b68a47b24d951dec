"""workers.apply against Metacontroller's behaviour (../shared/vectors/apply.json) and
properties of the 3-way merge."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from loadtest.bench.apply import reference_merge, reference_update
from proto.api import gojson
from tests.conftest import SHARED
from tests.jsonvalues import KEYS, SCALARS, json_values, list_maps, strict, trees
from workers import apply
from workers.apply import LAST_APPLIED_ANNOTATION as ANNOTATION

VECTORS = "vectors/apply.json"
T = TypeVar("T")


def _names(section: str) -> list[str]:
    path = SHARED / VECTORS
    if not path.is_file():
        return []  # test_vectors_are_present reports the missing file
    return [vector["name"] for vector in json.loads(path.read_text())[section]]


@pytest.fixture(scope="module")
def vectors(shared_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    data = json.loads((shared_dir / VECTORS).read_text())
    return {
        section: {vector["name"]: vector for vector in data[section]}
        for section in (
            "merge",
            "revertSystemFields",
            "lastAppliedRoundTrip",
            "applyUpdate",
            "createPath",
        )
    }


def test_vectors_are_present(vectors: dict[str, dict[str, dict[str, Any]]]) -> None:
    assert len(vectors["merge"]) >= 27
    assert vectors["applyUpdate"] and vectors["createPath"] and vectors["revertSystemFields"]


@pytest.mark.parametrize("name", _names("merge"))
def test_merge_vector(vectors: dict[str, dict[str, dict[str, Any]]], name: str) -> None:
    vector = vectors["merge"][name]
    before = strict([vector["observed"], vector["lastApplied"], vector["desired"]])
    merged = apply.merge(vector["observed"], vector["lastApplied"], vector["desired"])
    assert strict(merged) == strict(vector["expected"])
    assert strict([vector["observed"], vector["lastApplied"], vector["desired"]]) == before


@pytest.mark.parametrize("name", _names("revertSystemFields"))
def test_revert_system_fields_vector(
    vectors: dict[str, dict[str, dict[str, Any]]], name: str
) -> None:
    vector = vectors["revertSystemFields"][name]
    assert list(apply.SYSTEM_FIELDS) == vector["systemFields"]
    reverted = apply.revert_system_fields(vector["newObj"], vector["orig"])
    assert strict(reverted) == strict(vector["expected"])


@pytest.mark.parametrize("name", _names("lastAppliedRoundTrip"))
def test_last_applied_round_trip_vector(
    vectors: dict[str, dict[str, dict[str, Any]]], name: str
) -> None:
    vector = vectors["lastAppliedRoundTrip"][name]
    body = apply.create_body({"metadata": {}, **vector["input"]}, _OWNER)
    recorded = body["metadata"]["annotations"][ANNOTATION]
    assert recorded == gojson.dumps({"metadata": {}, **vector["input"]}).decode()
    assert gojson.dumps(vector["input"]).decode() == vector["annotationValue"]
    obj = {"metadata": {"annotations": {ANNOTATION: vector["annotationValue"]}}}
    assert strict(apply.last_applied(obj)) == strict(vector["input"])


@pytest.mark.parametrize("shortcut", [True, False])
@pytest.mark.parametrize("name", _names("applyUpdate"))
def test_apply_update_vector(
    vectors: dict[str, dict[str, dict[str, Any]]], name: str, shortcut: bool
) -> None:
    vector = vectors["applyUpdate"][name]
    merged, changed = apply.apply_update(vector["observed"], vector["desired"], shortcut=shortcut)
    assert strict(merged) == strict(vector["expected"])
    assert changed is vector["expectUpdate"]


@pytest.mark.parametrize("name", _names("createPath"))
def test_create_path_vector(vectors: dict[str, dict[str, dict[str, Any]]], name: str) -> None:
    vector = vectors["createPath"][name]
    body = apply.create_body(vector["desired"], apply.ControllerRef.of(vector["parent"]))
    assert strict(body) == strict(vector["expectedCreateBody"])


# --- behaviour beyond the vectors --------------------------------------------------------------

MERGE_KEYS = ("containerPort", "port", "mountPath", "name", "uid", "ip", "path")
_OWNER = apply.ControllerRef(api_version="example.com/v1", kind="Foo", name="p", uid="pu")


def test_merge_keys_are_go_percent_v_text() -> None:
    observed = {"l": [{"port": 80, "x": 1}, {"port": 1000000, "y": 1}]}
    desired = {"l": [{"port": "80", "z": 2}, {"port": 1e6}]}
    merged = apply.merge(observed, {}, desired)
    # 80 and "80" collide; 1000000 and 1e6 do not (%v of the float is "1e+06").
    assert strict(merged) == strict(
        {"l": [{"port": "80", "x": 1, "z": 2}, {"port": 1000000, "y": 1}, {"port": 1e6}]}
    )


def test_duplicate_desired_keys_add_the_last_item_once() -> None:
    desired = {"l": [{"name": "a", "v": 1}, {"name": "b"}, {"name": "a", "v": 2}]}
    merged = apply.merge({"l": [{"name": "c"}]}, {}, desired)
    assert strict(merged) == strict({"l": [{"name": "c"}, {"name": "a", "v": 2}, {"name": "b"}]})


def test_null_or_other_desired_over_a_list_map_removes_applied_items() -> None:
    observed = {"l": [{"name": "mine"}, {"name": "theirs"}]}
    merged = apply.merge(observed, {"l": [{"name": "mine"}]}, {"l": None})
    assert strict(merged) == strict({"l": [{"name": "theirs"}]})


def test_deep_equal_follows_go_types() -> None:
    assert not apply.deep_equal({"a": 3}, {"a": 3.0})
    assert not apply.deep_equal([False], [0])
    assert not apply.deep_equal({"a": None}, {})
    assert not apply.deep_equal([1, 2], [2, 1])
    assert apply.deep_equal({"a": [-0.0, {"b": "x"}]}, {"a": [0.0, {"b": "x"}]})


def test_an_integral_float_in_desired_is_an_update_every_time() -> None:
    desired = {"metadata": {"name": "x"}, "spec": {"replicas": 3.0}}
    observed = apply.create_body(desired, _OWNER) | {"spec": {"replicas": 3}}
    # Go JSON writes 3.0 as "3", the annotation matches, but int64 3 != float64 3.
    assert (
        observed["metadata"]["annotations"][ANNOTATION]
        == '{"metadata":{"name":"x"},"spec":{"replicas":3}}'
    )
    merged, changed = apply.apply_update(observed, desired)
    assert changed and type(merged["spec"]["replicas"]) is float


def test_an_echoed_annotation_is_removed_before_merging_and_recording() -> None:
    desired: dict[str, Any] = {
        "metadata": {"name": "x", "annotations": {ANNOTATION: "{}", "k": "v"}}
    }
    merged, changed = apply.apply_update({"metadata": {"name": "x"}}, desired)
    assert changed
    assert merged["metadata"]["annotations"] == {
        ANNOTATION: '{"metadata":{"annotations":{"k":"v"},"name":"x"}}',
        "k": "v",
    }
    assert desired["metadata"]["annotations"][ANNOTATION] == "{}"


def test_an_echo_alone_leaves_no_annotations_in_the_record() -> None:
    observed = apply.create_body({"metadata": {"name": "x"}, "data": {"a": "1"}}, _OWNER)
    echoed = observed["metadata"]["annotations"][ANNOTATION]
    desired = {"metadata": {"name": "x", "annotations": {ANNOTATION: echoed}}, "data": {"a": "1"}}
    merged, changed = apply.apply_update(observed, desired)
    assert not changed and merged is observed
    assert echoed == '{"data":{"a":"1"},"metadata":{"name":"x"}}'


def test_an_echoed_annotation_is_not_recorded_on_create() -> None:
    desired = {"metadata": {"name": "x", "annotations": {ANNOTATION: "old", "k": "v"}}}
    body = apply.create_body(desired, _OWNER)
    assert body["metadata"]["annotations"] == {
        ANNOTATION: '{"metadata":{"annotations":{"k":"v"},"name":"x"}}',
        "k": "v",
    }


def test_unchanged_child_is_returned_as_is() -> None:
    desired = {"metadata": {"name": "x"}, "data": {"a": "1"}}
    observed = apply.create_body(desired, _OWNER) | {"status": {"s": 1}}
    merged, changed = apply.apply_update(observed, desired)
    assert merged is observed and not changed


def test_float_merge_keys_abandon_the_shortcut_for_the_full_path() -> None:
    # 1e6 is written "1000000", so last-applied holds int 1000000 ("1000000") while desired
    # holds 1e6 ("1e+06"): the applied item is deleted and the desired one added.
    desired = {"l": [{"port": 1e6, "a": 1}]}
    observed: dict[str, Any] = {
        "metadata": {"annotations": {ANNOTATION: gojson.dumps(desired).decode()}}
    }
    observed["l"] = [{"port": 1000000, "a": 1, "foreign": True}]
    merged, changed = apply.apply_update(observed, desired, shortcut=False)
    assert changed and strict(merged["l"]) == strict([{"port": 1e6, "a": 1}])
    assert _both_paths_agree(observed, desired)


def _both_paths_agree(observed: dict[str, Any], desired: dict[str, Any]) -> bool:
    fast, fast_changed = apply.apply_update(observed, desired)
    full, full_changed = apply.apply_update(observed, desired, shortcut=False)
    return strict(fast) == strict(full) and fast_changed is full_changed


@pytest.mark.parametrize("text", ["{", "not json", "[]", '"str"', "12", '{"a":NaN}'])
def test_malformed_last_applied_is_a_typed_error(text: str) -> None:
    observed = {"metadata": {"name": "x", "annotations": {ANNOTATION: text}}}
    with pytest.raises(apply.LastAppliedError, match="last-applied-configuration"):
        apply.apply_update(observed, {"metadata": {"name": "x"}})
    with pytest.raises(apply.LastAppliedError):
        apply.last_applied(observed)


@pytest.mark.parametrize("text", ["", "null"])
def test_empty_or_null_last_applied_means_none(text: str) -> None:
    observed = {"metadata": {"annotations": {ANNOTATION: text}}, "a": 1, "b": 2}
    assert apply.last_applied(observed) is None
    merged, _ = apply.apply_update(observed, {"a": 3})
    assert merged["a"] == 3 and merged["b"] == 2


def test_objects_without_object_metadata_are_a_typed_error() -> None:
    with pytest.raises(apply.InvalidObjectError):
        apply.apply_update({"metadata": "x"}, {"a": 1})
    with pytest.raises(apply.InvalidObjectError):
        apply.apply_update([], {"a": 1})  # type: ignore[arg-type]
    with pytest.raises(apply.InvalidObjectError):
        apply.create_body({"metadata": 1}, _OWNER)


def test_create_keeps_an_existing_controller_reference_and_records_others() -> None:
    ref = _OWNER.as_owner_reference()
    other = {"apiVersion": "v1", "kind": "X", "name": "o", "uid": "ou"}
    body = apply.create_body({"metadata": {"ownerReferences": [other]}}, _OWNER)
    assert body["metadata"]["ownerReferences"] == [other, ref]
    assert '"uid":"ou"' in body["metadata"]["annotations"][ANNOTATION]
    again = apply.create_body({"metadata": {"ownerReferences": [ref]}}, _OWNER)
    assert again["metadata"]["ownerReferences"] == [ref]


# --- properties ----------------------------------------------------------------------------


class Draw(Protocol):
    """``DrawFn`` in a composite strategy or ``DataObject.draw`` in a test (which the
    ``DrawFn`` protocol, declaring ``__signature__``, does not accept)."""

    def __call__(self, strategy: st.SearchStrategy[T], label: object = None) -> T: ...


def _with_defaults(value: Any, draw: Draw) -> Any:
    """value as the API server might return it: extra keys in objects, extra items with
    fresh keys in list-maps. Atomic lists and scalars are left alone."""
    if isinstance(value, dict):
        out = {k: _with_defaults(v, draw) for k, v in value.items()}
        for key in draw(st.lists(st.sampled_from(["zz-default", "zz-other"]), max_size=2)):
            out.setdefault(key, draw(SCALARS))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        merge_key = next((k for k in MERGE_KEYS if all(k in v for v in value)), None)
        out_list = [_with_defaults(v, draw) for v in value]
        if merge_key is not None and draw(st.booleans()):
            sidecar = "sidecar" if isinstance(value[0][merge_key], str) else -1
            out_list.append({merge_key: sidecar})
        return out_list
    return value


def _evolve(value: Any, draw: Draw) -> Any:
    """A later desired state of the same shape: keys dropped, scalars changed."""
    if isinstance(value, dict):
        return {
            k: v if k in MERGE_KEYS else _evolve(v, draw)
            for k, v in value.items()
            if isinstance(v, dict | list) or k in MERGE_KEYS or draw(st.integers(0, 3))
        }
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_evolve(v, draw) for v in value[: draw(st.integers(0, len(value)))]]
    if isinstance(value, list):
        return value
    return draw(SCALARS) if draw(st.booleans()) else value


@st.composite
def desired_children(draw: st.DrawFn, *, unique_keys: bool = True) -> dict[str, Any]:
    body = draw(st.dictionaries(KEYS, trees(unique_keys=unique_keys), max_size=4))
    labels = draw(st.dictionaries(KEYS, st.text(max_size=3), max_size=2))
    return {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "c", "labels": labels}} | body


def _as_observed(desired: dict[str, Any], draw: Draw) -> dict[str, Any]:
    """A child created from desired, then defaulted by the server."""
    created = apply.create_body(desired, _OWNER)
    body: dict[str, Any] = _with_defaults(
        {k: v for k, v in created.items() if k != "metadata"}, draw
    )
    system = {"uid": "u", "resourceVersion": "7", "managedFields": [{"m": 1}]}
    status = draw(json_values(max_leaves=3))
    return body | {"metadata": created["metadata"] | system, "status": status}


@settings(deadline=None)
@given(st.data())
def test_no_update_when_only_server_defaults_were_added(data: st.DataObject) -> None:
    desired = data.draw(desired_children())
    observed = _as_observed(desired, data.draw)
    for shortcut in (True, False):
        merged, changed = apply.apply_update(observed, desired, shortcut=shortcut)
        assert not changed
        assert strict(merged) == strict(observed)


@settings(deadline=None)
@given(st.data())
def test_applying_the_same_desired_twice_changes_nothing_the_second_time(
    data: st.DataObject,
) -> None:
    old = data.draw(desired_children())
    observed = _as_observed(old, data.draw)
    new = _evolve(old, data.draw)
    once, _ = apply.apply_update(observed, new)
    twice, changed = apply.apply_update(once, new)
    assert not changed
    assert strict(twice) == strict(once)


def _check_ownership(observed: Any, old: Any, new: Any, merged: Any) -> None:
    """Keys of observed: desired ones are present, formerly applied ones gone, the rest
    untouched (recursively where all four are objects)."""
    for key, value in observed.items():
        if key in new:
            assert key in merged
            if all(isinstance(v, dict) for v in (value, old.get(key, {}), new[key], merged[key])):
                _check_ownership(value, old.get(key, {}), new[key], merged[key])
        elif key in old:
            assert key not in merged
        else:
            assert merged[key] is value


@settings(deadline=None)
@given(st.data())
def test_keys_added_by_others_survive_unless_previously_applied(data: st.DataObject) -> None:
    old = data.draw(desired_children())
    observed = _as_observed(old, data.draw)
    new = _evolve(old, data.draw)
    merged = apply.merge(observed, apply.last_applied(observed), new)
    body = {k: v for k, v in observed.items() if k not in ("metadata", "status")}
    _check_ownership(body, old, new, merged)


@settings(deadline=None)
@given(
    json_values(),
    st.none() | st.dictionaries(KEYS, trees(unique_keys=False)),
    st.dictionaries(KEYS, trees(unique_keys=False)),
)
def test_merge_never_mutates_its_inputs(observed: Any, last: Any, desired: Any) -> None:
    observed = {"o": observed, "l": copy.deepcopy(desired)}
    before = strict([observed, last, desired])
    apply.merge(observed, last, desired)
    apply.apply_update(observed, desired)
    assert strict([observed, last, desired]) == before


_DUPLICATES = {"l": [{"name": "a", "v": 1}, {"name": "a", "v": 2}]}


@settings(deadline=None)
@given(
    st.dictionaries(KEYS, trees(unique_keys=False) | json_values(max_leaves=6), max_size=4),
    st.none() | st.dictionaries(KEYS, trees(unique_keys=False), max_size=4),
    st.dictionaries(KEYS, trees(unique_keys=False) | json_values(max_leaves=6), max_size=4),
)
@example(_DUPLICATES, None, copy.deepcopy(_DUPLICATES))  # equal, yet Go collapses duplicates
@example({"s": _DUPLICATES}, None, {"s": copy.deepcopy(_DUPLICATES)})
@example({"a": 0.0, "b": [0.0]}, None, {"a": -0.0, "b": [-0.0]})  # Go keeps desired's -0
@example({"a": 1, "b": [1], "c": 0}, None, {"a": 1.0, "b": [True], "c": False})
@example({"s": {"a": 1, "b": "x"}}, None, {"s": {"a": True, "b": "x"}})  # equal under ==
@example({"l": [{"name": "n", "v": 1}]}, None, {"l": [{"name": "n", "v": 1.0}]})
def test_merge_matches_metacontrollers_algorithm(observed: Any, last: Any, desired: Any) -> None:
    expected = reference_merge(observed, copy.deepcopy(last), copy.deepcopy(desired))
    assert strict(apply.merge(observed, last, desired)) == strict(expected)


@settings(deadline=None)
@given(st.data())
def test_shortcut_and_full_path_both_match_metacontrollers_update(data: st.DataObject) -> None:
    desired = data.draw(desired_children(unique_keys=False))
    recorded = data.draw(st.sampled_from([desired, _evolve(desired, data.draw)]))
    observed = data.draw(st.dictionaries(KEYS, trees(unique_keys=False), max_size=3))
    observed |= _as_observed(recorded, data.draw)
    if data.draw(st.booleans()):
        observed[data.draw(KEYS)] = data.draw(list_maps(SCALARS, unique=False))
    expected, _ = reference_update(observed, desired)
    for shortcut in (True, False):
        merged, changed = apply.apply_update(observed, desired, shortcut=shortcut)
        assert strict(merged) == strict(expected)
        assert changed is not apply.deep_equal(expected, observed)
