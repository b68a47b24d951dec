"""loadtest.bench.apply: the plain baseline gives Metacontroller's answers, and the report
prints ratios only against figures measured in the run."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.bench import apply as bench
from tests.jsonvalues import KEYS, json_values, strict, trees
from workers import apply


@settings(deadline=None)
@given(
    st.dictionaries(KEYS, trees(unique_keys=False) | json_values(max_leaves=6), max_size=4),
    st.none() | st.dictionaries(KEYS, trees(unique_keys=False), max_size=4),
    st.dictionaries(KEYS, trees(unique_keys=False) | json_values(max_leaves=6), max_size=4),
)
def test_plain_merge_matches_metacontrollers_algorithm_and_mutates_nothing(
    observed: Any, last: Any, desired: Any
) -> None:
    inputs = copy.deepcopy([observed, last, desired])
    expected = bench.reference_merge(observed, copy.deepcopy(last), copy.deepcopy(desired))
    assert strict(bench.plain_merge(observed, last, desired)) == strict(expected)
    assert strict([observed, last, desired]) == strict(inputs)


@pytest.mark.parametrize("case", ["desired_steady", "desired_change"])
def test_plain_update_gives_the_same_answer_on_the_bench_inputs(case: str) -> None:
    inputs = json.loads(bench.INPUTS.read_text())
    observed, desired = inputs["observed"], inputs[case]
    expected = apply.apply_update(observed, desired)
    assert bench.plain_update(observed, desired) == expected
    assert expected[1] is (case == "desired_change")


def test_plain_update_strips_the_annotation_and_keeps_system_fields_and_status() -> None:
    desired = {
        "metadata": {"name": "a", "annotations": {apply.LAST_APPLIED_ANNOTATION: "{}"}},
        "data": {"k": "v"},
    }
    observed = {
        "metadata": {"name": "a", "uid": "u", "resourceVersion": "7"},
        "data": {"k": "old", "extra": "kept"},
        "status": {"phase": "x"},
    }
    merged, changed = bench.plain_update(observed, desired)
    assert changed
    assert merged == bench.reference_update(observed, desired)[0]
    assert merged["data"] == {"k": "v", "extra": "kept"}
    assert merged["status"] == {"phase": "x"}
    assert merged["metadata"]["uid"] == "u"
    recorded = json.loads(merged["metadata"]["annotations"][apply.LAST_APPLIED_ANNOTATION])
    assert recorded == {"metadata": {"name": "a"}, "data": {"k": "v"}}


def test_quick_run_prints_go_figures_only_as_references(capsys: pytest.CaptureFixture[str]) -> None:
    bench.main(quick=True)
    lines = capsys.readouterr().out.splitlines()
    references = [x for x in lines if "not measured here" in x]
    assert len(references) == 2
    assert all(" x " not in x and "vs" not in x for x in references)
    assert any("apply_update, steady state" in x and "vs plain" in x for x in lines)
    assert any("vs decode floor" in x for x in lines)
