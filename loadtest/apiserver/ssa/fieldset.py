"""Field sets computed from objects: what an applied configuration sets, what a write changed.

- ``to_set(value, t)`` is structured-merge-diff's ``ToFieldSet``: scalars, atomic values and
  list items are members; struct fields and map keys are members when they are leaves, empty or
  null, and map keys (not struct fields) are members even with children; a non-atomic struct
  or map is not a member itself.
- ``compare(old, new, t)`` is ``Compare``: ``added``, ``modified`` and ``removed`` sets. Leaves
  (scalars, atomic values, and granular values that are empty or null on both sides) are
  compared by value; granular values are walked, and a granular value present on one side only
  is itself added or removed, with everything below it.
- ``item_element(item, t)`` names a list item (``k:``/``v:``); ``None`` for an item that cannot
  be keyed (not an object, or a key field missing without a default).

Values are JSON values; ``MISSING`` stands for an absent field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadtest.apiserver.ssa import fieldpath as fp
from loadtest.apiserver.ssa.types import LIST, MAP, STRUCT, Type

MISSING: Any = object()


def item_element(item: Any, t: Type) -> str | None:
    if t.list_type == "set":
        return fp.value_element(item)
    if not isinstance(item, dict):
        return None
    keys: dict[str, Any] = {}
    for name in t.keys:
        if name in item:
            keys[name] = item[name]
        elif name in t.key_defaults:
            keys[name] = t.key_defaults[name]
    if not keys:
        return None
    return fp.key_element(keys)


def items(values: list[Any], t: Type) -> list[tuple[str, Any]]:
    """``(element, item)`` pairs; unkeyable items get their index as element."""
    out = []
    for index, item in enumerate(values):
        element = item_element(item, t)
        out.append((element if element is not None else fp.index_element(index), item))
    return out


def to_set(value: Any, t: Type) -> fp.Node:
    t = t.resolve(value)
    node: fp.Node = {}
    if t.atomic or t.kind not in (STRUCT, MAP, LIST):
        return fp.member()
    if t.kind == LIST:
        if isinstance(value, list):
            item_type = t.item()
            for element, item in items(value, t):
                child = to_set(item, item_type)
                child[fp.SELF] = {}
                node[element] = fp.union(node.get(element), child)
        return node
    if not isinstance(value, dict):
        return fp.member()
    for key, child_value in value.items():
        child_type, named = t.child(key)
        child = to_set(child_value, child_type)
        if child_value is None or child_value == {} or not named:
            child[fp.SELF] = {}
        if child:
            node[fp.field(key)] = child
    return node


@dataclass(slots=True)
class Comparison:
    added: fp.Node = field(default_factory=dict)
    modified: fp.Node = field(default_factory=dict)
    removed: fp.Node = field(default_factory=dict)


def compare(old: Any, new: Any, t: Type) -> Comparison:
    result = Comparison()
    _compare(old, new, t, result.added, result.modified, result.removed)
    return result


def _compare(
    old: Any, new: Any, t: Type, added: fp.Node, modified: fp.Node, removed: fp.Node
) -> None:
    """Fill the three sets at this position (each argument is this position's node)."""
    if old is new or (
        old is not MISSING and new is not MISSING and old == new and _equal(old, new)
    ):
        return  # equal subtrees (the common case) cost one C-level comparison
    t_old = t.resolve(old) if old is not MISSING else None
    t_new = t.resolve(new) if new is not MISSING else None
    shape = t_new or t_old
    assert shape is not None
    if t_old is not None and t_new is not None and t_old.kind != t_new.kind:
        _leaf(old, new, added, modified, removed)
        return
    if shape.atomic or shape.kind not in (STRUCT, MAP, LIST):
        _leaf(old, new, added, modified, removed)
        return
    if shape.kind == LIST:
        old_list = old if isinstance(old, list) else None
        new_list = new if isinstance(new, list) else None
        if not old_list and not new_list:
            _leaf(old, new, added, modified, removed)
            return
        item_type = shape.item()
        old_items = dict(items(old_list or [], shape))
        new_items = dict(items(new_list or [], shape))
        for element in old_items.keys() | new_items.keys():
            _descend(
                old_items.get(element, MISSING),
                new_items.get(element, MISSING),
                item_type,
                element,
                added,
                modified,
                removed,
            )
    else:
        old_map = old if isinstance(old, dict) else None
        new_map = new if isinstance(new, dict) else None
        if not old_map and not new_map:
            _leaf(old, new, added, modified, removed)
            return
        for key in (old_map or {}).keys() | (new_map or {}).keys():
            child_type, _ = shape.child(key)
            _descend(
                (old_map or {}).get(key, MISSING),
                (new_map or {}).get(key, MISSING),
                child_type,
                fp.field(key),
                added,
                modified,
                removed,
            )
    if old is MISSING:
        added[fp.SELF] = {}
    elif new is MISSING:
        removed[fp.SELF] = {}


def _descend(
    old: Any,
    new: Any,
    t: Type,
    element: str,
    added: fp.Node,
    modified: fp.Node,
    removed: fp.Node,
) -> None:
    a: fp.Node = {}
    m: fp.Node = {}
    r: fp.Node = {}
    _compare(old, new, t, a, m, r)
    for target, node in ((added, a), (modified, m), (removed, r)):
        if node:
            target[element] = node


def _leaf(old: Any, new: Any, added: fp.Node, modified: fp.Node, removed: fp.Node) -> None:
    if old is MISSING:
        added[fp.SELF] = {}
    elif new is MISSING:
        removed[fp.SELF] = {}
    elif not _equal(old, new):
        modified[fp.SELF] = {}


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``True != 1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b
