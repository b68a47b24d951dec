"""loadtest.apiserver.goyaml against what kube-apiserver's YAML decoding (go-yaml v2 under
sigs.k8s.io/yaml) makes of the same bodies (``goyaml_vectors.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loadtest.apiserver import decode, goyaml
from proto.api import gojson
from tests.jsonvalues import strict

VECTORS = Path(__file__).with_name("goyaml_vectors.json")
CASES: list[dict[str, Any]] = json.loads(VECTORS.read_text())["cases"]

KNOWN = {
    "YAML plain scalar with raw TAB": "PyYAML ends a plain scalar at a tab; go-yaml keeps it",
    "YAML flow mapping over lines": "go-yaml reads a plain y/Y/n/N as a bool, PyYAML as a string",
}
"""Cases the emulator still reads differently, with the reason (none are JSON bodies)."""


def _params() -> list[object]:
    return [
        pytest.param(
            case,
            id=case["name"],
            marks=[pytest.mark.xfail(strict=True, reason=KNOWN[case["name"]])]
            if case["name"] in KNOWN
            else [],
        )
        for case in CASES
    ]


def test_the_vectors_cover_every_character_class() -> None:
    names = {case["name"] for case in CASES}
    for label in ("LS", "PS", "NEL", "BOM", "DEL", "C1-80", "C1-9F", "FFFE", "TAB", "CR", "LF"):
        assert {f"raw {label} between spaces", f"escaped {label} between spaces"} <= names
    assert len(CASES) >= 170


@pytest.mark.parametrize("case", _params())
def test_reads_a_body_as_kube_apiserver_does(case: dict[str, Any]) -> None:
    raw = case["body"].encode()
    if "error" in case:
        with pytest.raises(decode.SyntaxProblem) as caught:
            goyaml.loads(raw)
        assert str(caught.value) == case["error"]
    else:
        assert gojson.dumps(goyaml.loads(raw)).decode() == case["json"]


def test_numbers_are_int64_when_they_are_one_else_float64_as_apimachinery_reads_them() -> None:
    raw = (
        b"[3.0, -0.0, 1e16, 1E5, 6.583192045881951e16, 1.5, 1e21,"
        b" 9223372036854775807, 9223372036854775808, 1e400]"
    )
    assert strict(goyaml.loads(raw)) == strict(
        [3, 0, 10**16, 100000, 65831920458819510, 1.5, 1e21, 2**63 - 1, 2.0**63, "1e400"]
    )


def test_yaml_keeps_timestamps_as_strings() -> None:
    assert goyaml.loads(b"a: 2030-01-01T00:00:00Z\nb: [1, 2]\n") == {
        "a": "2030-01-01T00:00:00Z",
        "b": [1, 2],
    }
