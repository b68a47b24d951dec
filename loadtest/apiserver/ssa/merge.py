"""Merging an applied configuration into the live object, and removing what nobody applies.

- ``merge(live, config, t)`` is structured-merge-diff's ``Merge``: granular structs and maps
  merge key by key (live keys the config lacks stay), atomic values and scalars are replaced by
  the config's, list-type=map and set lists merge item by item (items matched by key or value,
  merged recursively), in structured-merge-diff's order: live items keep their place, the
  config's items take the relative order the config gives them, new items follow the config
  item before them.
- ``prune(merged, last, owned, t)``: after a manager applied, remove from ``merged`` every
  field, map key or list item the manager applied last time (``last``) that no manager owns
  now (``owned``: the union of every manager's set, the applier's new one included), with
  everything below it. A struct the manager owned fields of is walked, not removed whole (it
  may hold fields nobody owns, such as defaults), and goes away only when pruning empties it.

Inputs are never mutated; results share unchanged subtrees with them.
"""

from __future__ import annotations

from typing import Any

from loadtest.apiserver.ssa import fieldpath as fp
from loadtest.apiserver.ssa.fieldset import item_element, items
from loadtest.apiserver.ssa.types import LIST, MAP, STRUCT, Type

_ABSENT: Any = object()


def merge(live: Any, config: Any, t: Type) -> Any:
    t_config = t.resolve(config)
    if live is _ABSENT or t_config.atomic or t_config.kind not in (STRUCT, MAP, LIST):
        return config
    if t.resolve(live).kind != t_config.kind:
        return config
    if t_config.kind == LIST:
        if not isinstance(live, list) or not isinstance(config, list):
            return config
        return _merge_list(live, config, t_config)
    if not isinstance(live, dict) or not isinstance(config, dict):
        return config
    out = dict(live)
    for key, value in config.items():
        child_type, _ = t_config.child(key)
        out[key] = merge(live.get(key, _ABSENT), value, child_type)
    return out


def _merge_list(live: list[Any], config: list[Any], t: Type) -> list[Any]:
    item_type = t.item()
    lhs = items(live, t)
    rhs = items(config, t)
    observed_lhs = dict(lhs)
    observed_rhs = dict(rhs)
    shared = [element for element, _ in rhs if element in observed_lhs]
    next_shared = 0
    merged_rhs: set[str] = set()
    out: list[Any] = []
    li = ri = 0

    def merged_item(element: str) -> Any:
        return merge(observed_lhs.get(element, _ABSENT), observed_rhs[element], item_type)

    while li < len(lhs) or ri < len(rhs):
        if li < len(lhs) and ri < len(rhs):
            element = lhs[li][0]
            if element == rhs[ri][0]:
                merged_rhs.add(element)
                out.append(merged_item(element))
                li += 1
                ri += 1
                if next_shared < len(shared) and shared[next_shared] == element:
                    next_shared += 1
                continue
            if (
                element in observed_rhs
                and next_shared < len(shared)
                and shared[next_shared] != element
            ):
                li += 1
                continue
        if li < len(lhs):
            element = lhs[li][0]
            if element not in observed_rhs:
                out.append(lhs[li][1])
                li += 1
                continue
            if element in merged_rhs:
                li += 1
                continue
        if ri < len(rhs):
            element = rhs[ri][0]
            merged_rhs.add(element)
            out.append(merged_item(element))
            ri += 1
            if next_shared < len(shared) and shared[next_shared] == element:
                next_shared += 1
    return out


def prune(merged: Any, last: fp.Node, owned: fp.Node, t: Type) -> Any:
    """``merged`` without what ``last`` had and nobody owns now (see the module docstring)."""
    if not last:
        return merged
    t = t.resolve(merged)
    if t.atomic:
        return merged
    if t.kind == LIST and isinstance(merged, list):
        item_type = t.item()
        out = []
        changed = False
        for item in merged:
            element = item_element(item, t)
            below = last.get(element) if element is not None else None
            if element is None or below is None:
                out.append(item)
                continue
            if element not in owned:
                changed = True
                continue
            pruned = prune(item, below, owned[element], item_type)
            changed = changed or pruned is not item
            out.append(pruned)
        return out if changed else merged
    if t.kind in (STRUCT, MAP) and isinstance(merged, dict):
        result = merged
        for element, below in last.items():
            if element == fp.SELF or not element.startswith("f:"):
                continue
            key = element[2:]
            if key not in merged:
                continue
            value = merged[key]
            child_type, _ = t.child(key)
            if fp.is_member(below) and element not in owned:
                pruned = _ABSENT
            else:
                pruned = prune(value, below, owned.get(element, {}), child_type)
                if pruned is not value and not pruned and value:
                    pruned = _ABSENT  # emptied by pruning: gone, as Go omits it
            if pruned is not value:
                if result is merged:
                    result = dict(merged)
                if pruned is _ABSENT:
                    del result[key]
                else:
                    result[key] = pruned
        return result
    return merged
