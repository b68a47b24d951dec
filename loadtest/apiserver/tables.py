"""``meta.k8s.io`` Tables: what ``kubectl get`` asks for (``Accept: ...;as=Table``).

- ``negotiate(accept)``: ``"v1"``/``"v1beta1"`` when the first acceptable entry of the Accept
  header is a Table of that version, ``"json"`` when it is plain JSON, None when neither.
- ``table(...)``: the Table body for a list or one object. Columns come from ``printers`` for
  built-in types, from a CRD's ``additionalPrinterColumns`` for custom resources (NAME plus
  the columns; a lone ``Age`` date column when there are none, as apiextensions-apiserver
  does), NAME/AGE otherwise.
- ``watch_transform(...)``: for ``kubectl get -w``, each ADDED/MODIFIED/DELETED event's
  object becomes a one-row Table; only the first carries ``columnDefinitions`` (later ones
  have null, as the real server sets ``NoHeaders`` after the first event). BOOKMARK and
  ERROR events pass unchanged.
- ``includeObject``: ``Metadata`` (the default: a ``PartialObjectMetadata`` per row),
  ``Object`` (the object as the resource serves it) or ``None`` (no object).
- ``jsonpath`` is the subset
  of kubectl's JSONPath that printer columns use (fields, ``[N]``, ``[*]``,
  ``[?(@.f=="v")]``); the first match fills a cell, as in apiextensions-apiserver.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from loadtest.apiserver import timefmt
from loadtest.apiserver.errors import bad_request
from loadtest.apiserver.printers import PRINTERS, Column, age, human_duration

NAME_COLUMN = Column(
    "Name",
    "string",
    "name",
    0,
    "Name must be unique within a namespace. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
)
AGE_COLUMN = Column(
    "Age",
    "string",
    "",
    0,
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
)
INCLUDE_OBJECT = ("None", "Metadata", "Object")


def negotiate(accept: str | None) -> str | None:
    """The form the response takes: a Table version, ``"json"``, or None (406)."""
    if not accept:
        return "json"
    for part in accept.split(","):
        media, *raw = (p.strip() for p in part.split(";"))
        params = dict(p.split("=", 1) for p in raw if "=" in p)
        if media.lower() not in ("application/json", "*/*", "application/*"):
            continue
        wanted = params.get("as")
        if wanted is None and not {"g", "v"} & params.keys():
            return "json"
        if (
            wanted == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in ("v1", "v1beta1")
        ):
            return params["v"]
    return None


# --- JSONPath (the printer-column subset) ----------------------------------------------------

_STEP = re.compile(
    r"""\.(?P<field>[^.\[\]]+)
      | \[(?P<index>-?\d+|\*)\]
      | \[\?\(@\.(?P<key>[^=!<>\s]+)\s*==\s*(?P<quote>["']?)(?P<value>[^"')]*)(?P=quote)\)\]""",
    re.VERBOSE,
)


def parse_jsonpath(path: str) -> list[tuple[str, str]]:
    """``.a.b[0][?(@.t=="x")]`` -> steps; raises ValueError for what the subset lacks."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    steps: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _STEP.match(text, pos)
        if match is None:
            raise ValueError(f"unsupported JSONPath {path!r} at {text[pos:]!r}")
        if match["field"] is not None:
            steps.append(("field", match["field"]))
        elif match["index"] is not None:
            steps.append(("index", match["index"]))
        else:
            steps.append(("filter", f"{match['key']}={match['value']}"))
        pos = match.end()
    return steps


def jsonpath(obj: Any, path: str) -> list[Any]:
    """Every value ``path`` reaches in ``obj`` (empty when none)."""
    current = [obj]
    for step, arg in parse_jsonpath(path):
        found: list[Any] = []
        for value in current:
            if step == "field" and isinstance(value, dict) and arg in value:
                found.append(value[arg])
            elif step == "index" and isinstance(value, list):
                if arg == "*":
                    found.extend(value)
                elif -len(value) <= int(arg) < len(value):
                    found.append(value[int(arg)])
            elif step == "filter" and isinstance(value, list):
                key, wanted = arg.split("=", 1)
                found.extend(
                    v for v in value if isinstance(v, dict) and str(v.get(key, "")) == wanted
                )
        current = found
    return current


def _cell(column_type: str, value: Any, now: float) -> Any:
    """apiextensions-apiserver's ``cellForJSONValue`` (``string`` printed, not only kept)."""
    if value is None:
        return None
    if column_type == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if column_type == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if column_type == "boolean" and isinstance(value, bool):
        return value
    if column_type == "date" and isinstance(value, str):
        try:
            moment = timefmt.parse(value, micro=False)
        except ValueError:
            return "<invalid>"
        return human_duration(now - moment.timestamp())
    if column_type == "string":
        if isinstance(value, str):
            return value
        return orjson.dumps(value).decode()
    return None


@dataclass(frozen=True, slots=True)
class Printer:
    """Column definitions and how to fill one row's cells from an object."""

    columns: tuple[Column, ...]
    cells: Callable[[Mapping[str, Any], float], list[Any]]


def crd_printer(version: Mapping[str, Any]) -> Printer:
    """The printer of one CRD version: NAME plus ``additionalPrinterColumns``."""
    declared = list(version.get("additionalPrinterColumns") or ())
    if not declared:
        declared = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    columns = tuple(
        Column(
            c["name"],
            c.get("type", "string"),
            c.get("format", ""),
            int(c.get("priority", 0)),
            c.get("description", ""),
        )
        for c in declared
    )
    paths = [c.get("jsonPath", "") for c in declared]

    def cells(obj: Mapping[str, Any], now: float) -> list[Any]:
        row: list[Any] = [obj.get("metadata", {}).get("name", "")]
        for column, path in zip(columns, paths, strict=True):
            try:
                found = jsonpath(obj, path)
            except ValueError:
                found = []
            row.append(_cell(column.type, found[0], now) if found else None)
        return row

    return Printer((NAME_COLUMN, *columns), cells)


def builtin_printer(group: str, plural: str) -> Printer:
    """The printer of a built-in resource (NAME/AGE when it has none of its own)."""
    known = PRINTERS.get((group, plural))
    if known is not None:
        return Printer(*known)
    return Printer(
        (NAME_COLUMN, AGE_COLUMN),
        lambda obj, now: [obj.get("metadata", {}).get("name", ""), age(obj, now)],
    )


def include_object(query: Mapping[str, str]) -> str:
    value = query.get("includeObject", "Metadata") or "Metadata"
    if value not in INCLUDE_OBJECT:
        raise bad_request(
            f'includeObject must be one of "None", "Metadata" or "Object", got "{value}"'
        )
    return value


def table(
    printer: Printer,
    objects: Iterable[Mapping[str, Any]],
    *,
    version: str,
    include: str,
    now: float,
    list_meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``meta.k8s.io/<version>`` Table of ``objects`` (served shape, with kind/apiVersion)."""
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": printer.cells(obj, now)}
        if include == "Object":
            row["object"] = obj
        elif include == "Metadata":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": f"meta.k8s.io/{version}",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": dict(list_meta or {}),
        "columnDefinitions": [c.definition() for c in printer.columns],
        "rows": rows,
    }


def watch_transform(
    printer: Printer, *, version: str, include: str, now: Callable[[], float]
) -> Callable[[bytes], bytes]:
    """A rewriter of watch event lines into Table events (see the module docstring)."""
    first = True

    def transform(line: bytes) -> bytes:
        nonlocal first
        event = orjson.loads(line)
        if event.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
            return line
        obj = event["object"]
        rv = (obj.get("metadata") or {}).get("resourceVersion", "")
        body = table(
            printer,
            [obj],
            version=version,
            include=include,
            now=now(),
            list_meta={"resourceVersion": rv},
        )
        if not first:
            body["columnDefinitions"] = None
        first = False
        return b'{"type":"%s","object":%s}\n' % (event["type"].encode(), orjson.dumps(body))

    return transform
