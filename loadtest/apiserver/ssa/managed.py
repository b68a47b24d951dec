"""``metadata.managedFields``: field ownership for every write, and server-side apply.

kube-apiserver's field manager (``k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager``)
over structured-merge-diff, as pure functions over JSON objects:

- ``update(live, new, ...)``: a create, PUT or non-apply PATCH by ``manager`` (operation
  ``Update``). Fields the write added or changed move to the manager's entry (merged with its
  previous Update entry of the same apiVersion and subresource; ``time`` set only when it took
  fields), fields it removed leave every entry, empty entries disappear. The request's own
  ``managedFields`` replace the stored ones when they decode (invalid ones are ignored; on a
  create the creator takes every field it sets from them); ``[]`` or ``[{}]`` reset them to none,
  and an existing object without managedFields is not tracked by non-apply writes
  (``skipNonApplied``).
- ``apply(live, config, ...)``: operation ``Apply``. The config (typed by ``types.Type``) is
  merged into the live object; the manager's set becomes the config's field set; fields it
  applied last time and nobody owns now are removed; fields whose value the apply changes and
  another manager owns are conflicts (``Conflicts``, a 409) unless ``force``, which takes them.
  An object without managedFields first gets a ``before-first-apply`` Update entry owning its
  fields. ``time`` is set only when the object changed.
- Ownership never covers the fields the API server sets (``apiVersion``, ``kind``,
  ``metadata.name``... the stripped members of ``_STRIPPED``) nor the fields the endpoint resets:
  ``status`` on the main resource of a kind with a status subresource, everything but
  ``status`` and ``metadata`` on ``/status``.
- Entries are written sorted as the API server sorts them: operation, time, manager,
  apiVersion, subresource.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from loadtest.apiserver.ssa import fieldpath as fp
from loadtest.apiserver.ssa.fieldset import compare, to_set
from loadtest.apiserver.ssa.merge import merge, prune
from loadtest.apiserver.ssa.types import Type

APPLY, UPDATE = "Apply", "Update"
BEFORE_FIRST_APPLY = "before-first-apply"
_STRIPPED: list[tuple[str, ...]] = [
    ("f:apiVersion",),
    ("f:kind",),
    ("f:metadata",),
    *(
        ("f:metadata", f"f:{name}")
        for name in (
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "clusterName",
            "generation",
            "managedFields",
            "resourceVersion",
        )
    ),
]
_OPERATIONS = (APPLY, UPDATE)


@dataclass(frozen=True, slots=True)
class Entry:
    """One ``managedFields`` entry."""

    manager: str
    operation: str
    api_version: str
    fields: fp.Node
    time: str | None = None
    subresource: str = ""

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """What makes two entries the same manager (Apply entries ignore apiVersion)."""
        version = self.api_version if self.operation == UPDATE else ""
        return (self.manager, self.operation, version, self.subresource)

    def describe(self) -> str:
        """How conflict messages name the manager."""
        if self.operation == UPDATE:
            return f'"{self.manager}" using {self.api_version}'
        return f'"{self.manager}"'

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
        }
        if self.time is not None:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = fp.encode(self.fields)
        if self.subresource:
            out["subresource"] = self.subresource
        return out


class InvalidManagedFields(ValueError):
    """A request's managedFields that do not decode (they are ignored, as the server does)."""


class Conflicts(Exception):
    """An apply would change fields other managers own: ``[(manager description, path)]``."""

    def __init__(self, conflicts: list[tuple[str, str]]) -> None:
        super().__init__(message(conflicts))
        self.conflicts = conflicts


def message(conflicts: list[tuple[str, str]]) -> str:
    """The 409 message: ``Apply failed with N conflict(s): ...``, fields grouped by manager."""
    count = len(conflicts)
    head = f"Apply failed with {count} conflict{'s' if count != 1 else ''}: "
    if count == 1:
        who, path = conflicts[0]
        return f"{head}conflict with {who}: {path}"
    groups: dict[str, list[str]] = {}
    for who, path in conflicts:
        groups.setdefault(who, []).append(path)
    parts = [
        f"conflicts with {who}:\n" + "\n".join(f"- {p}" for p in paths)
        for who, paths in groups.items()
    ]
    return head + "\n".join(parts)


