"""The attempt headers every hook request carries (the fencing token for hooks)."""

from __future__ import annotations

from proto.hooks.attempt import attempt_headers


def test_the_headers_name_the_token_the_attempt_and_the_parent_version() -> None:
    parent = {"metadata": {"uid": "u-1", "resourceVersion": "42", "generation": 7}}
    assert attempt_headers(epoch=3, generation=12, attempt="w0.ab.5", parent=parent) == {
        "X-Metashard-Epoch": "3",
        "X-Metashard-Slot-Generation": "12",
        "X-Metashard-Attempt": "w0.ab.5",
        "X-Metashard-Parent-Uid": "u-1",
        "X-Metashard-Parent-Resource-Version": "42",
        "X-Metashard-Parent-Generation": "7",
    }


def test_a_parent_without_generation_or_metadata_sends_empty_values_and_zero() -> None:
    headers = attempt_headers(epoch=0, generation=0, attempt="a", parent={"metadata": {}})
    assert headers["X-Metashard-Parent-Generation"] == "0"
    assert headers["X-Metashard-Parent-Uid"] == ""
    assert attempt_headers(epoch=0, generation=0, attempt="a", parent={}) == headers
