"""Labels and annotations a decorator's hook asks for, merged onto the object. Pure.

The hook answers ``labels`` and ``annotations`` as maps of key to a string or ``null``:
a string sets the key, ``null`` removes it, keys not named are left alone (Metacontroller's
``updateParent``). ``changes(current, wanted)`` is what actually differs: the entries that
set a new value or remove a present key. It is also a JSON merge patch fragment (``null``
removes), so an empty result means nothing to write. ``merged(current, changes)`` is the
resulting map.
"""

from __future__ import annotations

from collections.abc import Mapping

Changes = dict[str, str | None]


def changes(current: Mapping[str, str] | None, wanted: Mapping[str, str | None]) -> Changes:
    have = current or {}
    found: Changes = {}
    for key, value in wanted.items():
        if value is None:
            if key in have:
                found[key] = None
        elif have.get(key) != value:
            found[key] = value
    return found


def merged(current: Mapping[str, str] | None, delta: Mapping[str, str | None]) -> dict[str, str]:
    result = dict(current or {})
    for key, value in delta.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result
