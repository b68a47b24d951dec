"""Field selectors (``?fieldSelector=``): parsing, per-resource fields, matching.

- Syntax of ``fields.ParseSelector``: comma-separated ``key=value``, ``key==value``,
  ``key!=value`` terms, backslash escapes; errors are worded like apimachinery's.
- Every resource supports ``metadata.name`` and ``metadata.namespace``; a resource's
  ``field_selectors`` add more (Pods, Secrets, Namespaces, Events). Aliases translate the
  events.k8s.io names (``regarding.name``) to the stored core/v1 ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadtest.apiserver import events
from loadtest.apiserver.errors import bad_request
from loadtest.apiserver.registry import ResourceType

_OPERATORS = ("!=", "==", "=")
_CONVERTED = frozenset({"Pod", "Event", "Secret", "Namespace"})


@dataclass(frozen=True, slots=True)
class Term:
    field: str
    value: str
    negate: bool


def _split_terms(text: str) -> list[str]:
    terms, current, escaped = [], "", False
    for c in text:
        if escaped:
            current += "\\" + c
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == ",":
            terms.append(current)
            current = ""
        else:
            current += c
    if escaped:
        current += "\\"
    terms.append(current)
    return terms


def _unescape(value: str) -> str:
    out, escaped = "", False
    for c in value:
        if escaped:
            if c not in "\\,=!":
                raise bad_request(f"invalid escape sequence: \\{c}")
            out += c
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",=":
            raise bad_request(f"invalid selector: unescaped {c} in value")
        else:
            out += c
    if escaped:
        raise bad_request("invalid selector: trailing backslash")
    return out


def parse(text: str, rt: ResourceType) -> tuple[Term, ...]:
    """Parse and check against ``rt``'s selectable fields. Raises a 400 ``ApiError``."""
    terms = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        for i in range(len(part)):
            op = next((o for o in _OPERATORS if part.startswith(o, i)), None)
            if op is not None:
                field, value = part[:i], part[i + len(op) :]
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        field = rt.field_aliases.get(field, field)
        if field not in ("metadata.name", "metadata.namespace") and field not in _known(rt):
            if rt.kind in _CONVERTED and not rt.custom:
                raise bad_request(f"field label not supported: {part[:i]}")
            raise bad_request(
                f'"{field}" is not a known field selector: '
                'only "metadata.name", "metadata.namespace"'
            )
        terms.append(Term(field, _unescape(value), op == "!="))
    return tuple(terms)


def _known(rt: ResourceType) -> frozenset[str]:
    return frozenset(rt.field_aliases.get(f, f) for f in rt.field_selectors)


def _value(obj: dict[str, Any], field: str, cache: dict[str, dict[str, str]]) -> str:
    meta = obj["metadata"]
    if field == "metadata.name":
        return str(meta.get("name", ""))
    if field == "metadata.namespace":
        return str(meta.get("namespace", ""))
    if obj.get("kind") == "Event":
        if "event" not in cache:
            cache["event"] = events.selectable_fields(obj)
        return cache["event"].get(field, "")
    node: Any = obj
    for part in field.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, bool):
        return "true" if node else "false"
    return "" if node is None else str(node)


def matches(terms: tuple[Term, ...], obj: dict[str, Any]) -> bool:
    cache: dict[str, dict[str, str]] = {}
    return all((_value(obj, term.field, cache) == term.value) != term.negate for term in terms)
