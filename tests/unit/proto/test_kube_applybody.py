"""proto.kube.applybody: JSON that kube-apiserver's YAML reading (go-yaml v2, as the embedded
cluster's ``goyaml`` reproduces it, checked against Go) gives back unchanged."""

from __future__ import annotations

import math
import re
from typing import Any

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from loadtest.apiserver import goyaml
from proto.api import gojson
from proto.kube import applybody
from tests.jsonvalues import FLOATS, YAML_TEXT, strict

ISSUE_TEXT = "a<b & c>d été \u2028 end"
# What must never be raw in an apply body, and what Go's encoding/json leaves raw.
UNSAFE = re.compile("[<>&\x7f-\x9f\u2028\u2029\ufffe\uffff]")
GO_LEAVES_RAW = re.compile("[\x7f-\x9f\ufffe\uffff]")

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | FLOATS.filter(lambda x: math.copysign(1.0, x) > 0 or x != 0)  # the server reads -0.0 as 0
    | YAML_TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(YAML_TEXT, inner, max_size=3),
    max_leaves=12,
)
BODIES = st.dictionaries(YAML_TEXT, VALUES, max_size=4)


def test_the_text_of_the_issue_is_written_as_go_writes_it() -> None:
    body = {"metadata": {"annotations": {"a": ISSUE_TEXT}}}
    encoded = applybody.encode(body)
    assert encoded == (
        b'{"metadata":{"annotations":{"a":"a\\u003cb \\u0026 c\\u003ed '
        + "été".encode()
        + b' \\u2028 end"}}}'
    )
    assert encoded == gojson.dumps(body)
    assert goyaml.loads(encoded) == body


def test_what_yaml_refuses_or_folds_is_escaped() -> None:
    text = "\x85 \x7f \x80 \x9f \u2029 \ufffe \uffff"
    assert applybody.encode([text]) == (
        b'["\\u0085 \\u007f \\u0080 \\u009f \\u2029 \\ufffe \\uffff"]'
    )


def test_a_body_with_nothing_to_escape_is_orjsons_output() -> None:
    body = {"kind": "Pod", "metadata": {"name": "été", "labels": {"x": "ü €"}}, "n": [1, 2.5]}
    assert applybody.encode(body) == orjson.dumps(body)


@settings(max_examples=300, deadline=None)
@given(BODIES)
@example({"k": ISSUE_TEXT})
@example({"a\u2028b": ["\x85--- x", "\u2029... y", " \x7f ", "\r\n"]})
def test_yaml_reads_back_what_was_encoded(body: dict[str, Any]) -> None:
    encoded = applybody.encode(body)
    assert UNSAFE.search(encoded.decode()) is None
    assert strict(orjson.loads(encoded)) == strict(body)
    # What the API server goes on with: the same JSON (it reads 3.0 back as the integer 3).
    assert gojson.dumps(goyaml.loads(encoded)) == gojson.dumps(body)


@given(YAML_TEXT.filter(lambda text: GO_LEAVES_RAW.search(text) is None))
def test_strings_are_written_byte_for_byte_as_go_writes_them(text: str) -> None:
    assert applybody.encode({"k": text}) == gojson.dumps({"k": text})
