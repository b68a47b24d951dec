"""Test helpers for JSON values: a type-aware comparison and Hypothesis strategies.

Python's ``==`` says ``3 == 3.0`` and ``False == 0``; Go (and these tests) do not. ``strict``
maps a value to a form whose ``==`` tells every JSON type apart, ignores object key order
and keeps list order. -0.0 and 0.0 stay distinct (their Go JSON differs).
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st


def strict(value: Any) -> tuple[Any, ...]:
    """A comparable form of a JSON value that keeps its types."""
    if isinstance(value, dict):
        return ("object", sorted((k, strict(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", [strict(v) for v in value])
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value, math.copysign(1.0, value))
    if isinstance(value, str):
        return ("string", value)
    assert value is None, f"not a JSON value: {value!r}"
    return ("null",)


# Keys that need care in Go JSON: HTML characters, U+2028, non-ASCII, astral, case, empty.
# The conventional list-map keys are left out so that generated lists of objects only become
# list-maps where a strategy below means them to.
KEYS = st.sampled_from(["a", "b", "B", "c", "x-y", "<&>", "é", "\u2028", "\U0001d11e", "", "_"])

TEXT = st.text(
    alphabet=st.sampled_from("ab <>&'\"\\/\n\t\x00\x1f\x7f\u00e9\u2028\u2029\ufffd\U0001f600"),
    max_size=6,
) | st.text(max_size=4)

FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.0, -0.0, 3.0, 1e-6, 5e-6, 1e-7, 1e16, 1e20, 1e21, 0.5, 100.0]
)

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.integers(min_value=-3, max_value=3)
    | FLOATS
    | TEXT
)


# Text with every character class YAML treats specially (kube-apiserver reads apply bodies as
# YAML): its line breaks U+2028, U+2029, NEL, CR, LF; what it refuses raw (DEL, C1 controls,
# U+FFFE, U+FFFF); BOM, NBSP, C0 controls, tabs, blanks; indicators that mean something
# outside quotes; the text of an escape; HTML characters Go escapes; non-ASCII and astral.
YAML_SPECIAL = (
    "\u2028",
    "\u2029",
    "\x85",
    "\ufeff",
    "\x7f",
    "\x80",
    "\x9f",
    "\ufffe",
    "\uffff",
    "\xa0",
    "\x00",
    "\x1b",
    "\t",
    "\r",
    "\n",
    "\r\n",
    " ",
    ": ",
    " #",
    "---",
    "...",
    '"',
    "'",
    "\\",
    "\\u2028",
    "<",
    ">",
    "&",
    "é",
    "\U0001f600",
)
YAML_TEXT = st.lists(
    st.sampled_from(YAML_SPECIAL)
    | st.text(alphabet="ab ", max_size=3)
    | st.characters(codec="utf-8"),
    max_size=12,
).map("".join)


def json_values(*, max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Any JSON value, as apimachinery decodes it (ints within int64)."""
    return st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
        max_leaves=max_leaves,
    )


def list_maps(
    items: st.SearchStrategy[Any], *, unique: bool = True
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Lists of objects sharing one conventional merge key; its values share one type."""

    @st.composite
    def build(draw: st.DrawFn) -> list[dict[str, Any]]:
        key = draw(st.sampled_from(["containerPort", "port", "mountPath", "name", "ip"]))
        values = draw(
            st.sampled_from(
                [
                    st.text(alphabet="abc<&", min_size=1, max_size=3),
                    st.integers(0, 5),
                    st.sampled_from([1.0, 1e6, 2.5, -0.0, 1e21]),  # %v text may change
                ]
            )
        )
        keys = draw(st.lists(values, max_size=4, unique=unique))
        out = []
        for value in keys:
            item = draw(st.dictionaries(KEYS, items, max_size=3))
            item[key] = value
            out.append(item)
        return out

    return build()


def trees(*, unique_keys: bool = True, max_leaves: int = 16) -> st.SearchStrategy[Any]:
    """Kubernetes-like values: objects, atomic lists and list-maps.

    With ``unique_keys`` every list of objects is either a list-map with distinct keys or
    atomic, which keeps Metacontroller's duplicate-key quirk out of idempotence properties.
    """
    return st.recursive(
        SCALARS,
        lambda inner: (
            st.dictionaries(KEYS, inner, max_size=4)
            | st.lists(SCALARS, max_size=3)
            | list_maps(inner, unique=unique_keys)
        ),
        max_leaves=max_leaves,
    )
