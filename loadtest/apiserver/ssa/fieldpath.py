"""Field sets: which fields of an object a manager owns, in the ``FieldsV1`` shape.

A set is a tree of plain dicts, as ``managedFields[].fieldsV1`` writes it: each key is a
path element and maps to the subtree below it; the key ``"."`` marks the node itself as a
member. Path elements are the strings structured-merge-diff writes:

- ``f:<name>``: a field of a struct or a key of a map;
- ``k:<json>``: the item of a list-type=map list whose keys have these values (compact JSON,
  keys sorted);
- ``v:<json>``: the item of a list-type=set list with this value;
- ``i:<n>``: an item by index (only in sets computed from atomic-list internals).

Invariants:

- Internally every member carries ``"."`` (``{"." : {}}`` is a leaf); ``decode``/``encode``
  convert from and to the wire form, where a member without children is written ``{}``.
- No node is empty: a subtree without members is dropped by every operation.
- Functions never mutate their inputs; results may share unchanged subtrees with them, so
  sets are treated as immutable once built (``remove_paths`` copies before it edits).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

Node = dict[str, "Node"]
SELF = "."


def member() -> Node:
    """A leaf member."""
    return {SELF: {}}


def decode(fields: Any) -> Node:
    """The internal set of a ``fieldsV1`` value; a ``{}`` leaf is a member.

    Raises ``ValueError`` if the value is not a tree of objects.
    """
    if not isinstance(fields, dict):
        raise ValueError("fieldsV1 must be an object")
    if not fields:
        return member()
    out: Node = {}
    for key, child in fields.items():
        if key == SELF:
            if child != {}:
                raise ValueError('the "." element must be empty')
            out[SELF] = {}
        else:
            out[key] = decode(child)
    return out


def encode(node: Node) -> dict[str, Any]:
    """The wire form (``fieldsV1``) of an internal set, keys in structured-merge-diff order."""
    if set(node) == {SELF}:
        return {}
    return {key: ({} if key == SELF else encode(node[key])) for key in sorted(node, key=_order)}


def _order(key: str) -> tuple[int, str]:
    return (0, "") if key == SELF else ({"f": 1, "v": 2, "k": 3, "i": 4}.get(key[0], 5), key)


def is_member(node: Node | None) -> bool:
    return node is not None and SELF in node


def empty(node: Node | None) -> bool:
    return not node


def union(a: Node | None, b: Node | None) -> Node:
    if not a:
        return b or {}
    if not b or a is b:
        return a
    out: Node = {}
    for key in a.keys() | b.keys():
        if key == SELF:
            out[SELF] = {}
        else:
            out[key] = union(a.get(key), b.get(key))
    return out


def difference(a: Node | None, b: Node | None) -> Node:
    """Members of ``a`` that are not members of ``b``."""
    if not a:
        return {}
    if not b:
        return a
    out: Node = {}
    for key, child in a.items():
        if key == SELF:
            if SELF not in b:
                out[SELF] = {}
        else:
            rest = difference(child, b.get(key))
            if rest:
                out[key] = rest
    return out


def intersection(a: Node | None, b: Node | None) -> Node:
    if not a or not b:
        return {}
    out: Node = {}
    for key in a.keys() & b.keys():
        if key == SELF:
            out[SELF] = {}
        else:
            both = intersection(a[key], b[key])
            if both:
                out[key] = both
    return out


def remove_paths(node: Node, paths: list[tuple[str, ...]]) -> Node:
    """``node`` without the exact members at ``paths`` (their descendants stay)."""
    for path in paths:
        node = _without(node, path)
    return node


def _without(node: Node, path: tuple[str, ...]) -> Node:
    if not path:
        return {k: v for k, v in node.items() if k != SELF} if SELF in node else node
    child = node.get(path[0])
    if child is None:
        return node
    rest = _without(child, path[1:])
    if rest is child:
        return node
    out = dict(node)
    if rest:
        out[path[0]] = rest
    else:
        del out[path[0]]
    return out


def members(node: Node, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every member path, parents before their children, siblings in wire order."""
    if SELF in node:
        yield prefix
    for key in sorted(node, key=_order):
        if key != SELF:
            yield from members(node[key], (*prefix, key))


# --- path elements ----------------------------------------------------------------------------


def field(name: str) -> str:
    return f"f:{name}"


def key_element(keys: dict[str, Any]) -> str:
    return "k:" + _json(dict(sorted(keys.items())))


def value_element(value: Any) -> str:
    return "v:" + _json(value)


def index_element(index: int) -> str:
    return f"i:{index}"


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def describe(path: tuple[str, ...]) -> str:
    """A path as the API server's conflict messages write it: ``.spec.ports[name="http"].port``,
    ``.spec.ports[port=80,protocol="TCP"]``, ``.metadata.finalizers[="x"]``, ``.args[0]``."""
    out = []
    for element in path:
        kind, text = element[0], element[2:]
        if kind == "f":
            out.append("." + text)
        elif kind == "k":
            keys = json.loads(text)
            out.append("[" + ",".join(f"{k}={_json(v)}" for k, v in keys.items()) + "]")
        elif kind == "v":
            out.append(f"[={text}]")
        else:
            out.append(f"[{text}]")
    return "".join(out)