def decode_entries(raw: Any) -> list[Entry]:
    """The entries of a ``managedFields`` value; ``InvalidManagedFields`` if any is invalid."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidManagedFields("managedFields must be a list")
    out = []
    for item in raw:
        if not isinstance(item, dict):
            raise InvalidManagedFields("a managedFields entry must be an object")
        operation = item.get("operation")
        if operation not in _OPERATIONS:
            raise InvalidManagedFields(f"unknown operation {operation!r}")
        if item.get("fieldsType", "FieldsV1") != "FieldsV1":
            raise InvalidManagedFields(f"unknown fieldsType {item.get('fieldsType')!r}")
        try:
            fields = fp.decode(item.get("fieldsV1") or {})
        except ValueError as err:
            raise InvalidManagedFields(str(err)) from None
        time = item.get("time")
        out.append(
            Entry(
                manager=str(item.get("manager", "")),
                operation=operation,
                api_version=str(item.get("apiVersion", "")),
                fields=fields,
                time=time if isinstance(time, str) else None,
                subresource=str(item.get("subresource", "")),
            )
        )
    return out


def is_reset(raw: Any) -> bool:
    """``[]`` or ``[{}]``: the request drops every entry."""
    return isinstance(raw, list) and (raw == [] or raw == [{}])


def encode_entries(entries: list[Entry]) -> list[dict[str, Any]]:
    def order(e: Entry) -> tuple[str, str, str, str, str]:
        return (e.operation, e.time or "", e.manager, e.api_version, e.subresource)

    return [e.to_json() for e in sorted(entries, key=order)]


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a write happens: the object's type, apiVersion, subresource and whether the kind
    has a status subresource (then each endpoint resets the other's fields)."""

    type: Type
    api_version: str
    subresource: str = ""
    has_status: bool = False

    def owned(self, fields: fp.Node) -> fp.Node:
        """``fields`` without the stripped members and the fields this endpoint resets."""
        out = fp.remove_paths(fields, _STRIPPED)
        if self.subresource == "status":
            return {k: v for k, v in out.items() if k in ("f:status", "f:metadata")}
        if self.has_status and "f:status" in out:
            return {k: v for k, v in out.items() if k != "f:status"}
        return out


def _request_entries(
    live: Mapping[str, Any], new: Mapping[str, Any], scope: Scope
) -> list[Entry] | None:
    """The entries to start from (``None``: reset to nothing)."""
    stored = decode_entries((live.get("metadata") or {}).get("managedFields")) if live else []
    if scope.subresource:
        return stored
    raw = (new.get("metadata") or {}).get("managedFields")
    if is_reset(raw):
        return None
    try:
        given = decode_entries(raw)
    except InvalidManagedFields:
        return stored
    return given or stored


def _find(entries: list[Entry], identity: tuple[str, str, str, str]) -> Entry | None:
    return next((e for e in entries if e.identity == identity), None)


def _others_lose(
    entries: list[Entry], skip: tuple[str, str, str, str] | None, lost: fp.Node
) -> list[Entry]:
    out = []
    for entry in entries:
        if entry.identity != skip and lost:
            entry = replace(entry, fields=fp.difference(entry.fields, lost))
        if entry.fields:
            out.append(entry)
    return out


