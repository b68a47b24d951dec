from __future__ import annotations

from loadtest.apiserver import goyaml


def test_yaml_keeps_timestamps_as_strings() -> None:
    assert goyaml.loads(b"a: 2030-01-01T00:00:00Z\nb: [1, 2]\n") == {
        "a": "2030-01-01T00:00:00Z",
        "b": [1, 2],
    }
