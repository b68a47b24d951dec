"""PATCH documents: JSON merge patch, JSON patch and strategic merge patch.

- ``merge_patch`` is RFC 7386 (``null`` removes a key, lists are replaced).
- ``json_patch`` is RFC 6902 (add, remove, replace, move, copy, test); any failure raises
  ``PatchFailed`` (the API server answers it with an opaque 422).
- ``strategic_merge`` follows apimachinery's strategic merge patch for built-in types:
  lists with a ``patchMergeKey`` (``MERGE_KEYS``, taken from the Kubernetes API types) are
  merged item by item, ``finalizers`` as a set; directives ``$patch: replace|delete|merge``,
  ``$setElementOrder/<list>``, ``$deleteFromPrimitiveList/<list>`` and ``$retainKeys`` are
  honoured. Other lists are replaced, like in a merge patch.
"""

from __future__ import annotations

from typing import Any

Path = tuple[str, ...]
ITEM = "[]"


class PatchFailed(ValueError):
    """The patch does not apply to the object (a failed test, a missing path...)."""


# --- merge patch -----------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- JSON patch -------------------------------------------------------------------------------


def _tokens(pointer: Any) -> list[str]:
    if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
        raise PatchFailed(f"invalid JSON pointer {pointer!r}")
    if not pointer:
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _index(token: str, size: int, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return size
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchFailed(f"invalid array index {token!r}")
    index = int(token)
    if index > size or (index == size and not allow_end):
        raise PatchFailed(f"array index {index} out of bounds")
    return index


def _parent(doc: Any, tokens: list[str]) -> tuple[Any, str]:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchFailed(f"missing key {token!r}")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(token, len(node), allow_end=False)]
        else:
            raise PatchFailed("path traverses a scalar")
    return node, tokens[-1]


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchFailed(f"missing key {last!r}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(last, len(parent), allow_end=False)]
    raise PatchFailed("path traverses a scalar")


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchFailed("cannot remove the whole document")
    parent, last = _parent(doc, tokens)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchFailed(f"missing key {last!r}")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), allow_end=False))
    raise PatchFailed("path traverses a scalar")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent, last = _parent(doc, tokens)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), allow_end=True), value)
    else:
        raise PatchFailed("path traverses a scalar")
    return doc


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def json_patch(doc: Any, operations: list[Any]) -> Any:
    for op in operations:
        if not isinstance(op, dict):
            raise PatchFailed("operation is not an object")
        kind = op.get("op")
        path = _tokens(op.get("path"))
        if kind == "add":
            doc = _add(doc, path, _copy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            if not path:
                doc = _copy(op.get("value"))
            else:
                _remove(doc, path)
                doc = _add(doc, path, _copy(op.get("value")))
        elif kind in ("move", "copy"):
            source = _tokens(op.get("from"))
            value = _remove(doc, source) if kind == "move" else _copy(_get(doc, source))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchFailed("test failed")
        else:
            raise PatchFailed(f"unknown operation {kind!r}")
    return doc


# --- strategic merge patch ------------------------------------------------------------------

PRIMITIVE = ""  # a list of scalars merged as a set


def _pod_spec(prefix: Path) -> dict[Path, str]:
    keys: dict[Path, str] = {}
    for name in ("containers", "initContainers", "ephemeralContainers"):
        keys[(*prefix, name)] = "name"
        container = (*prefix, name, ITEM)
        keys[(*container, "ports")] = "containerPort"
        keys[(*container, "env")] = "name"
        keys[(*container, "volumeMounts")] = "mountPath"
        keys[(*container, "volumeDevices")] = "devicePath"
    for name, key in (
        ("volumes", "name"),
        ("imagePullSecrets", "name"),
        ("hostAliases", "ip"),
        ("topologySpreadConstraints", "topologyKey"),
        ("resourceClaims", "name"),
        ("schedulingGates", "name"),
    ):
        keys[(*prefix, name)] = key
    return keys


_TEMPLATE = ("spec", "template", "spec")
_CONDITIONS: dict[Path, str] = {("status", "conditions"): "type"}
_COMMON: dict[Path, str] = {
    ("metadata", "ownerReferences"): "uid",
    ("metadata", "finalizers"): PRIMITIVE,
}
_WORKLOAD: dict[Path, str] = {**_COMMON, **_CONDITIONS, **_pod_spec(_TEMPLATE)}

MERGE_KEYS: dict[str, dict[Path, str]] = {
    "Pod": {
        **_COMMON,
        **_CONDITIONS,
        **_pod_spec(("spec",)),
        ("status", "podIPs"): "ip",
        ("status", "hostIPs"): "ip",
    },
    "PodTemplate": {**_COMMON, **_pod_spec(("template", "spec"))},
    "Deployment": _WORKLOAD,
    "ReplicaSet": _WORKLOAD,
    "StatefulSet": _WORKLOAD,
    "DaemonSet": _WORKLOAD,
    "Job": _WORKLOAD,
    "CronJob": {**_COMMON, **_pod_spec(("spec", "jobTemplate", "spec", "template", "spec"))},
    "Service": {**_COMMON, **_CONDITIONS, ("spec", "ports"): "port"},
    "Namespace": {**_COMMON, **_CONDITIONS},
    "PersistentVolumeClaim": {**_COMMON, **_CONDITIONS},
    "ServiceAccount": {**_COMMON, ("secrets",): "name"},
}


def _strip(value: Any) -> Any:
    """A patch value without directives (what ends up stored when nothing merges)."""
    if isinstance(value, dict):
        return {
            k: _strip(v)
            for k, v in value.items()
            if not k.startswith("$") and not (isinstance(v, dict) and v.get("$patch") == "delete")
        }
    if isinstance(value, list):
        return [
            _strip(v) for v in value if not (isinstance(v, dict) and "$patch" in v and len(v) == 1)
        ]
    return value


class _Strategic:
    def __init__(self, keys: dict[Path, str]) -> None:
        self.keys = keys

    def merge_map(
        self, orig: dict[str, Any], patch: dict[str, Any], path: Path
    ) -> dict[str, Any] | None:
        directive = patch.get("$patch")
        if directive == "delete":
            return None
        if directive == "replace":
            return _strip(patch)
        result = dict(orig)
        for key, value in patch.items():
            if key.startswith("$"):
                continue
            child = (*path, key)
            if value is None:
                result.pop(key, None)
                continue
            current = result.get(key)
            if isinstance(value, dict) and isinstance(current, dict):
                merged = self.merge_map(current, value, child)
                if merged is None:
                    result.pop(key, None)
                else:
                    result[key] = merged
            elif isinstance(value, list) and isinstance(current, list) and child in self.keys:
                result[key] = self.merge_list(current, value, child)
            elif isinstance(value, dict) and value.get("$patch") == "delete":
                result.pop(key, None)
            else:
                result[key] = _strip(value)
        for key, value in patch.items():
            if key.startswith("$deleteFromPrimitiveList/") and isinstance(value, list):
                name = key.split("/", 1)[1]
                if isinstance(result.get(name), list):
                    result[name] = [x for x in result[name] if x not in value]
            elif key.startswith("$setElementOrder/") and isinstance(value, list):
                name = key.split("/", 1)[1]
                if isinstance(result.get(name), list):
                    result[name] = self._reorder(
                        result[name], value, self.keys.get((*path, name), PRIMITIVE)
                    )
        retain = patch.get("$retainKeys")
        if isinstance(retain, list):
            result = {k: v for k, v in result.items() if k in retain}
        return result

    def merge_list(self, orig: list[Any], patch: list[Any], path: Path) -> list[Any]:
        key = self.keys[path]
        if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
            return [
                _strip(p)
                for p in patch
                if not (isinstance(p, dict) and p.get("$patch") == "replace")
            ]
        if key == PRIMITIVE:
            return list(orig) + [x for x in patch if x not in orig]
        items = list(orig)
        for item in patch:
            if not isinstance(item, dict):
                continue
            ident = item.get(key)
            found = next(
                (
                    i
                    for i, cur in enumerate(items)
                    if isinstance(cur, dict) and cur.get(key) == ident
                ),
                None,
            )
            if item.get("$patch") == "delete":
                items = [
                    cur for cur in items if not (isinstance(cur, dict) and cur.get(key) == ident)
                ]
            elif found is None:
                items.append(_strip(item))
            else:
                merged = self.merge_map(items[found], item, (*path, ITEM))
                if merged is None:
                    del items[found]
                else:
                    items[found] = merged
        return items

    @staticmethod
    def _reorder(items: list[Any], order: list[Any], key: str) -> list[Any]:
        def ident(item: Any) -> Any:
            return item.get(key) if key and isinstance(item, dict) else item

        wanted = [o.get(key) if key and isinstance(o, dict) else o for o in order]
        rank = {w: i for i, w in enumerate(wanted) if isinstance(w, str | int | float | bool)}
        listed = iter(
            sorted((it for it in items if ident(it) in rank), key=lambda it: rank[ident(it)])
        )
        return [next(listed) if ident(it) in rank else it for it in items]


def strategic_merge(obj: dict[str, Any], patch: dict[str, Any], kind: str) -> dict[str, Any]:
    merged = _Strategic(MERGE_KEYS.get(kind, _COMMON)).merge_map(obj, patch, ())
    return merged if merged is not None else {}