def _record_update(
    entries: list[Entry], old: Any, new: Any, manager: str, scope: Scope, now: str
) -> list[Entry]:
    diff = compare(old, new, scope.type)
    removed = scope.owned(diff.removed)
    took = scope.owned(fp.union(diff.added, diff.modified))
    identity = (manager, UPDATE, scope.api_version, scope.subresource)
    entries = _others_lose(entries, identity, fp.union(took, removed))
    previous = _find(entries, identity)
    if previous is not None:
        entries = [e for e in entries if e is not previous]
        kept = fp.difference(previous.fields, removed)
        if not took:
            return [*entries, replace(previous, fields=kept)] if kept else entries
        return [*entries, replace(previous, fields=fp.union(kept, took), time=now)]
    if not took:
        return entries
    return [*entries, Entry(manager, UPDATE, scope.api_version, took, now, scope.subresource)]


def update(
    live: Mapping[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    scope: Scope,
    now: str,
    zero: Callable[[], dict[str, Any]],
) -> list[dict[str, Any]] | None:
    """The ``managedFields`` to store with ``new`` after an Update by ``manager``.

    ``live`` is the stored object (``None`` on create, when ``zero()`` is the empty object of
    the type as the server sees it). ``None`` means: store no managedFields.
    """
    entries = _request_entries(live or {}, new, scope)
    if live is not None and not entries:
        return None  # reset, or an existing object without managedFields: not tracked
    entries = entries or []
    old = _without_managed(live) if live is not None else zero()
    out = _record_update(entries, old, _without_managed(new), manager, scope, now)
    return encode_entries(out) or None


def apply(
    live: Mapping[str, Any] | None,
    config: dict[str, Any],
    *,
    manager: str,
    scope: Scope,
    force: bool,
    now: str,
    zero: Callable[[], dict[str, Any]],
    may_take: fp.Node | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]], bool]:
    """``(object, managedFields, changed)`` after ``manager`` applied ``config``.

    ``live`` is ``None`` when the apply creates the object. ``may_take`` are fields the
    manager takes from others without conflict (kubectl's last-applied fields). Raises
    ``Conflicts`` unless ``force``.
    """
    base = _without_managed(live) if live is not None else {}
    entries = decode_entries((live or {}).get("metadata", {}).get("managedFields"))
    if live is not None and not entries:
        entries = _record_update([], zero(), base, BEFORE_FIRST_APPLY, scope, now)
    identity = (manager, APPLY, "", scope.subresource)
    previous = _find(entries, identity)
    applied = scope.owned(to_set(config, scope.type))
    merged = merge(base, _without_managed(config), scope.type)
    others = [e for e in entries if e.identity != identity]
    owned = applied
    for entry in others:
        owned = fp.union(owned, entry.fields)
    if previous is not None:
        merged = prune(merged, previous.fields, owned, scope.type)
    diff = compare(base, merged, scope.type)
    changed_fields = scope.owned(fp.union(diff.added, diff.modified))
    removed = scope.owned(diff.removed)
    conflicts: list[tuple[str, str]] = []
    taken: dict[tuple[str, str, str, str], fp.Node] = {}
    for entry in others:
        clash = fp.intersection(entry.fields, changed_fields)
        if not clash:
            continue
        free = fp.intersection(clash, may_take) if may_take else {}
        blocking = fp.difference(clash, free)
        conflicts.extend((entry.describe(), fp.describe(p)) for p in fp.members(blocking))
        taken[entry.identity] = clash if force else free
    if conflicts and not force:
        raise Conflicts(conflicts)
    result = []
    for entry in others:
        fields = fp.difference(fp.difference(entry.fields, removed), taken.get(entry.identity))
        if fields:
            result.append(replace(entry, fields=fields))
    changed = bool(changed_fields or removed)
    time = now if changed else (previous.time if previous is not None else None)
    if applied:
        result.append(Entry(manager, APPLY, scope.api_version, applied, time, scope.subresource))
    return merged, encode_entries(result), changed


def _without_managed(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return dict(obj)
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


__all__ = [
    "APPLY",
    "BEFORE_FIRST_APPLY",
    "UPDATE",
    "Conflicts",
    "Entry",
    "InvalidManagedFields",
    "Scope",
    "apply",
    "decode_entries",
    "encode_entries",
    "is_reset",
    "message",
    "update",
]
