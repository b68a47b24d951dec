from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from manager.informers.compact import compact_version, version_text

VERSIONS = st.one_of(
    st.integers(min_value=0, max_value=2**64).map(str),
    st.from_regex(r"\A[0-9]{1,4}\Z"),  # leading zeros among them
    st.text(max_size=12),
    st.sampled_from(["", "0", "00", "+1", "-1", " 1", "1_0", "١٢", "1.0"]),
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
