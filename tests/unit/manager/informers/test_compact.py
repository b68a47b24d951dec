from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from manager.informers.compact import compact_uid, compact_version, uid_text, version_text

VERSIONS = st.one_of(
    st.integers(min_value=0, max_value=2**64).map(str),
    st.from_regex(r"\A[0-9]{1,4}\Z"),  # leading zeros among them
    st.text(max_size=12),
    st.sampled_from(["", "0", "00", "+1", "-1", " 1", "1_0", "١٢", "1.0"]),
)
UIDS = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.uuids().map(lambda u: u.hex),
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            "u1",
            "+b6e2c36-4c1a-4f5e-9a41-2f8e7d0c9b1a",
            " b6e2c36-4c1a-4f5e-9a41-2f8e7d0c9b1a",
            "0b6e2c36-4c1a-4f5e-9a41_2f8e7d0c9b1a",
            "0b6e2c364-c1a-4f5e-9a41-2f8e7d0c9b1a",
            "0b6e2c36-4c1a-4f5e-9a41-2f8e7d0c9b1a",
        ]
    ),
)


@given(VERSIONS, VERSIONS)
def test_versions_round_trip_and_compare_as_their_text(a: str, b: str) -> None:
    assert version_text(compact_version(a)) == a
    assert (compact_version(a) == compact_version(b)) == (a == b)


def test_only_canonical_decimals_become_ints() -> None:
    assert compact_version("1048576") == 1048576
    assert compact_version("0") == 0
    assert compact_version("007") == "007"
    assert compact_version("") == ""
    assert compact_version("١٢") == "١٢"  # digits, but not ASCII ones


@given(UIDS, UIDS)
def test_uids_round_trip_and_compare_as_their_text(a: str, b: str) -> None:
    assert uid_text(compact_uid(a)) == a
    assert (compact_uid(a) == compact_uid(b)) == (a == b)


def test_only_canonical_uuids_become_ints() -> None:
    u = uuid.UUID("0b6e2c36-4c1a-4f5e-9a41-2f8e7d0c9b1a")
    assert compact_uid(str(u)) == u.int
    assert compact_uid(str(u).upper()) == str(u).upper()
    assert compact_uid("+b6e2c36-4c1a-4f5e-9a41-2f8e7d0c9b1a") == (
        "+b6e2c36-4c1a-4f5e-9a41-2f8e7d0c9b1a"
    )
